"""Static audit of a candidate's source: what it may not do, found with Python's ``ast``.

The audit reads the source; it never runs it. It flags calls into PyTorch compute operators or
vendor libraries, try/except fallbacks, new streams, threads and processes, patching of module
attributes (timers, events, synchronisation), access to the harness, dynamic code
(``__import__``, ``eval``, ``getattr`` with a computed name) and introspection of other objects
(``gc``, ``inspect``, frames). Code inside ``@triton.jit`` functions is Triton, not PyTorch, and
is exempt from the PyTorch-operator rule, and so is ``__init__`` (parameters must be built the
way the reference builds them; the constructor's work is never timed nor returned). The run-time operator trace (``torch-compute``) and the
GPU profiler catch what a static reading cannot see, such as calling an ``nn.Linear``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warpforge.harness.checks import Finding, Reason


@dataclass(frozen=True)
class AuditPolicy:
    """What a candidate may use. The default is strict; suites always use the default."""

    allow_torch: bool = False
    """PyTorch compute operators (torch.*, F.*, tensor arithmetic) and ATen kernels."""
    allow_vendor: bool = False
    """cuBLAS / cuDNN / CUTLASS kernels and libraries loaded through ctypes."""
    allow_fallback: bool = False
    """try/except blocks (which can hide a failing kernel behind a PyTorch path)."""
    allow_streams: bool = False
    """Creating or switching CUDA streams."""

    def as_dict(self) -> dict[str, bool]:
        return {
            "allow_torch": self.allow_torch,
            "allow_vendor": self.allow_vendor,
            "allow_fallback": self.allow_fallback,
            "allow_streams": self.allow_streams,
        }


STRICT = AuditPolicy()

# torch.* functions that allocate, describe or configure and compute nothing.
_TORCH_NON_COMPUTE = frozenset(
    {
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "full", "full_like",
        "ones", "ones_like", "tensor", "as_tensor", "is_tensor", "is_floating_point", "Size",
        "device", "dtype", "finfo", "iinfo", "promote_types", "get_default_dtype",
        "manual_seed", "no_grad", "inference_mode", "enable_grad", "set_grad_enabled",
        "is_grad_enabled", "Tensor", "Generator", "broadcast_shapes", "numel",
    }
)  # fmt: skip
_TORCH_CUDA_NON_COMPUTE = frozenset(
    {"is_available", "current_device", "get_device_properties", "device_count", "device"}
)
_CONCURRENCY_MODULES = ("threading", "_thread", "multiprocessing", "subprocess", "concurrent",
                        "asyncio", "signal", "torch.multiprocessing")  # fmt: skip
_INTROSPECTION_MODULES = ("gc", "inspect", "sys", "traceback", "weakref", "builtins", "__main__")
_DYNAMIC_MODULES = ("importlib", "imp", "runpy", "pickle", "marshal", "types", "code", "codeop")
_VENDOR_MODULES = ("ctypes", "cffi", "cupy", "pycuda", "cuda", "cutlass", "nvmath", "cublas",
                   "cudnn", "torch.backends", "torch._C", "torch.ops", "torch.utils._python_dispatch",
                   "torch.library")  # fmt: skip
_TIMER_MODULES = ("time", "timeit")
# modules other modules commonly hold as attributes (logging.sys, logging.os, json.threading...)
_REACHABLE_MODULES = frozenset(
    {"sys", "os", "threading", "_thread", "multiprocessing", "subprocess", "signal", "time",
     "timeit", "gc", "inspect", "builtins", "importlib", "ctypes", "weakref", "traceback",
     "types", "pickle", "asyncio", "runpy"}
)  # fmt: skip
_FORBIDDEN_BUILTINS = {
    "__import__": Reason.AUDIT_DYNAMIC_CODE,
    "eval": Reason.AUDIT_DYNAMIC_CODE,
    "exec": Reason.AUDIT_DYNAMIC_CODE,
    "compile": Reason.AUDIT_DYNAMIC_CODE,
    "globals": Reason.AUDIT_INTROSPECTION,
    "locals": Reason.AUDIT_INTROSPECTION,
    "vars": Reason.AUDIT_INTROSPECTION,
    "open": Reason.AUDIT_INTROSPECTION,
    "id": Reason.AUDIT_INTROSPECTION,  # keys results on object identity: a replay cache
}
_INTROSPECTION_ATTRS = frozenset(
    {"__dict__", "__globals__", "__closure__", "__code__", "__subclasses__", "__builtins__",
     "__class__", "__bases__", "__mro__", "f_back", "f_locals", "f_globals", "gi_frame",
     "_getframe", "get_objects", "get_referrers", "get_referents", "data_ptr",
     "untyped_storage", "storage", "_cdata"}
)  # fmt: skip
_STREAM_ATTRS = frozenset(
    {"Stream", "stream", "set_stream", "ExternalStream", "CUDAGraph", "graph", "Event",
     "current_stream", "default_stream", "wait_stream", "record_stream", "_set_stream"}
)  # fmt: skip
_VENDOR_WORDS = ("cublas", "cudnn", "cutlass", "cusparse", "cufft", "curand", "nccl", "libcuda")
# Tensor methods that compute; flagged outside Triton kernels when their receiver is not `tl`.
_TENSOR_COMPUTE_METHODS = frozenset(
    {"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "sum", "mean", "amax", "amin",
     "softmax", "log_softmax", "exp", "log", "relu", "gelu", "sigmoid", "tanh", "add", "sub",
     "mul", "div", "pow", "sqrt", "rsqrt", "norm", "var", "std", "cumsum", "prod", "abs",
     "max", "min", "argmax", "argmin", "clamp", "where", "masked_fill", "layer_norm", "linear",
     "conv1d", "conv2d", "conv3d", "sort", "topk", "add_", "mul_", "div_", "sub_", "float",
     "half", "double", "bfloat16", "__matmul__", "addmm_", "dot", "mv", "outer"}
)  # fmt: skip


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_triton_jit(node: ast.FunctionDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = _dotted(target) or ""
        if name.split(".")[-1] in {"jit", "autotune", "heuristics"}:
            return True
    return False


class _Auditor(ast.NodeVisitor):
    def __init__(self, policy: AuditPolicy) -> None:
        self.policy = policy
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> full module/attribute path
        self._exempt_depth = 0

    def flag(self, reason: Reason, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(reason, f"line {line}: {what}"))

    def resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    # imports ---------------------------------------------------------------------------------
    def _check_module(self, module: str, node: ast.AST) -> None:
        def under(prefixes: tuple[str, ...]) -> bool:
            return any(module == p or module.startswith(p + ".") for p in prefixes)

        if module == "warpforge.harness" or module.startswith("warpforge.harness."):
            self.flag(Reason.AUDIT_HARNESS_ACCESS, node, f"imports the harness ({module})")
        elif module.startswith("warpforge.") and module.split(".")[1] in {"runtime", "catalog"}:
            self.flag(Reason.AUDIT_HARNESS_ACCESS, node, f"imports harness policy ({module})")
        elif under(_CONCURRENCY_MODULES):
            self.flag(Reason.AUDIT_CONCURRENCY, node, f"imports {module}: threads or processes")
        elif under(_INTROSPECTION_MODULES):
            self.flag(Reason.AUDIT_INTROSPECTION, node, f"imports {module}: reaches other objects")
        elif under(_DYNAMIC_MODULES):
            self.flag(Reason.AUDIT_DYNAMIC_CODE, node, f"imports {module}: dynamic code loading")
        elif under(_TIMER_MODULES):
            self.flag(Reason.AUDIT_PATCHING, node, f"imports {module}: timers are the harness'")
        elif under(_VENDOR_MODULES) and not self.policy.allow_vendor:
            self.flag(Reason.AUDIT_VENDOR, node, f"imports {module}: vendor or native library")
        elif module == "os" or module.startswith("os."):
            self.flag(Reason.AUDIT_CONCURRENCY, node, "imports os: processes and environment")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.flag(Reason.AUDIT_DYNAMIC_CODE, node, "relative import: a candidate is one file")
        self._check_module(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._check_module(full, node)
            self.aliases[alias.asname or alias.name] = full
        self.generic_visit(node)

    # structure -------------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        # Triton kernels are not PyTorch; a constructor must build parameters exactly as the
        # reference does (torch.rand, uniform_, ...), and its work is never timed or returned
        exempt = _is_triton_jit(node) or node.name == "__init__"
        self._exempt_depth += exempt
        self.generic_visit(node)
        self._exempt_depth -= exempt

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Try(self, node: ast.Try) -> None:
        if not self.policy.allow_fallback:
            self.flag(
                Reason.AUDIT_FALLBACK, node, "try/except: a fallback can hide a failing kernel"
            )
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _check_assign_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._check_assign_target(element)
            return
        if isinstance(target, ast.Attribute):
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.aliases:
                self.flag(
                    Reason.AUDIT_PATCHING,
                    target,
                    f"assigns {_dotted(target)}: patches a module the harness relies on",
                )

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_assign_target(target)
        # `T = torch` or `Tns = torch.Tensor`: the name is the module (or its attribute) from
        # here on, so `T.equal = ...` patches torch as surely as `torch.equal = ...`
        value = (
            self.resolve(node.value) if isinstance(node.value, ast.Name | ast.Attribute) else None
        )
        if value is not None and value.split(".")[0] in self._imported_roots():
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.aliases[target.id] = value
        self.generic_visit(node)

    def _imported_roots(self) -> set[str]:
        return {full.split(".")[0] for full in self.aliases.values()}

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_assign_target(node.target)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.generic_visit(node)

    # expressions -----------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTROSPECTION_ATTRS:
            self.flag(Reason.AUDIT_INTROSPECTION, node, f"accesses .{node.attr}")
        full = self.resolve(node) or ""
        # a module another module imported (`logging.sys`, `logging.os`, `json.threading`):
        # the same reach as importing it, so the same rule
        if full.count(".") >= 1 and isinstance(node.value, ast.Name | ast.Attribute):
            owner = self.resolve(node.value) or ""
            if owner.split(".")[0] in self._imported_roots() and node.attr in _REACHABLE_MODULES:
                self._check_module(node.attr, node)
        if (
            node.attr in _STREAM_ATTRS
            and full.startswith("torch.")
            and not self.policy.allow_streams
        ):
            self.flag(Reason.AUDIT_STREAM, node, f"uses {full}: side streams escape the timer")
        if "harness" in full.split("."):
            self.flag(Reason.AUDIT_HARNESS_ACCESS, node, f"accesses {full}")
        lowered = node.attr.lower()
        if any(word in lowered for word in _VENDOR_WORDS) and not self.policy.allow_vendor:
            self.flag(Reason.AUDIT_VENDOR, node, f"accesses {node.attr}: vendor library")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and "harness" in key.value:
            self.flag(Reason.AUDIT_HARNESS_ACCESS, node, f"indexes with {key.value!r}")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if (
            isinstance(node.op, ast.MatMult)
            and not self._exempt_depth
            and not self.policy.allow_torch
        ):
            self.flag(Reason.AUDIT_TORCH_OP, node, "uses the @ operator: a PyTorch matmul")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                lowered = arg.value.lower()
                if any(word in lowered for word in _VENDOR_WORDS) and not self.policy.allow_vendor:
                    self.flag(Reason.AUDIT_VENDOR, node, f"names a vendor library: {arg.value!r}")
                if "harness" in lowered:
                    self.flag(Reason.AUDIT_HARNESS_ACCESS, node, f"names {arg.value!r}")
        if isinstance(func, ast.Name):
            reason = _FORBIDDEN_BUILTINS.get(func.id)
            if reason is not None:
                self.flag(reason, node, f"calls {func.id}()")
            if func.id in {"getattr", "setattr", "delattr", "hasattr"}:
                name_arg = node.args[1] if len(node.args) > 1 else None
                if func.id != "getattr" or not (
                    isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)
                ):
                    self.flag(
                        Reason.AUDIT_DYNAMIC_CODE,
                        node,
                        f"calls {func.id}() with a computed name: hides what is accessed",
                    )
                elif isinstance(name_arg, ast.Constant):
                    self._check_torch_call(
                        f"{self.resolve(node.args[0]) or ''}.{name_arg.value}", node
                    )
        full = self.resolve(func) if isinstance(func, ast.Attribute | ast.Name) else None
        if full is not None:
            self._check_torch_call(full, node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "numpy"
            and not self._exempt_depth
            and not self.policy.allow_torch
        ):
            self.flag(
                Reason.AUDIT_TORCH_OP,
                node,
                "calls .numpy(): computes on the host, outside the kernel",
            )
        if (
            isinstance(func, ast.Attribute)
            and not self._exempt_depth
            and not self.policy.allow_torch
            and func.attr in _TENSOR_COMPUTE_METHODS
        ):
            receiver = self.resolve(func.value) or ""
            if not receiver.startswith(("triton", "tl", "math", "torch")):
                self.flag(
                    Reason.AUDIT_TORCH_OP, node, f"calls .{func.attr}(): a PyTorch compute method"
                )
        self.generic_visit(node)

    def _check_torch_call(self, full: str, node: ast.AST) -> None:
        if self._exempt_depth or self.policy.allow_torch or not full.startswith("torch."):
            return
        parts = full.split(".")
        if parts[1] == "nn" and len(parts) >= 3 and parts[2] not in {"functional", "init"}:
            return  # constructing modules/parameters (calling them shows in the op trace)
        if parts[1] == "cuda" and parts[-1] in _TORCH_CUDA_NON_COMPUTE | _STREAM_ATTRS:
            return  # streams are the stream rule's finding, not a compute operator
        if len(parts) == 2 and parts[1] in _TORCH_NON_COMPUTE:
            return
        self.flag(Reason.AUDIT_TORCH_OP, node, f"calls {full}(): a PyTorch compute operator")


def audit_source(
    source: str, *, policy: AuditPolicy = STRICT, filename: str = "<candidate>"
) -> list[Finding]:
    """Findings for ``source`` under ``policy`` (empty when it passes). Raises SyntaxError."""
    if not isinstance(source, str):
        raise TypeError(f"source: expected str, got {type(source).__name__}")
    if not isinstance(policy, AuditPolicy):
        raise TypeError(f"policy: expected AuditPolicy, got {type(policy).__name__}")
    tree = ast.parse(source, filename=filename)
    auditor = _Auditor(policy)
    auditor.visit(tree)
    unique: dict[str, Finding] = {}
    for finding in auditor.findings:
        unique.setdefault(str(finding), finding)
    return list(unique.values())


_VENDOR_KERNEL_WORDS = ("gemm", "gemv", "cublas", "cutlass", "cudnn", "xmma", "sm90_", "sm80_",
                        "ampere_", "hopper_", "volta_", "turing_", "nvjet", "cufft", "cusparse")  # fmt: skip
_ATEN_DATA_MOVEMENT_WORDS = ("fill", "copy", "memcpy", "memset", "cat", "index")


def forbidden_kernels(names: list[str], policy: AuditPolicy = STRICT) -> list[Finding]:
    """(10) GPU kernels the candidate launched that ``policy`` forbids (profiler names)."""
    findings = []
    for name in names:
        lowered = name.lower()
        if any(word in lowered for word in _VENDOR_KERNEL_WORDS):
            if not policy.allow_vendor:
                findings.append(Finding(Reason.VENDOR_KERNEL, f"launched vendor kernel {name}"))
        elif (
            ("at::native" in lowered or "aten" in lowered)
            and not any(word in lowered for word in _ATEN_DATA_MOVEMENT_WORDS)
            and not policy.allow_torch
        ):
            findings.append(Finding(Reason.VENDOR_KERNEL, f"launched ATen kernel {name}"))
    return findings
