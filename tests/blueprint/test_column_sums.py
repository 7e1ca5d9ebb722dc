"""codegen.COLUMN_SUMS: a sum_to over a row group's leading dims computed inside its kernel."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import warpforge
from warpforge.blueprint import BlueprintBuilder, KernelSourceGenerator, codegen, default_registry
from warpforge.blueprint.autodiff import backward_blueprint
from warpforge.blueprint.problems import residual_rmsnorm_swiglu_blueprint

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def column_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codegen, "COLUMN_SUMS", True)


def _rmsnorm_swiglu(x, residual, weight, up):  # type: ignore[no-untyped-def]
    hidden = x + residual
    normed = F.rms_norm(hidden, (hidden.shape[-1],), weight, 1e-6)
    return F.silu(normed) * up, hidden


def test_the_weight_gradient_joins_the_backward_row_kernel(column_sums) -> None:  # type: ignore[no-untyped-def]
    bw, _ = backward_blueprint(residual_rmsnorm_swiglu_blueprint("float32"), default_registry())
    plan = KernelSourceGenerator(bw).plan()
    assert [g.kind for g in plan.groups] == ["rows"]
    (group,) = plan.groups
    ((name, summed),) = group.column_sums.items()
    assert summed not in group.outputs  # the [T, H] product is no longer stored
    assert name in dict((v, n) for n, v in bw.outputs)


def _spy_grids(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    from warpforge.blueprint import program

    grids: list[tuple[int, ...]] = []
    launch = program.KernelProgram._launch_kernel

    def spy(self, kernel, grid, args, options):  # type: ignore[no-untyped-def]
        grids.append(tuple(grid))
        return launch(self, kernel, grid, args, options)

    monkeypatch.setattr(program.KernelProgram, "_launch_kernel", spy)
    return grids


@pytest.mark.parametrize("rows", [1, 4, 4099], ids=lambda r: f"T={r}")
def test_backward_with_column_sums_matches_float64(  # type: ignore[no-untyped-def]
    column_sums, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gradients of residual add + RMSNorm + SiLU x up (the suite's backward blueprint) with
    the weight gradient summed in the kernel: more row blocks than programs, odd H."""
    ir = residual_rmsnorm_swiglu_blueprint("float32")
    h = 19
    gen = torch.Generator().manual_seed(rows)
    tensors = [torch.randn(rows, h, generator=gen) for _ in range(2)]
    tensors += [torch.randn(h, generator=gen), torch.randn(rows, h, generator=gen)]
    tensors = [t.to(DEVICE).requires_grad_() for t in tensors]
    grads = [torch.randn(rows, h, generator=gen).to(DEVICE) for _ in range(2)]
    module = warpforge.compile(ir, strict=True)
    assert module.backward_program()[0].plan.groups[0].column_sums
    outputs = module(*tensors)
    grids = _spy_grids(monkeypatch)
    torch.autograd.backward(outputs, grads)
    if rows > 1000 and DEVICE == "cpu":  # three programs, each walking many row blocks
        assert grids == [(3, 1)]
    wide = [t.detach().double().requires_grad_() for t in tensors]
    torch.autograd.backward(_rmsnorm_swiglu(*wide), [g.double() for g in grads])
    for mine, ref in zip(tensors, wide, strict=True):
        torch.testing.assert_close(mine.grad.double(), ref.grad, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(3, 700, 40), (0, 40), (7, 1)], ids=str)
def test_pointwise_group_column_sum_over_a_3d_domain(column_sums, shape) -> None:  # type: ignore[no-untyped-def]
    """A sum_to in a user graph: a pointwise group (column tiles in the grid) over [B, T, H],
    an empty one (a sum of nothing is 0) and one column."""
    b = BlueprintBuilder("bias_grad")
    x = b.input("x", shape, "float32")
    bias = b.input("bias", (shape[-1],), "float32")
    y = b.op("gelu", b.op("add", x, bias), approximate="tanh")
    b.output("y", y)
    b.output("bias_grad", b.op("sum_to", y, shape=[shape[-1]]))
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert [g.kind for g in plan.groups] == ["rows"] and plan.groups[0].column_sums
    xv, bv = torch.randn(shape, device=DEVICE), torch.randn(shape[-1], device=DEVICE)
    got_y, got_sum = warpforge.compile(ir, strict=True)(xv, bv)
    want = F.gelu(xv.double() + bv.double(), approximate="tanh")
    torch.testing.assert_close(got_y.double(), want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        got_sum.double(), want.reshape(-1, shape[-1]).sum(0), atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize(
    "target", [[1, 40], [5, 1]], ids=["keeps-a-leading-1", "sums-the-last-dim"]
)
def test_other_sums_stay_pytorch_steps(column_sums, target) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("other_sum")
    x = b.input("x", (5, 40), "float32")
    b.output("s", b.op("sum_to", b.op("exp", x), shape=target))
    plan = KernelSourceGenerator(b.build()).plan()
    assert not any(g.column_sums for g in plan.groups)
    assert plan.groups[-1].kind == "torch"


def test_a_float16_value_is_a_column_sum_in_its_own_dtype(column_sums) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("half_sum")
    x = b.input("x", (5, 40), "float32")
    y = b.op("cast", b.op("exp", x), dtype="float16")
    b.output("s", b.op("sum_to", y, shape=[40]))
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.groups[0].column_sums
    xv = torch.randn(5, 40, device=DEVICE)
    got = warpforge.compile(ir, strict=True)(xv)
    assert got.dtype == torch.float16 and got.shape == (40,)
    want = xv.double().exp().half().double().sum(0)
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=2e-3)


def test_switch_is_part_of_the_cache_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from warpforge.blueprint.compiler import specialisation

    module = warpforge.compile(residual_rmsnorm_swiglu_blueprint("float32"))
    tensors = [torch.randn(4, 8), torch.randn(4, 8), torch.randn(8), torch.randn(4, 8)]
    spec = specialisation(tensors)
    off = module._cache_key(spec, torch.device("cpu")).digest()
    monkeypatch.setattr(codegen, "COLUMN_SUMS", True)
    assert module._cache_key(spec, torch.device("cpu")).digest() != off


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 4099, 16384])
def test_bf16_backward_with_column_sums_on_gpu(  # type: ignore[no-untyped-def]
    column_sums, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's backward blueprint at its hidden size in bf16: every gradient within bf16
    tolerance of float64, the weight gradient (a sum over every row) included."""
    ir = residual_rmsnorm_swiglu_blueprint("bfloat16")
    h = 4096
    gen = torch.Generator(device="cuda").manual_seed(rows)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", generator=gen).bfloat16()

    tensors = [rand(rows, h), rand(rows, h), rand(h), rand(rows, h)]
    tensors = [t.requires_grad_() for t in tensors]
    grads = [rand(rows, h), rand(rows, h)]
    outputs = warpforge.compile(ir, strict=True)(*tensors)
    grids = _spy_grids(monkeypatch)
    torch.autograd.backward(outputs, grads)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert grids and grids[0][0] <= 4 * sms
    wide = [t.detach().double().requires_grad_() for t in tensors]
    torch.autograd.backward(_rmsnorm_swiglu(*wide), [g.double() for g in grads])
    for mine, ref in zip(tensors, wide, strict=True):
        scale = ref.grad.abs().max().item()
        torch.testing.assert_close(mine.grad.double(), ref.grad, atol=2e-2 * scale, rtol=2e-2)


def test_compile_command_lists_the_column_sums(column_sums, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from warpforge.cli import app

    b = BlueprintBuilder("colsum_cli")
    x = b.input("x", ("T", 8), "float32")
    y = b.op("exp", x)
    b.output("y", y)
    b.output("s", b.op("sum_to", y, shape=[8]))
    path = tmp_path / "bp.json"
    path.write_text(b.build().to_json())
    result = CliRunner().invoke(app, ["compile", str(path), "--json"])
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.output)["groups"]
    assert group["column_sums"] == ["sum_to_0"]
    table = CliRunner().invoke(app, ["compile", str(path)])
    assert "sum_to_0 (column sum)" in table.output


@pytest.mark.gpu
def test_column_sum_over_more_than_2_pow_31_elements(column_sums) -> None:  # type: ignore[no-untyped-def]
    """64-bit offsets in the strided row-block walk: every row block, the last ones past
    2**31 elements included, lands in the sum exactly once."""
    b = BlueprintBuilder("huge_column_sum")
    x = b.input("x", ("T", 4096), "float32")
    y = b.op("add", b.op("mul", x, scalar=0.5), scalar=1.0)
    b.output("y", y)
    b.output("s", b.op("sum_to", y, shape=[4096]))
    rows = (2**31) // 4096 + 16
    gen = torch.Generator(device="cuda").manual_seed(0)
    x_val = torch.randn(rows, 4096, device="cuda", generator=gen)
    got_y, got_s = warpforge.compile(b.build(), strict=True)(x_val)
    want_y = x_val * 0.5 + 1.0
    assert torch.equal(got_y[-3:], want_y[-3:])
    want_s = want_y.double().sum(0)
    del want_y
    torch.testing.assert_close(got_s.double(), want_s, atol=0.5, rtol=1e-5)
