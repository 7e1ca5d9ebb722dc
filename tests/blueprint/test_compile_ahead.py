"""A cold first call can compile a blueprint's kernels concurrently (compile_ahead): the dry run
that finds its launches, the threads that compile them, and the switch that turns it on."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import torch

import warpforge
from warpforge.blueprint import problems, program
from warpforge.blueprint.compiler import CompiledBlueprint, concurrent_compile_enabled
from warpforge.blueprint.program import KernelProgram, run_reference
from warpforge.blueprint.registry import default_registry

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _two_kernels() -> tuple[Any, list[torch.Tensor]]:
    """LayerNorm then linear + GELU: a row kernel and a matmul kernel."""
    ir = problems.layernorm_linear_gelu_blueprint("float32")
    inputs = [torch.randn(6, 24), torch.randn(24), torch.randn(24), torch.randn(20, 24),
              torch.randn(20)]  # fmt: skip
    return ir, [t.to(DEVICE) for t in inputs]


def _program(module: CompiledBlueprint, inputs: list[torch.Tensor]) -> KernelProgram:
    found = module.lookup(inputs)
    assert isinstance(found, KernelProgram)
    return found


def test_a_dry_run_records_each_launch_and_launches_nothing() -> None:
    ir, inputs = _two_kernels()
    module = warpforge.compile(ir, strict=True)
    want = run_reference(ir, inputs, default_registry())[0]
    torch.testing.assert_close(module(*inputs), want, atol=1e-4, rtol=1e-4)
    loaded = _program(module, inputs)
    loaded.launch_calls = []  # real launches are appended here
    records = loaded.record_launches(inputs)
    assert [kernel.__name__.split("_")[0] for kernel, *_ in records] == ["k0", "k1"]
    assert all(isinstance(grid, tuple) and args and options for _, grid, args, options in records)
    assert loaded.launch_calls == [] and loaded._dry_run is None
    torch.testing.assert_close(module(*inputs), want, atol=1e-4, rtol=1e-4)  # still right


class _FakeKernel:
    """Stands in for a Triton JIT function: records where ``warmup`` ran."""

    def __init__(self, name: str, calls: list[tuple[str, str]]) -> None:
        self.__name__, self.calls = name, calls

    def warmup(self, *args: Any, grid: tuple[int, ...], **options: Any) -> Any:
        self.calls.append((self.__name__, threading.current_thread().name))
        calls = self.calls

        class Compiled:
            def _init_handles(self) -> None:
                calls.append(("handles", threading.current_thread().name))

        return Compiled()


def test_compile_ahead_compiles_each_distinct_kernel_once_in_worker_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, str]] = []
    first, second = _FakeKernel("k0", calls), _FakeKernel("k1", calls)
    records = [
        (first, (4,), [1], {"BLOCK": 8}),
        (second, (2,), [2], {"BLOCK": 16}),
        (first, (4,), [3], {"BLOCK": 8}),
    ]  # fmt: skip  (k0 launched twice alike)
    set_up: list[str] = []
    monkeypatch.setattr(KernelProgram, "record_launches", lambda self, tensors: records)
    monkeypatch.setattr(
        program, "set_up_triton_driver", lambda: set_up.append(threading.current_thread().name)
    )
    ir, inputs = _two_kernels()
    loaded = _program(_compiled(ir, inputs), inputs)
    assert loaded.compile_ahead(inputs) == 2
    assert set_up == [threading.current_thread().name]
    assert sorted(name for name, _ in calls if name != "handles") == ["k0", "k1"]
    assert [name for name, _ in calls].count("handles") == 2
    assert all(thread.startswith("warpforge-compile") for _, thread in calls)


def test_compile_ahead_leaves_a_single_kernel_to_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    only = _FakeKernel("k0", calls)
    monkeypatch.setattr(
        KernelProgram, "record_launches", lambda self, tensors: [(only, (1,), [1], {})]
    )
    monkeypatch.setattr(program, "set_up_triton_driver", lambda: pytest.fail("not needed"))
    ir, inputs = _two_kernels()
    assert _program(_compiled(ir, inputs), inputs).compile_ahead(inputs) == 0
    assert calls == []


def test_a_failed_compile_ahead_is_logged_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ir, inputs = _two_kernels()
    module = _compiled(ir, inputs)
    loaded = _program(module, inputs)

    def broken(tensors: Any) -> int:
        raise RuntimeError("a worker failed")

    monkeypatch.setattr(loaded, "compile_ahead", broken)
    with caplog.at_level(logging.WARNING, logger="warpforge.blueprint"):
        module._compile_ahead(loaded, inputs)  # no exception
    (message,) = [r.getMessage() for r in caplog.records]
    assert "compiling its kernels concurrently failed (RuntimeError: a worker failed)" in message
    assert "one at a time" in message


@pytest.mark.parametrize(
    ("value", "enabled"), [(None, False), ("0", False), ("1", True), (" On ", True), ("no", False)]
)
def test_the_switch_is_off_unless_set(
    value: str | None, enabled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value is None:
        monkeypatch.delenv("WARPFORGE_CONCURRENT_COMPILE", raising=False)
    else:
        monkeypatch.setenv("WARPFORGE_CONCURRENT_COMPILE", value)
    assert concurrent_compile_enabled() is enabled


@pytest.mark.gpu
def test_a_cold_first_call_on_the_gpu_compiles_ahead_when_switched_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both kernels compiled before the run (two threads), and the results are the reference's."""
    monkeypatch.setenv("WARPFORGE_CONCURRENT_COMPILE", "1")
    compiled: list[int] = []
    real = KernelProgram.compile_ahead
    monkeypatch.setattr(
        KernelProgram,
        "compile_ahead",
        lambda self, t: compiled.append(real(self, t)) or compiled[-1],
    )
    ir, inputs = _two_kernels()
    got = warpforge.compile(ir, strict=True)(*inputs)
    torch.testing.assert_close(got, run_reference(ir, inputs, default_registry())[0],
                               atol=1e-4, rtol=1e-4)  # fmt: skip
    assert compiled == [2]


def _compiled(ir: Any, inputs: list[torch.Tensor]) -> CompiledBlueprint:
    module = warpforge.compile(ir, strict=True)
    module(*inputs)  # loads the program
    return module
