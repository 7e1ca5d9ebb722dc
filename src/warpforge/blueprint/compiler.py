"""``warpforge.compile``: a blueprint (or a traced function) as a module running fused kernels.

Path of a call: the call signature (type, shape, dtype and device of each input) -> per-module
dict of resolved calls (the hit path: one tuple and one dict lookup, no validation repeated,
because an equal signature validates and binds identically) -> on a miss, validate and bind the
inputs -> specialisation (device, divisibility by 16 and power-of-two bucket of each input's
last dim) -> per-module dict of loaded programs -> on a miss, the :class:`~warpforge.cache.KernelRegistry` (memory -> disk
-> Redis) by a :class:`~warpforge.cache.CacheKey` of canonical hash + specialisation -> on a full
miss, code generation -> the source is written to this process's folder under
``<cache dir>/blueprint/modules`` (deleted when the process ends) and imported from that file
(Triton's JIT reads kernel source from files; Triton's own cache keeps the binaries).

Any failure in code generation, loading, or the first launch of a specialisation (where Triton
compiles) falls back to the PyTorch reference: logged once per blueprint and reason, counted by
``warpforge.cache.metrics.record_fallback``; ``strict=True`` raises instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from warpforge import runtime
from warpforge.blueprint import codegen, triton_startup
from warpforge.blueprint.codegen import GENERATOR_VERSION, KernelSourceGenerator, Plan
from warpforge.blueprint.generated_modules import bytecode_of, load_source_module
from warpforge.blueprint.ir import BlueprintIR
from warpforge.blueprint.program import KernelProgram, bind_inputs, run_reference
from warpforge.blueprint.registry import OperatorRegistry, default_registry
from warpforge.validation import describe

logger = logging.getLogger("warpforge.blueprint")


def concurrent_compile_enabled() -> bool:
    """``WARPFORGE_CONCURRENT_COMPILE=1``: a cold first call compiles a blueprint's kernels
    concurrently (:meth:`KernelProgram.compile_ahead`). Off by default: one measured run gained
    only where a blueprint has two kernels or more (docs/compiler.md)."""
    return runtime.env_flag("WARPFORGE_CONCURRENT_COMPILE")


SOURCE_FILE = "kernels.py"
BYTECODE_FILE = "kernels.bytecode"
"""The source's module code, marshalled (``generated_modules.bytecode_of``; entries written
before it existed, or by another Python, import from the source alone)."""


class BlueprintCompileError(RuntimeError):
    """Raised instead of falling back when ``strict=True``."""


_FALLBACK = object()  # a specialisation that runs the PyTorch reference
_LOGGED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()
MAX_COMPILED_MODULES = 1024
"""Modules kept by compile() for reuse; older ones are dropped (they keep working if held)."""
_COMPILED: OrderedDict[tuple[str, bool], CompiledBlueprint] = OrderedDict()
_TRACED: OrderedDict[tuple[Any, ...], CompiledBlueprint] = OrderedDict()


def _remember(
    table: OrderedDict[Any, CompiledBlueprint], key: Any, module: CompiledBlueprint
) -> None:
    table[key] = module
    while len(table) > MAX_COMPILED_MODULES:
        table.popitem(last=False)


def _bucket(size: int) -> int:
    return 1 << max(size - 1, 0).bit_length()


def specialisation(tensors: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """What a kernel set is specialised on: device type, and per input whether the last dim is
    divisible by 16 and its power-of-two bucket (dtypes and ranks are fixed by the IR)."""
    parts: list[Any] = [tensors[0].device.type if tensors else "cpu"]
    for tensor in tensors:
        last = tensor.shape[-1] if tensor.dim() else 1
        parts.append((last % 16 == 0, _bucket(last)))
    return tuple(parts)


MAX_CALL_SIGNATURES = 512
"""Exact input signatures remembered per module (ragged shapes each add one); the table is
cleared when full, so a model cycling through more shapes only pays the bind again."""


def call_signature(tensors: Sequence[object]) -> tuple[Any, ...] | None:
    """What fixes validation, bindings and the program of a call: each input's type, shape,
    dtype and device. None when an argument is not tensor-like (the slow path reports it)."""
    try:
        return tuple([(type(t), t.shape, t.dtype, t.device) for t in tensors])  # type: ignore[attr-defined]
    except AttributeError:
        return None


class CompiledBlueprint(torch.nn.Module):
    """A blueprint as a module: ``module(*tensors)`` returns a tensor (one output) or a tuple.

    Forward runs the generated kernels. Backward runs a generated backward blueprint when every
    operator has a gradient rule, otherwise autograd through the PyTorch reference.
    """

    def __init__(
        self, ir: BlueprintIR, *, strict: bool = False, registry: OperatorRegistry | None = None
    ) -> None:
        super().__init__()
        self.ir = ir
        self.strict = strict
        self.registry = registry or default_registry()
        self.graph_hash = ir.canonical_hash(None if registry is None else registry)
        ir.infer(self.registry)
        self._programs: dict[tuple[Any, ...], Any] = {}
        # call signature -> (program or _FALLBACK, bindings, device): the per-call hit path.
        self._calls: dict[tuple[Any, ...], tuple[Any, dict[str, int], torch.device]] = {}
        self._prepared: dict[tuple[Any, ...], Any] = {}  # loaded, first launch still to come
        # specialisation -> (kernel registry, binaries key, stored already) until first launch
        self._binaries: dict[tuple[Any, ...], tuple[Any, Any, bool]] = {}
        self._plan: Plan | None = None
        self._generator: KernelSourceGenerator | None = None
        self._backward: Any = None  # (CompiledBlueprint, input names) | False once decided
        self.kernel_registry: Any = None

    # ------------------------------------------------------------------ public
    @property
    def plan(self) -> Plan:
        if self._plan is None:
            self._generator = KernelSourceGenerator(self.ir, self.registry)
            self._plan = self._generator.plan()
        return self._plan

    def source(self) -> str:
        """The generated Triton source."""
        plan = self.plan
        assert self._generator is not None
        return self._generator.source(plan)

    def forward(self, *tensors: torch.Tensor) -> Any:
        resolved = self._calls.get(call_signature(tensors))  # type: ignore[arg-type]
        if resolved is None:
            return self._forward_resolving(tensors)
        program, bindings, device = resolved
        if device.type != "cuda" and (
            runtime.execution_path(device) is runtime.ExecutionPath.TORCH_REFERENCE
        ):  # the interpreter is switched by the environment, so CPU asks every time
            outputs = run_reference(self.ir, tensors, self.registry)
        elif torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            outputs = _KernelFunction.apply(self, *tensors)
        elif program is _FALLBACK:
            outputs = run_reference(self.ir, tensors, self.registry)
        else:
            outputs = program.run(tensors, bindings)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _forward_resolving(self, tensors: Sequence[torch.Tensor]) -> Any:
        """A call whose exact signature is new: validate, bind, run, then remember it."""
        bindings = bind_inputs(self.ir, tensors)
        device = tensors[0].device
        if runtime.execution_path(device) is runtime.ExecutionPath.TORCH_REFERENCE:
            outputs = run_reference(self.ir, tensors, self.registry)
        elif torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            outputs = _KernelFunction.apply(self, *tensors)
        else:
            outputs = self.run_kernels(tensors, bindings)
        spec = specialisation(tensors)
        if spec in self._programs:
            signature = call_signature(tensors)
            if signature is not None:
                if len(self._calls) >= MAX_CALL_SIGNATURES:
                    self._calls.clear()
                self._calls[signature] = (self._programs[spec], bindings, device)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def run_kernels(
        self, tensors: Sequence[torch.Tensor], bindings: Mapping[str, int] | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Forward through the fused kernels (or the reference where this one fell back).

        ``bindings`` are the symbolic sizes from an earlier :func:`bind_inputs` of ``tensors``.
        """
        program = self._programs.get(specialisation(tensors))
        if program is None:
            return self._first_run(tensors)
        if program is _FALLBACK:
            return run_reference(self.ir, tensors, self.registry)
        return program.run(tensors, bindings)

    def lookup(self, tensors: Sequence[torch.Tensor]) -> KernelProgram | None:
        """The in-process hit path alone (what every call does before launching): the loaded
        program for these inputs, if any."""
        resolved = self._calls.get(call_signature(tensors))
        if resolved is not None:
            program = resolved[0]
        else:  # a new exact signature whose specialisation is loaded already
            program = self._programs.get(specialisation(tensors))
        return program if isinstance(program, KernelProgram) else None

    def prepare(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Load (registry or codegen) the program for these inputs without launching it.

        Returns True when this call had to load it (an in-process miss).
        """
        spec = specialisation(tensors)
        if spec in self._programs or spec in self._prepared:
            return False
        self._prepared[spec] = self._load(spec, tensors[0].device)
        return True

    def _first_run(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        spec = specialisation(tensors)
        program = self._prepared.pop(spec, None) or self._load(spec, tensors[0].device)
        if program is not _FALLBACK:
            on_gpu = tensors[0].is_cuda
            # skip Triton's ~0.3 s self-hash when an earlier process recorded it; otherwise,
            # where Triton's JIT will run, hash while its driver is being built
            if on_gpu and not triton_startup.install() and program.direct is None:
                triton_startup.hash_in_background()
            program.launched = []
            program.launch_calls = []
            start = time.perf_counter()
            if on_gpu and program.direct is None and concurrent_compile_enabled():
                self._compile_ahead(program, tensors)
            try:
                outputs = program.run(tensors)
            except Exception as error:  # the first launch is where Triton compiles the kernels
                # Inputs the graph itself rejects (sizes a reshape cannot take, say) fail the
                # reference too: that is the caller's error, raised as the reference raises it,
                # and the program stays prepared for the next call's inputs.
                try:
                    outputs = run_reference(self.ir, tensors, self.registry)
                except Exception:
                    self._prepared[spec] = program
                    raise
                self._programs[spec] = self._fail(spec, "triton-compile", error)
                return outputs
            else:
                from warpforge.cache import metrics

                # the registry's "builds" time code generation only; Triton compiles here
                metrics.record_first_launch(time.perf_counter() - start)
                self._programs[spec] = program
                if on_gpu:
                    triton_startup.record()
                    self._store_binaries(spec, program.launched, program.launch_calls)
                return outputs
            finally:
                if program is not _FALLBACK:
                    program.launched = None
                    program.launch_calls = None
        self._programs[spec] = program
        return run_reference(self.ir, tensors, self.registry)

    def _compile_ahead(self, program: KernelProgram, tensors: Sequence[torch.Tensor]) -> None:
        """:meth:`KernelProgram.compile_ahead`; a failure there is logged, and the first run then
        compiles each kernel as it launches (a real compile error surfaces there)."""
        try:
            program.compile_ahead(tensors)
        except Exception as error:  # never worse than compiling one kernel at a time
            logger.warning(
                "blueprint %r: compiling its kernels concurrently failed (%s: %s); compiling "
                "them one at a time",
                self.ir.name,
                type(error).__name__,
                error,
            )

    def fell_back(self) -> bool:
        """True when some specialisation runs the PyTorch reference after a failure."""
        return any(p is _FALLBACK for p in self._programs.values())

    # ------------------------------------------------------------------ internals
    def _cache_key(self, spec: tuple[Any, ...], device: torch.device) -> Any:
        from warpforge.cache import CacheKey

        values: dict[str, object] = {"generator": GENERATOR_VERSION, "device_type": spec[0]}
        if codegen.COLUMN_SUMS:  # another plan, another source (absent when off: keys unchanged)
            values["column_sums"] = True
        for (name, schema), (div16, bucket) in zip(self.ir.inputs, spec[1:], strict=True):
            values[f"{name}.dtype"] = schema.dtype
            values[f"{name}.div16"] = div16
            values[f"{name}.bucket"] = bucket
        return CacheKey.for_current_environment(self.graph_hash, values, device)

    def _load(self, spec: tuple[Any, ...], device: torch.device) -> Any:
        from warpforge.cache import KernelArtifact, KernelRegistry

        try:
            registry = self.kernel_registry or KernelRegistry.default()
        except Exception as error:  # a cache setting that does not parse: no codegen failure
            return self._fail(spec, "cache-config", error)
        try:
            key = self._cache_key(spec, device)
            plan = self.plan

            def build() -> KernelArtifact:
                source = self.source()
                metadata = {
                    "blueprint": self.ir.name,
                    "graph_hash": self.graph_hash,
                    "generator_version": GENERATOR_VERSION,
                    "kernels": [g.kernel_name for g in plan.groups if g.kind != "torch"],
                }
                encoded = source.encode()
                files = {SOURCE_FILE: encoded, BYTECODE_FILE: bytecode_of(encoded)}
                return KernelArtifact(files, metadata)

            artifact = registry.get_or_build(key, build)
            module = load_source_module(
                artifact.files[SOURCE_FILE], key.digest(), artifact.files.get(BYTECODE_FILE)
            )
            program = KernelProgram(self.ir, plan, module, self.registry)
            if device.type == "cuda":
                program.direct = self._restore_binaries(spec, registry, key)
            return program
        except Exception as error:
            return self._fail(spec, "codegen", error)

    def _restore_binaries(self, spec: tuple[Any, ...], registry: Any, key: Any) -> Any:
        """Put this program's stored Triton binaries into Triton's cache before the first
        launch, so a registry hit does not recompile where Triton's own cache is empty.

        Returns the entry's recorded launches (a ``triton_direct.DirectLaunches``) or None."""
        from warpforge.blueprint import triton_binaries, triton_direct

        binaries_key = triton_binaries.binaries_key(key)
        direct = None
        try:
            stored = triton_binaries.fetch(registry, binaries_key)
            if stored is not None:
                triton_binaries.restore(stored)
        except Exception as error:  # an optimisation only: Triton compiles as usual
            logger.debug("Triton binaries for %s not restored: %s", self.ir.name, error)
            stored = None
        self._binaries[spec] = (registry, binaries_key, stored is not None)
        if stored is not None:
            try:
                direct = triton_direct.DirectLaunches.from_metadata(
                    stored.metadata, triton_binaries.triton_cache_dir(), self.ir.name
                )
            except Exception as error:  # an optimisation only: launches go through the JIT
                logger.debug("launch records of %s not used: %s", self.ir.name, error)
        return direct

    def _store_binaries(
        self,
        spec: tuple[Any, ...],
        launched: Sequence[Any] | None,
        calls: Sequence[tuple[Any, tuple[Any, ...], dict[str, Any]]] | None = None,
    ) -> None:
        """After the first successful GPU launch: store the Triton binaries if not stored yet,
        with a launch record (``triton_direct``) for each launch Triton's choice is vouched for."""
        from warpforge.blueprint import triton_binaries, triton_direct

        registry, binaries_key, present = self._binaries.pop(spec, (None, None, True))
        if present or not launched:
            return
        try:
            records = None
            if calls is not None and len(calls) == len(launched) and triton_direct.enabled():
                records = [
                    triton_direct.describe_launch(kernel, args, options, compiled)
                    for (kernel, args, options), compiled in zip(calls, launched, strict=True)
                ]
            artifact = triton_binaries.collect(launched, records)
            if artifact is not None:
                triton_binaries.store(registry, binaries_key, artifact)
        except Exception as error:  # never fail a launch over the cache
            logger.debug("Triton binaries for %s not stored: %s", self.ir.name, error)

    def _fail(self, spec: tuple[Any, ...], reason: str, error: Exception) -> Any:
        if self.strict:
            raise BlueprintCompileError(
                f"blueprint {self.ir.name!r} ({self.graph_hash[:12]}): {reason} failed for "
                f"specialisation {spec}: {type(error).__name__}: {error}"
            ) from error
        from warpforge.cache import metrics

        metrics.record_fallback(reason)
        with _LOCK:
            first = (self.graph_hash, reason) not in _LOGGED
            _LOGGED.add((self.graph_hash, reason))
        if first:
            logger.warning(
                "blueprint %r (%s): %s failed (%s: %s); running the PyTorch reference instead "
                "(results are identical; pass strict=True to raise)",
                self.ir.name,
                self.graph_hash[:12],
                reason,
                type(error).__name__,
                error,
            )
        return _FALLBACK

    def backward_program(self) -> Any:
        """(compiled backward blueprint, differentiated input names), or None for autograd."""
        if self._backward is None:
            from warpforge.blueprint.autodiff import backward_blueprint

            built = backward_blueprint(self.ir, self.registry)
            self._backward = (
                False if built is None else (compile(built[0], strict=self.strict), built[1])
            )
        return self._backward or None

    def extra_repr(self) -> str:
        return f"blueprint={self.ir.name!r}, hash={self.graph_hash[:12]}, strict={self.strict}"


class _KernelFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, compiled: CompiledBlueprint, *tensors: torch.Tensor) -> Any:
        ctx.compiled = compiled
        ctx.save_for_backward(*tensors)
        outputs = compiled.run_kernels(tensors)
        non_float = [o for o in outputs if not o.is_floating_point()]
        if non_float:
            ctx.mark_non_differentiable(*non_float)
        return outputs

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        compiled: CompiledBlueprint = ctx.compiled
        tensors = ctx.saved_tensors
        grads = tuple(
            torch.zeros_like(out) if g is None else g
            for g, out in zip(grads, _output_like(compiled, tensors, grads), strict=True)
        )
        generated = compiled.backward_program()
        names = compiled.ir.input_names
        if generated is not None:
            module, differentiated = generated
            results = module(*tensors, *(g.contiguous() for g in grads))
            results = results if isinstance(results, tuple) else (results,)
            by_name = dict(zip(differentiated, results, strict=True))
            return (
                None,
                *(
                    by_name.get(n) if t.requires_grad else None
                    for n, t in zip(names, tensors, strict=True)
                ),
            )
        inputs = [t.detach().requires_grad_(t.requires_grad) for t in tensors]
        with torch.enable_grad():
            outputs = run_reference(compiled.ir, inputs, compiled.registry)
        pairs = [(o, g) for o, g in zip(outputs, grads, strict=True) if o.requires_grad]
        wanted = [t for t in inputs if t.requires_grad]
        found = torch.autograd.grad(
            [o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True
        )
        by_id = {id(t): g for t, g in zip(wanted, found, strict=True)}
        return (None, *(by_id.get(id(t)) for t in inputs))


def _output_like(
    compiled: CompiledBlueprint, tensors: Sequence[torch.Tensor], grads: Sequence[Any]
) -> list[Any]:
    """Placeholders for missing output gradients (only computed when one is None)."""
    if all(g is not None for g in grads):
        return list(grads)
    with torch.no_grad():
        return list(run_reference(compiled.ir, tensors, compiled.registry))


def _signature(tensors: Sequence[object]) -> tuple[Any, ...]:
    return tuple(
        (tuple(t.shape), t.dtype, t.device.type) if isinstance(t, torch.Tensor) else describe(t)
        for t in tensors
    )


def compile(
    fn_or_blueprint: BlueprintIR | Callable[..., Any],
    example_inputs: Sequence[torch.Tensor] | None = None,
    *,
    strict: bool = False,
) -> CompiledBlueprint:
    """Compile a :class:`BlueprintIR`, or trace and compile a PyTorch function.

    ``example_inputs`` is required for a function (it fixes shapes and dtypes). The module is
    cached per canonical hash (and per function, input signature and the scalars its trace
    bakes in from globals, closures and defaults), so compiling the same blueprint again in
    this process is a dictionary lookup.
    """
    if not isinstance(strict, bool):
        raise TypeError(f"strict: expected a bool, got {describe(strict)}")
    if isinstance(fn_or_blueprint, BlueprintIR):
        if example_inputs is not None:
            bind_inputs(fn_or_blueprint, list(example_inputs))
        ir = fn_or_blueprint
    elif callable(fn_or_blueprint):
        if example_inputs is None or isinstance(example_inputs, torch.Tensor):
            raise TypeError(
                "example_inputs: expected a sequence of tensors to trace "
                f"{getattr(fn_or_blueprint, '__name__', 'the function')} with, "
                f"got {describe(example_inputs)}"
            )
        from warpforge.blueprint.trace import baked_values, trace

        inputs = list(example_inputs)
        # the scalars a trace bakes in: a global changed since the last trace traces again
        traced_key = (fn_or_blueprint, _signature(inputs), strict, baked_values(fn_or_blueprint))
        cached = _TRACED.get(traced_key)
        if cached is not None:
            return cached

        ir = trace(fn_or_blueprint, inputs)
        module = compile(ir, strict=strict)
        with _LOCK:
            _remember(_TRACED, traced_key, module)
        return module
    else:
        raise TypeError(
            f"fn_or_blueprint: expected a BlueprintIR or a callable, got {describe(fn_or_blueprint)}"
        )
    key = (ir.canonical_hash(), strict)
    module = _COMPILED.get(key)
    if module is not None:
        # Least recently used goes first; another thread may have evicted it meanwhile
        # (try/except, not contextlib.suppress: this is the per-call path of compile()).
        try:  # noqa: SIM105
            _COMPILED.move_to_end(key)
        except KeyError:
            pass
    else:
        with _LOCK:
            module = _COMPILED.get(key)
            if module is None:
                module = CompiledBlueprint(ir, strict=strict)
                _remember(_COMPILED, key, module)
    return module


def clear_compiled() -> None:
    """Forget this process's compiled modules (the kernel registry keeps its entries)."""
    with _LOCK:
        _COMPILED.clear()
        _TRACED.clear()
        _LOGGED.clear()
