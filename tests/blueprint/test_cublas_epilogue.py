"""Matmul groups lowered to one cuBLASLt GEMM with its bias + activation epilogue."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import warpforge
from warpforge.blueprint import BlueprintBuilder, KernelSourceGenerator, cublas_epilogue
from warpforge.blueprint.cublas_epilogue import CublasEpilogue, match


def _linear_act(
    dtype: str = "bfloat16",
    *,
    act: str = "gelu",
    approximate: str = "tanh",
    bias: str = "linear",
    tail: str | None = None,
    also_output_product: bool = False,
) -> object:
    """x @ w.T (+ bias) then an activation; ``bias`` "linear" (its third input), "add" (an
    added [N] vector), "row" (an added [T, N] tensor) or "none"; ``tail`` one more op."""
    b = BlueprintBuilder(f"lin_{act}_{bias}_{tail}")
    x = b.input("x", ("T", 24), dtype)
    w = b.input("w", (40, 24), dtype)
    if bias == "linear":
        y = b.op("linear", x, w, b.input("bias", (40,), dtype))
    else:
        y = b.op("linear", x, w)
        if bias == "add":
            y = b.op("add", b.input("bias", (40,), dtype), y)
        elif bias == "row":
            y = b.op("add", y, b.input("bias", ("T", 40), dtype))
    product = y
    y = b.op("gelu", y, approximate=approximate) if act == "gelu" else b.op(act, y)
    if tail == "neg":
        y = b.op("neg", y)
    elif tail == "cast":
        y = b.op("cast", y, dtype="float32")
    b.output("y", y)
    if also_output_product:
        b.output("product", product)
    return b.build()


def _matmul_group(ir):  # type: ignore[no-untyped-def]
    plan = KernelSourceGenerator(ir).plan()
    (group,) = [g for g in plan.groups if g.kind == "matmul"]
    return group, plan


@pytest.mark.parametrize(
    "kwargs, want",
    [
        ({}, CublasEpilogue("bias", "gelu")),
        ({"bias": "add"}, CublasEpilogue("bias", "gelu")),
        ({"act": "relu"}, CublasEpilogue("bias", "relu")),
        ({"dtype": "float16", "act": "relu", "bias": "add"}, CublasEpilogue("bias", "relu")),
        ({"approximate": "none"}, None),  # the epilogue's GELU is the tanh form only
        ({"dtype": "float32"}, None),  # float32 GEMMs keep the generated kernel
        ({"bias": "none"}, None),  # _addmm_activation needs a bias
        ({"bias": "row"}, None),  # a [T, N] addend is a residual, not a bias
        ({"act": "sigmoid"}, None),
        ({"tail": "neg"}, None),
        ({"tail": "cast"}, None),
        ({"also_output_product": True}, None),  # the product itself is stored too
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_which_matmul_groups_lower(kwargs: dict, want: CublasEpilogue | None) -> None:
    group, plan = _matmul_group(_linear_act(**kwargs))
    assert match(group, plan) == want


def test_suite_groups_that_lower() -> None:
    """mlp_block's first GEMM (bias + GELU) and layernorm_linear_gelu's lower; mlp_block's
    second (bias + residual add) keeps the generated kernel, where it timed at par."""
    from warpforge.blueprint.problems import layernorm_linear_gelu_blueprint, mlp_block_blueprint

    for builder, want in (
        (mlp_block_blueprint, ["gelu", None]),
        (layernorm_linear_gelu_blueprint, ["gelu"]),
    ):
        plan = KernelSourceGenerator(builder("bfloat16")).plan()
        lowered = [match(g, plan) for g in plan.groups if g.kind == "matmul"]
        assert [m.activation if m else None for m in lowered] == want


def _count_lowered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    run = CublasEpilogue.run

    def counting(self, a, b, bias):  # type: ignore[no-untyped-def]
        calls.append(self.activation)
        return run(self, a, b, bias)

    monkeypatch.setattr(CublasEpilogue, "run", counting)
    return calls


@pytest.mark.parametrize("bias", ["linear", "add"])
@pytest.mark.parametrize("rows", [1, 37])
def test_lowered_relu_matches_float64_on_cpu(
    bias: str, rows: int, monkeypatch: pytest.MonkeyPatch, reference64
) -> None:  # type: ignore[no-untyped-def]
    """The run path (output shape, bias, no Triton launch) on the CPU, through ReLU, whose
    epilogue means the same on every device (the CPU's GELU is not the tanh form)."""
    monkeypatch.setattr(cublas_epilogue, "DEVICE_TYPES", ("cpu", "cuda"))
    calls = _count_lowered(monkeypatch)
    ir = _linear_act("float16", act="relu", bias=bias)
    x = torch.randn(rows, 24, dtype=torch.float16)
    w = torch.randn(40, 24, dtype=torch.float16) / 5
    b = torch.randn(40, dtype=torch.float16)
    got = warpforge.compile(ir, strict=True)(x, w, b)
    assert calls == ["relu"]
    assert got.shape == (rows, 40) and got.dtype == torch.float16
    torch.testing.assert_close(got.double(), reference64(ir, [x, w, b])[0], atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize(
    "device, act",
    [("cpu", "relu"), pytest.param("cuda", "gelu", marks=pytest.mark.gpu)],
    ids=["cpu-relu", "gpu-gelu"],
)
def test_lowered_3d_and_strided_operands(  # type: ignore[no-untyped-def]
    device: str, act: str, monkeypatch: pytest.MonkeyPatch, reference64
) -> None:
    """Leading dims, a permuted input, a transposed weight and a strided bias: the output keeps
    the graph's shape and every value is right."""
    monkeypatch.setattr(cublas_epilogue, "DEVICE_TYPES", ("cpu", "cuda"))
    calls = _count_lowered(monkeypatch)
    b = BlueprintBuilder(f"lin3d_{act}")
    x = b.input("x", ("B", "T", 24), "float16")
    w = b.input("w", (40, 24), "float16")
    bias = b.input("bias", (40,), "float16")
    y = b.op("linear", x, w, bias)
    b.output("y", b.op("gelu", y, approximate="tanh") if act == "gelu" else b.op("relu", y))
    ir = b.build()
    gen = torch.Generator(device=device).manual_seed(3)
    xv = torch.randn(24, 7, 3, device=device, generator=gen).half().permute(2, 1, 0)
    wv = (torch.randn(24, 40, device=device, generator=gen) / 5).half().t()
    bv = torch.randn(80, device=device, generator=gen).half()[::2]
    got = warpforge.compile(ir, strict=True)(xv, wv, bv)
    assert calls == [act]
    assert got.shape == (3, 7, 40) and got.dtype == torch.float16
    want = reference64(ir, [xv, wv, bv])[0]
    torch.testing.assert_close(got.double(), want, atol=2e-2, rtol=1e-2)


def test_not_lowered_on_cpu_or_when_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_lowered(monkeypatch)
    ir = _linear_act("float16", act="relu")
    x, w, b = torch.randn(5, 24).half(), torch.randn(40, 24).half(), torch.randn(40).half()
    warpforge.compile(ir, strict=True)(x, w, b)  # the CPU is not a lowering device
    monkeypatch.setattr(cublas_epilogue, "DEVICE_TYPES", ("cpu",))
    monkeypatch.setattr(cublas_epilogue, "ENABLED", False)
    warpforge.compile(ir, strict=True)(x, w, b)
    assert calls == []


def test_compile_command_names_the_lowering(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from warpforge.cli import app

    path = tmp_path / "bp.json"
    path.write_text(_linear_act().to_json())
    result = CliRunner().invoke(app, ["compile", str(path), "--json"])
    assert result.exit_code == 0, result.output
    import json

    (group,) = json.loads(result.output)["groups"]
    assert group["cuda_lowering"] == "cuBLASLt gelu+bias epilogue"


@pytest.mark.gpu
def test_cuda_epilogue_gelu_is_the_tanh_form() -> None:
    """In float32 with a short K the GEMM's rounding (~1e-6) is far below the gap between the
    two GELUs (up to 4.7e-4): the epilogue must match the tanh form, not the erf one."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(257, 8, device="cuda", generator=gen) / 2
    b = torch.randn(8, 129, device="cuda", generator=gen) / 2
    bias = torch.randn(129, device="cuda", generator=gen)
    got = CublasEpilogue("bias", "gelu").run(a, b, bias).double()
    pre = a.double() @ b.double() + bias.double()
    tanh_err = (got - F.gelu(pre, approximate="tanh")).abs().max().item()
    erf_err = (got - F.gelu(pre)).abs().max().item()
    assert tanh_err < 2e-5 < 1e-4 < erf_err, (tanh_err, erf_err)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("act", ["gelu", "relu"])
@pytest.mark.parametrize("rows", [1, 4099])
def test_lowered_and_triton_agree_on_gpu(
    dtype: torch.dtype, act: str, rows: int, monkeypatch: pytest.MonkeyPatch, reference64
) -> None:  # type: ignore[no-untyped-def]
    """Lowered on the GPU (counted) and, with the lowering off, the generated kernel: both
    within 16-bit tolerance of float64, odd row counts included."""
    calls = _count_lowered(monkeypatch)
    ir = _linear_act(str(dtype).removeprefix("torch."), act=act)
    gen = torch.Generator(device="cuda").manual_seed(rows)
    x = torch.randn(rows, 24, device="cuda", dtype=dtype, generator=gen)
    w = torch.randn(40, 24, device="cuda", dtype=dtype, generator=gen) / 5
    b = torch.randn(40, device="cuda", dtype=dtype, generator=gen)
    want = reference64(ir, [x, w, b])[0]
    lowered = warpforge.compile(ir, strict=True)(x, w, b)
    assert calls == [act]
    monkeypatch.setattr(cublas_epilogue, "ENABLED", False)
    from warpforge.blueprint.compiler import clear_compiled

    clear_compiled()
    generated = warpforge.compile(ir, strict=True)(x, w, b)
    assert calls == [act]
    for got in (lowered, generated):
        torch.testing.assert_close(got.double(), want, atol=3e-2, rtol=2e-2)
