"""compile(): caching in the process and on disk, fallback on failures, strict mode, backward."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
import torch
from blueprint_child_process import run_child

import warpforge
from warpforge.blueprint import (
    BlueprintBuilder,
    KernelSourceGenerator,
    OperatorRegistry,
    default_registry,
)
from warpforge.blueprint.compiler import BlueprintCompileError, CompiledBlueprint
from warpforge.blueprint.program import run_reference
from warpforge.cache import default_metrics

# Kernels run on CUDA when present, else under the interpreter (conftest sets it up).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _bias_gelu(name: str = "bias_gelu"):  # type: ignore[no-untyped-def]
    b = BlueprintBuilder(name)
    x = b.input("x", ("B", 24), "float32")
    bias = b.input("bias", (24,), "float32")
    b.output("y", b.op("gelu", b.op("add", x, bias), approximate="tanh"))
    return b.build()


def _inputs(rows: int = 5) -> list[torch.Tensor]:
    return [torch.randn(rows, 24, device=DEVICE), torch.randn(24, device=DEVICE)]


def test_compile_runs_kernels_and_caches_the_module() -> None:
    ir = _bias_gelu()
    module = warpforge.compile(ir)
    assert isinstance(module, torch.nn.Module)
    assert warpforge.compile(ir) is module
    # equal structure under other names is the same blueprint
    assert warpforge.compile(_bias_gelu("renamed")) is module
    inputs = _inputs()
    got = module(*inputs)
    torch.testing.assert_close(got, run_reference(ir, inputs, default_registry())[0])
    snap = default_metrics().snapshot()
    assert snap["builds"]["count"] == 1 and snap["fallbacks"] == {}
    # builds time code generation; the first launch (where Triton compiles) is its own metric
    assert snap["first_launches"]["count"] == 1
    # a second call with the same specialisation does not touch the kernel registry
    lookups = snap["lookups"]
    module(*_inputs(rows=7))
    assert default_metrics().snapshot()["lookups"] == lookups
    assert default_metrics().snapshot()["first_launches"]["count"] == 1


def test_recompiling_in_process_hits_the_memory_tier() -> None:
    from warpforge.blueprint.compiler import clear_compiled

    ir = _bias_gelu()
    warpforge.compile(ir)(*_inputs())
    clear_compiled()
    warpforge.compile(ir)(*_inputs())
    snap = default_metrics().snapshot()
    assert snap["builds"]["count"] == 1
    assert snap["hits"]["memory"] == 1


def test_a_new_process_loads_kernels_from_the_disk_cache(fresh_blueprint_cache: Path) -> None:
    ir = _bias_gelu()
    warpforge.compile(ir)(*_inputs())
    script = """
import json, sys, torch
import warpforge
from warpforge.blueprint import BlueprintIR
from warpforge.cache import default_metrics
ir = BlueprintIR.from_json(sys.stdin.read())
device = "cuda" if torch.cuda.is_available() else "cpu"
out = warpforge.compile(ir, strict=True)(torch.randn(3, 24, device=device), torch.randn(24, device=device))
print(json.dumps({"snapshot": default_metrics().snapshot(), "shape": list(out.shape)}))
"""
    done = run_child(script, ir, fresh_blueprint_cache)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["shape"] == [3, 24]
    assert result["snapshot"]["hits"]["disk"] == 1
    assert result["snapshot"]["builds"]["count"] == 0


def test_loaded_sources_live_in_a_folder_of_their_process_deleted_at_its_exit(
    fresh_blueprint_cache: Path,
) -> None:
    # a blueprint no other test loads: this process imports its module here, not from before
    b = BlueprintBuilder("loaded_here")
    x = b.input("x", ("B", 24), "float32")
    bias = b.input("bias", (24,), "float32")
    b.output("y", b.op("mul", b.op("exp", x), bias))
    ir = b.build()
    module = warpforge.compile(ir)
    module(*_inputs())
    (program,) = module._programs.values()
    own = Path(program.module.__file__)
    modules = fresh_blueprint_cache / "blueprint" / "modules"
    assert own.parent.parent == modules and f"-{os.getpid()}-" in own.parent.name
    script = """
import os, sys, torch
import warpforge
from warpforge.blueprint import BlueprintIR
ir = BlueprintIR.from_json(sys.stdin.read())
device = "cuda" if torch.cuda.is_available() else "cpu"
module = warpforge.compile(ir, strict=True)
module(torch.randn(3, 24, device=device), torch.randn(24, device=device))
(program,) = module._programs.values()
print(program.module.__file__)
"""
    done = run_child(script, ir, fresh_blueprint_cache)
    child = Path(done.stdout.strip().splitlines()[-1])
    assert child.parent.parent == modules and child.parent != own.parent
    assert not child.parent.exists()  # removed when the child exited
    assert [p.name for p in modules.iterdir()] == [own.parent.name]
    assert own.exists()  # a running process's file stays


def test_codegen_failure_falls_back_logs_once_and_counts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self, plan=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("injected codegen failure")

    monkeypatch.setattr(KernelSourceGenerator, "source", broken)
    ir = _bias_gelu()
    module = warpforge.compile(ir)
    with caplog.at_level(logging.WARNING, logger="warpforge.blueprint"):
        for rows in (4, 4, 40):  # the failure is remembered per specialisation: one count
            inputs = [torch.randn(rows, 32, device=DEVICE)[:, :24], torch.randn(24, device=DEVICE)]
            got = module(*inputs)
            assert torch.equal(got, run_reference(ir, inputs, default_registry())[0])
    warnings = [r for r in caplog.records if "injected codegen failure" in r.getMessage()]
    assert len(warnings) == 1
    assert "PyTorch reference" in warnings[0].getMessage()
    assert default_metrics().snapshot()["fallbacks"] == {"codegen": 1}
    assert module.fell_back()


def test_an_unusable_redis_url_keeps_the_kernels(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from warpforge.cache import KernelRegistry
    from warpforge.cache import registry as registry_module

    monkeypatch.setattr(registry_module, "_WARNED_REDIS_URLS", set())
    monkeypatch.setenv("WARPFORGE_REDIS_URL", "notaurl")
    with caplog.at_level(logging.WARNING):
        KernelRegistry.default(refresh=True)
        ir = _bias_gelu()
        module = warpforge.compile(ir)
        inputs = _inputs()
        got = module(*inputs)
    torch.testing.assert_close(got, run_reference(ir, inputs, default_registry())[0])
    assert not module.fell_back()
    snap = default_metrics().snapshot()
    assert snap["fallbacks"] == {} and snap["builds"]["count"] == 1
    assert KernelRegistry.default().disk.stats()["entries"] == 1  # the disk tier still stores
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "WARPFORGE_REDIS_URL" in warning and "'notaurl'" in warning
    assert "expected a redis://, rediss:// or unix:// URL" in warning


def test_a_cache_setting_that_does_not_parse_is_no_codegen_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from warpforge.cache import KernelRegistry

    ir = _bias_gelu()
    inputs = _inputs()
    with monkeypatch.context() as patch:  # undone before the fixture rebuilds the registry
        patch.setattr(KernelRegistry, "_default", None)
        patch.setenv("WARPFORGE_CACHE_MAX_BYTES", "lots")
        got = warpforge.compile(ir)(*inputs)
        torch.testing.assert_close(got, run_reference(ir, inputs, default_registry())[0])
        assert default_metrics().snapshot()["fallbacks"] == {"cache-config": 1}
        with pytest.raises(BlueprintCompileError, match="WARPFORGE_CACHE_MAX_BYTES"):
            warpforge.compile(ir, strict=True)(*inputs)


def test_strict_raises_instead_of_falling_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, plan=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("injected codegen failure")

    monkeypatch.setattr(KernelSourceGenerator, "source", broken)
    module = warpforge.compile(_bias_gelu(), strict=True)
    with pytest.raises(BlueprintCompileError, match=r"codegen failed.*injected codegen failure"):
        module(*_inputs())
    assert default_metrics().snapshot()["fallbacks"] == {}


def test_triton_compile_failure_at_first_launch_falls_back() -> None:
    registry = OperatorRegistry()
    for name in default_registry().names():
        registry.register(default_registry().get(name))
    from warpforge.blueprint import operator

    @operator(
        "broken",
        kind="pointwise",
        triton=lambda a, attrs: f"tl.no_such_function({a[0]})",
        registry=registry,
    )
    def broken(x: torch.Tensor) -> torch.Tensor:
        return x * 3

    b = BlueprintBuilder("broken_kernel")
    x = b.input("x", (4, 8), "float32")
    b.output("y", b.op("broken", x))
    ir = b.build(registry)
    value = torch.randn(4, 8, device=DEVICE)
    assert torch.equal(CompiledBlueprint(ir, registry=registry)(value), value * 3)
    assert default_metrics().snapshot()["fallbacks"] == {"triton-compile": 1}
    with pytest.raises(BlueprintCompileError, match="triton-compile failed"):
        CompiledBlueprint(ir, strict=True, registry=registry)(value)


def test_inputs_the_graph_rejects_raise_and_leave_the_kernels_in_place() -> None:
    """Sizes a reshape cannot take fail the reference too: the caller's error, raised, and not a
    compile failure that would turn the kernels off for every later call."""
    b = BlueprintBuilder("reshape_then_add")
    x = b.input("x", ("B", "T", 8), "float32")
    n = b.input("n", ("N", 8), "float32")
    b.output("y", b.op("add", b.op("reshape", x, shape=["N", 8]), n))
    module = warpforge.compile(b.build())
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        module(torch.randn(2, 3, 8, device=DEVICE), torch.randn(5, 8, device=DEVICE))
    inputs = [torch.randn(2, 3, 8, device=DEVICE), torch.randn(6, 8, device=DEVICE)]
    torch.testing.assert_close(module(*inputs), inputs[0].reshape(6, 8) + inputs[1])
    assert not module.fell_back()
    assert default_metrics().snapshot()["fallbacks"] == {}


SCALE = 2.0


def _scaled_helper(x: torch.Tensor) -> torch.Tensor:
    return x * SCALE


def test_a_function_is_traced_again_when_a_scalar_it_bakes_in_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trace records SCALE (read by a helper the function calls) as a constant: compiling
    again after it changed must not return the module that baked in the old value."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return _scaled_helper(x) + 1.0

    x = torch.randn(4, 8, device=DEVICE)
    first = warpforge.compile(fn, [x])
    assert warpforge.compile(fn, [x]) is first
    torch.testing.assert_close(first(x), x * 2.0 + 1.0)
    monkeypatch.setitem(globals(), "SCALE", 5.0)
    again = warpforge.compile(fn, [x])
    assert again is not first
    torch.testing.assert_close(again(x), x * 5.0 + 1.0)


def test_inputs_are_validated_with_clear_errors() -> None:
    module = warpforge.compile(_bias_gelu())
    with pytest.raises(ValueError, match="bias: expected a tensor on cpu"):
        module(torch.randn(3, 24), torch.randn(24, device="meta"))
    with pytest.raises(TypeError, match=r"expected 2 tensor argument\(s\) \(x, bias\), got 1"):
        module(torch.randn(3, 24))
    with pytest.raises(TypeError, match="bias: expected dtype float32, got tensor of shape"):
        module(torch.randn(3, 24), torch.randn(24).half())
    with pytest.raises(ValueError, match=r"x: expected size 24 in dim 1"):
        module(torch.randn(3, 25), torch.randn(24))
    with pytest.raises(TypeError, match="fn_or_blueprint: expected a BlueprintIR or a callable"):
        warpforge.compile(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="example_inputs: expected a sequence of tensors"):
        warpforge.compile(lambda x: x + 1)


def test_compiling_a_function_traces_once_per_signature() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * y + 1.0)

    x, y = torch.randn(6, 10, device=DEVICE), torch.randn(6, 10, device=DEVICE)
    module = warpforge.compile(fn, [x, y])
    assert warpforge.compile(fn, [x, y]) is module
    assert module.plan.kernel_count == 1
    torch.testing.assert_close(module(x, y), fn(x, y))


def test_backward_generated_from_gradient_rules() -> None:
    def fn(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x + b) * x - torch.exp(x) / 3.0 + torch.rsqrt(b * b + 1.0)

    x = torch.randn(6, 10, device=DEVICE, requires_grad=True)
    b = torch.randn(10, device=DEVICE, requires_grad=True)
    module = warpforge.compile(fn, [x, b], strict=True)
    backward = module.backward_program()
    assert backward is not None and backward[1] == ("x", "b")
    grad = torch.randn(6, 10, device=DEVICE)
    module(x, b).backward(grad)
    got = (x.grad.clone(), b.grad.clone())
    x64, b64 = x.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    fn(x64, b64).backward(grad.double())
    torch.testing.assert_close(got[0].double(), x64.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1].double(), b64.grad, atol=1e-5, rtol=1e-5)


def test_backward_through_reference_autograd_for_ops_without_rules() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.nn.functional.layer_norm(x @ w, (12,), g), -1)

    x = torch.randn(6, 10, device=DEVICE, requires_grad=True)
    w = torch.randn(10, 12, device=DEVICE, requires_grad=True)
    g = torch.randn(12, device=DEVICE, requires_grad=True)
    module = warpforge.compile(fn, [x, w, g], strict=True)
    assert module.backward_program() is None
    grad = torch.randn(6, 12, device=DEVICE)
    module(x, w, g).backward(grad)
    got = [t.grad.clone() for t in (x, w, g)]
    wide = [t.detach().double().requires_grad_() for t in (x, w, g)]
    fn(*wide).backward(grad.double())
    for mine, ref in zip(got, wide, strict=True):
        torch.testing.assert_close(mine.double(), ref.grad, atol=1e-4, rtol=1e-4)


def test_cpu_without_interpreter_runs_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("WARPFORGE_INTERPRET", raising=False)
    ir = _bias_gelu()
    inputs = [torch.randn(5, 24), torch.randn(24)]  # CPU tensors on every tier
    got = warpforge.compile(ir)(*inputs)
    assert torch.equal(got, run_reference(ir, inputs, default_registry())[0])
    assert default_metrics().snapshot()["lookups"] == 0  # policy, not a fallback


def _softmax_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * w, dim=-1)


def _rms_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6))


def _layer_norm_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, w * 0.5, 1e-5)


def _sum_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.exp(x).sum(-1, keepdim=True) * w


@pytest.mark.parametrize(
    "fn", [_softmax_fn, _rms_fn, _layer_norm_fn, _sum_fn], ids=lambda f: f.__name__
)
def test_generated_backward_of_row_ops(fn) -> None:  # type: ignore[no-untyped-def]
    if fn is _rms_fn and not hasattr(torch.nn.functional, "rms_norm"):
        pytest.skip("torch.nn.functional.rms_norm needs torch >= 2.4")
    x = torch.randn(5, 3, 19, device=DEVICE, requires_grad=True)
    w = torch.randn(19, device=DEVICE, requires_grad=True)
    module = warpforge.compile(fn, [x, w], strict=True)
    backward = module.backward_program()
    assert backward is not None, "expected a generated backward"
    # everything along the rows of x is one kernel (parameter-only arithmetic may add small ones)
    row_kernels = [g for g in backward[0].plan.groups if g.kind == "rows" and g.has_row_op]
    assert len(row_kernels) == 1
    out = module(x, w)
    grad = torch.randn_like(out)
    out.backward(grad)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    fn(x64, w64).backward(grad.double())
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(w.grad.double(), w64.grad, atol=1e-4, rtol=1e-4)


def test_sum_without_keepdim_backward_uses_reference_autograd() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x).sum(-1)

    x = torch.randn(4, 7, device=DEVICE, requires_grad=True)
    module = warpforge.compile(fn, [x], strict=True)
    assert module.backward_program() is None
    module(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.exp(x.detach()))


def test_repeated_signature_skips_validation_and_stays_correct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from warpforge.blueprint import compiler

    ir = _bias_gelu()
    module = warpforge.compile(ir)
    first = _inputs(rows=6)
    torch.testing.assert_close(module(*first), run_reference(ir, first, default_registry())[0])
    assert module.lookup(first) is not None

    def no_bind(*args: object) -> None:
        raise AssertionError("the hit path validated again")

    # Same signature, fresh data: served from the resolved-call table, no bind_inputs.
    monkeypatch.setattr(compiler, "bind_inputs", no_bind)
    again = _inputs(rows=6)
    torch.testing.assert_close(module(*again), run_reference(ir, again, default_registry())[0])
    # A new shape is a new signature: it takes the validating path.
    with pytest.raises(AssertionError, match="validated again"):
        module(*_inputs(rows=9))
    monkeypatch.undo()
    # Bad inputs after cached calls still fail with the validation error.
    with pytest.raises(TypeError, match="bias: expected dtype float32"):
        module(torch.randn(6, 24, device=DEVICE), torch.randn(24, device=DEVICE).half())
    with pytest.raises(TypeError, match=r"x: expected a torch\.Tensor"):
        module([[1.0] * 24] * 6, torch.randn(24, device=DEVICE))


def test_signature_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.blueprint import compiler

    monkeypatch.setattr(compiler, "MAX_CALL_SIGNATURES", 3)
    ir = _bias_gelu()
    module = warpforge.compile(ir)
    for rows in (1, 2, 3, 4, 5):
        inputs = _inputs(rows=rows)
        torch.testing.assert_close(
            module(*inputs), run_reference(ir, inputs, default_registry())[0]
        )
        assert len(module._calls) <= 3
    assert module.lookup(_inputs(rows=5)) is not None


@pytest.mark.skipif(DEVICE != "cpu", reason="switches the CPU interpreter off")
def test_cached_cpu_call_follows_the_interpreter_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.blueprint import compiler

    ir = _bias_gelu()
    module = warpforge.compile(ir)
    module(*_inputs())  # resolved with the interpreter on
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("WARPFORGE_INTERPRET", raising=False)
    called = []
    monkeypatch.setattr(compiler, "run_reference", lambda *a: called.append(1) or run_reference(*a))
    inputs = _inputs()
    torch.testing.assert_close(module(*inputs), run_reference(ir, inputs, default_registry())[0])
    assert called == [1]


def test_launch_plans_follow_input_strides() -> None:
    """Same shapes, other strides (a transposed view, a broadcast bias): a plan of its own."""
    ir = _bias_gelu()
    module = warpforge.compile(ir)
    layouts = {
        "contiguous": lambda: _inputs(rows=6),
        "transposed": lambda: [
            torch.randn(24, 6, device=DEVICE).t(),
            torch.randn(24, device=DEVICE),
        ],
        "strided bias": lambda: [
            torch.randn(6, 24, device=DEVICE),
            torch.randn(48, device=DEVICE)[::2],
        ],
    }
    for name in ("contiguous", "transposed", "strided bias", "contiguous", "transposed"):
        inputs = layouts[name]()  # fresh random data every call
        want = run_reference(ir, inputs, default_registry())[0]
        torch.testing.assert_close(module(*inputs), want, msg=name)
    (program,) = {id(p): p for p in module._programs.values()}.values()
    assert len(program._row_launches) == 3
