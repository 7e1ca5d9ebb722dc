"""Partitioning into fusion groups, the generated source, and kernels on awkward shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import warpforge
from warpforge.blueprint import BlueprintBuilder, KernelSourceGenerator
from warpforge.blueprint.compiler import BlueprintCompileError


def _pointwise_chain(name: str = "chain", x_name: str = "x") -> object:
    b = BlueprintBuilder(name)
    x = b.input(x_name, ("B", 33), "float32")
    bias = b.input("bias", (33,), "float32")
    y = b.op("add", x, bias)
    y = b.op("mul", y, scalar=0.5)
    y = b.op("gelu", y, approximate="tanh")
    y = b.op("sub", y, b.op("exp", bias))
    b.output("y", b.op("tanh", y))
    return b.build()


@pytest.fixture
def check(reference64, device):  # type: ignore[no-untyped-def]
    """Compile strictly, run, and compare every output with the float64 reference."""

    def run(ir, inputs, atol=2e-5, rtol=2e-5):  # type: ignore[no-untyped-def]
        inputs = [t.to(device) for t in inputs]  # kernels run where the tier runs them
        got = warpforge.compile(ir, strict=True)(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, reference64(ir, inputs), strict=True):
            torch.testing.assert_close(g.double(), w, atol=atol, rtol=rtol)
        return got

    return run


def test_pointwise_chain_is_one_kernel(check) -> None:  # type: ignore[no-untyped-def]
    ir = _pointwise_chain()
    gen = KernelSourceGenerator(ir)
    plan = gen.plan()
    assert plan.kernel_count == 1
    assert len(plan.groups) == 1
    source = gen.source(plan)
    assert source.count("@triton.jit") == 1
    # intermediates stay in registers: one store, for the graph output only
    assert source.count("tl.store(") == 1
    check(ir, [torch.randn(7, 33), torch.randn(33)])


def test_group_widens_when_a_small_value_comes_first(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("widen")
    bias = b.input("bias", (33,), "float32")
    x = b.input("x", (4, 33), "float32")
    scaled = b.op("exp", bias)  # shape (33,): the group starts small
    b.output("y", b.op("mul", b.op("add", x, scaled), scalar=2.0))
    b.output("scaled", scaled)  # stored through a broadcast view
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.kernel_count == 1 and plan.groups[0].domain == (4, 33)
    check(ir, [torch.randn(33), torch.randn(4, 33)])


def test_residual_rmsnorm_silu_mul_is_one_row_kernel(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("residual_rms_swiglu")
    x = b.input("x", ("T", 96), "float16")
    res = b.input("res", ("T", 96), "float16")
    w = b.input("w", (96,), "float16")
    up = b.input("up", ("T", 96), "float16")
    h = b.op("add", x, res, name="h")
    n = b.op("rms_norm", h, w, eps=1e-6, name="normed")
    b.output("out", b.op("mul", b.op("silu", n), up, name="gated"))
    b.output("h", h)
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.kernel_count == 1 and plan.groups[0].has_row_op
    assert plan.groups[0].outputs == ["h", "gated"]
    inputs = [torch.randn(11, 96).half() for _ in range(2)] + [
        torch.randn(96).half(),
        torch.randn(11, 96).half(),
    ]
    check(ir, inputs, atol=4e-3, rtol=4e-3)


def test_matmul_epilogue_fuses_pointwise_consumers(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("linear_gelu_residual")
    x = b.input("x", (13, 40), "float32")
    w = b.input("w", (24, 40), "float32")
    bias = b.input("bias", (24,), "float32")
    r = b.input("r", (13, 24), "float32")
    y = b.op("gelu", b.op("linear", x, w, bias), approximate="tanh")
    b.output("y", b.op("add", y, r))
    ir = b.build()
    gen = KernelSourceGenerator(ir)
    plan = gen.plan()
    assert [g.kind for g in plan.groups] == ["matmul"]
    assert [n.op for n in plan.groups[0].nodes] == ["linear", "gelu", "add"]
    assert "tl.dot(" in gen.source(plan)
    check(
        ir,
        [torch.randn(13, 40), torch.randn(24, 40), torch.randn(24), torch.randn(13, 24)],
        atol=5e-5,
        rtol=5e-5,
    )


def test_source_is_deterministic_and_names_nodes() -> None:
    first = KernelSourceGenerator(_pointwise_chain()).source()
    second = KernelSourceGenerator(_pointwise_chain()).source()
    assert first == second
    for fragment in (
        "# gelu_0 = gelu(mul_0, approximate='tanh')",
        "# load bias: float32[33]",
        "v_tanh_0",
    ):
        assert fragment in first
    compile(first, "<generated>", "exec")  # valid Python


def test_reduction_without_keepdim_ends_the_group(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("reduce_then_use")
    x = b.input("x", (6, 6), "float32")
    s = b.op("sum", b.op("exp", x))  # shape (6,): broadcasts along the *last* dim below
    b.output("y", b.op("mul", x, s))
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.kernel_count == 2
    check(ir, [torch.randn(6, 6)], atol=1e-4, rtol=1e-5)


def test_reduction_chain_with_keepdim_stays_in_one_kernel(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("reduction_chain")
    x = b.input("x", (5, 29), "float32")
    m = b.op("amax", x, keepdim=True)
    centered = b.op("sub", x, m)
    s = b.op("sum", b.op("exp", centered), keepdim=True)
    b.output("lse", b.op("add", b.op("log", s), m))
    b.output("mean", b.op("mean", b.op("abs", x), keepdim=False))
    ir = b.build()
    assert KernelSourceGenerator(ir).plan().kernel_count == 1
    check(ir, [torch.randn(5, 29)])


@pytest.mark.parametrize(
    "shape",
    [(1, 1), (1,), (7,), (3, 1, 5), (2, 3, 127), (2, 1, 3, 5), (257, 3)],
    ids=str,
)
def test_ragged_and_odd_shapes(shape: tuple, check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("odd")
    x = b.input("x", shape, "float32")
    y = b.input("y", shape[-1:], "float32")
    z = b.op("silu", b.op("add", x, y))
    b.output("z", z)
    b.output("n", b.op("softmax", z))
    check(b.build(), [torch.randn(shape), torch.randn(shape[-1:])])


def test_non_contiguous_and_broadcast_inputs_need_no_copy(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("strided")
    x = b.input("x", (4, 6, 10), "float32")
    col = b.input("col", (6, 1), "float32")
    b.output("y", b.op("layer_norm", b.op("mul", x, col), eps=1e-5))
    ir = b.build()
    base = torch.randn(10, 6, 4)
    x = base.permute(2, 1, 0)  # (4, 6, 10), last dim has stride 24
    assert not x.is_contiguous()
    col = torch.randn(6, 2)[:, :1]
    check(ir, [x, col], atol=1e-5, rtol=1e-5)


def test_zero_dim_and_empty_inputs(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("scalar_and_empty")
    x = b.input("x", ("B", 8), "float32")
    s = b.input("s", (), "float32")
    b.output("y", b.op("mul", x, s))
    ir = b.build()
    check(ir, [torch.randn(3, 8), torch.randn(())])
    empty = warpforge.compile(ir, strict=True)(torch.randn(0, 8), torch.randn(()))
    assert empty.shape == (0, 8)


def test_integer_ops_run_as_torch_steps() -> None:
    b = BlueprintBuilder("ints")
    x = b.input("x", (4, 5), "int32")
    y = b.input("y", (4, 5), "float32")
    b.output("z", b.op("add", b.op("cast", b.op("add", x, x), dtype="float32"), y))
    ir = b.build()
    kinds = [g.kind for g in KernelSourceGenerator(ir).plan().groups]
    assert kinds[0] == "torch" and "rows" in kinds
    x_val = torch.randint(-5, 5, (4, 5), dtype=torch.int32)
    y_val = torch.randn(4, 5)
    got = warpforge.compile(ir, strict=True)(x_val, y_val)
    torch.testing.assert_close(got, (x_val + x_val).float() + y_val)


def test_row_longer_than_the_register_budget_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    from warpforge.blueprint import program

    b = BlueprintBuilder("long_rows")
    x = b.input("x", (1, program.MAX_ROW_BLOCK + 5), "float32")
    b.output("y", b.op("softmax", x))
    ir = b.build()
    x_val = torch.randn(1, program.MAX_ROW_BLOCK + 5)
    with pytest.raises(BlueprintCompileError, match="register budget"):
        warpforge.compile(ir, strict=True)(x_val)
    got = warpforge.compile(ir)(x_val)
    assert torch.equal(got, torch.softmax(x_val, -1))


@pytest.mark.gpu
def test_int64_offsets_on_more_than_2_pow_31_elements() -> None:
    b = BlueprintBuilder("huge")
    x = b.input("x", ("T", 4096), "float16")
    b.output("y", b.op("add", x, scalar=1.0))
    rows = (2**31) // 4096 + 16
    x_val = torch.zeros(rows, 4096, dtype=torch.float16, device="cuda")
    x_val[-3:].normal_()
    got = warpforge.compile(b.build(), strict=True)(x_val)
    assert torch.equal(got[-3:], x_val[-3:] + 1)
    assert torch.equal(got[:2], torch.ones(2, 4096, dtype=torch.float16, device="cuda"))


@pytest.mark.gpu
def test_bf16_row_kernel_on_gpu() -> None:
    b = BlueprintBuilder("bf16")
    x = b.input("x", ("T", 4096), "bfloat16")
    w = b.input("w", (4096,), "bfloat16")
    b.output("y", b.op("silu", b.op("rms_norm", x, w, eps=1e-6)))
    x_val = torch.randn(333, 4096, dtype=torch.bfloat16, device="cuda")
    w_val = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    got = warpforge.compile(b.build(), strict=True)(x_val, w_val)
    want = torch.nn.functional.silu(
        x_val.double()
        * torch.rsqrt(x_val.double().pow(2).mean(-1, keepdim=True) + 1e-6)
        * w_val.double()
    )
    torch.testing.assert_close(got.double(), want, atol=3e-2, rtol=2e-2)


def test_per_row_values_in_a_column_tiled_kernel(check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("row_values_tiled")
    x = b.input("x", (3, 1500), "float32")  # 1500 columns: two column tiles of 1024
    r = b.input("r", (3, 1), "float32")
    scaled = b.op("mul", r, scalar=2.0)  # one value per row, computed by every column tile
    b.output("y", b.op("add", x, scaled))
    b.output("scaled", scaled)
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.kernel_count == 1 and not plan.groups[0].has_row_op
    check(ir, [torch.randn(3, 1500), torch.randn(3, 1)])


def _scores_softmax(name: str, inner: object, dtype: str = "float32") -> object:
    """softmax(causal_mask(q @ k^T * scale)) with symbolic sizes (``inner``: the K dim)."""
    b = BlueprintBuilder(name)
    q = b.input("q", ("B", "H", "T", inner), dtype)
    k = b.input("k", ("B", "H", "S", inner), dtype)
    keep = b.input("keep", ("T", "S"), "bool")
    scores = b.op("mul", b.op("matmul", q, b.op("transpose", k, dim0=-2, dim1=-1)), scalar=0.3)
    b.output("p", b.op("softmax", b.op("where", keep, scores, other="-inf")))
    return b.build()


@pytest.mark.parametrize(
    "t, s, inner",
    [(17, 17, 16), (5, 33, 8), (9, 40, 40), (1, 1, 3)],
    ids=["one-k-block", "k-tail-in-one-block", "k-loop-with-tail", "single-element"],
)
def test_matmul_then_softmax_is_one_two_pass_kernel(t, s, inner, check) -> None:  # type: ignore[no-untyped-def]
    ir = _scores_softmax("scores_softmax", "DH")
    gen = KernelSourceGenerator(ir)
    plan = gen.plan()
    assert [g.kind for g in plan.groups] == ["torch", "matmul"]
    group = plan.groups[1]
    assert group.has_row_op and [n.op for n in group.nodes] == ["matmul", "mul", "where", "softmax"]
    assert group.outputs == ["softmax_0"]  # the product never reaches memory
    source = gen.source(plan)
    assert "# pass 1: running statistics" in source and "# pass 2: the tiles again" in source
    keep = torch.rand(t, s) < 0.7
    keep[:, 0] = True  # every row keeps a column (a row of only -inf is checked separately)
    q, k = torch.randn(2, 3, t, inner), torch.randn(2, 3, s, inner)
    check(ir, [q, k.transpose(-2, -1).contiguous().transpose(-2, -1), keep], atol=1e-5, rtol=1e-5)


def _one_tile_spy(
    monkeypatch: pytest.MonkeyPatch, block_n: int, **launch_config: int
) -> list[bool]:
    """Launch matmul row-pass groups with ``block_n``-wide N tiles (and ``launch_config``'s other
    values); returns each launch's ONE_TILE."""
    from warpforge.blueprint import launch, program

    real_default, real_launch = launch.matmul_default, program.KernelProgram._launch_kernel
    one_tile: list[bool] = []

    def default(features, on_gpu, row_passes=False):  # type: ignore[no-untyped-def]
        config = real_default(features, on_gpu, row_passes)
        return {**config, "BLOCK_N": block_n, **launch_config} if row_passes else config

    def spy(self, kernel, grid, args, options):  # type: ignore[no-untyped-def]
        if "ONE_TILE" in options:
            one_tile.append(options["ONE_TILE"])
        return real_launch(self, kernel, grid, args, options)

    monkeypatch.setattr(launch, "matmul_default", default)
    monkeypatch.setattr(program.KernelProgram, "_launch_kernel", spy)
    return one_tile


@pytest.mark.parametrize("block_n", [16, 64], ids=["two-passes", "one-tile"])
@pytest.mark.parametrize("s, inner", [(37, 8), (64, 20), (1, 3)], ids=["ragged", "even", "one"])
def test_matmul_softmax_in_one_tile_or_two_passes(  # type: ignore[no-untyped-def]
    block_n: int, s: int, inner: int, monkeypatch: pytest.MonkeyPatch, check
) -> None:
    """The row in one N tile (its product computed once) or in tiles walked twice: the same
    results; which one ran follows BLOCK_N >= N."""
    one_tile = _one_tile_spy(monkeypatch, block_n)
    ir = _scores_softmax(f"scores_tiles_{block_n}_{s}_{inner}", "DH")
    assert "if ONE_TILE:" in KernelSourceGenerator(ir).source()
    keep = torch.rand(5, s) < 0.6
    keep[:, 0] = True
    q, k = torch.randn(2, 3, 5, inner), torch.randn(2, 3, s, inner)
    check(ir, [q, k, keep], atol=1e-5, rtol=1e-5)
    assert one_tile == [s <= block_n]


@pytest.mark.parametrize("last_rows_first", [False, True], ids=["in-order", "last-rows-first"])
@pytest.mark.parametrize("block_n", [16, 64], ids=["two-passes", "one-tile"])
def test_matmul_row_statistics_stream_in_one_tile_or_two_passes(  # type: ignore[no-untyped-def]
    block_n: int, last_rows_first: bool, monkeypatch: pytest.MonkeyPatch, check
) -> None:
    """sum, mean, amax and softmax over a linear's rows, per-row and full outputs, values used
    before and after the statistics: one tile and two passes agree with float64, whichever
    row blocks the grid takes first."""
    from warpforge.blueprint import program

    monkeypatch.setattr(program, "LAST_ROWS_FIRST", last_rows_first)
    one_tile = _one_tile_spy(monkeypatch, block_n)
    b = BlueprintBuilder(f"linear_stats_tiles_{block_n}_{last_rows_first}")
    x = b.input("x", ("T", 24), "float32")
    w = b.input("w", (41, 24), "float32")
    bias = b.input("bias", (41,), "float32")
    y = b.op("tanh", b.op("linear", x, w, bias))
    mean = b.op("mean", y, keepdim=True)
    peak = b.op("amax", y, keepdim=True)
    b.output("centered", b.op("mul", b.op("sub", y, mean), b.op("softmax", y)))
    b.output("spread", b.op("sub", peak, mean))
    b.output("total", b.op("sum", y))
    b.output("y", y)
    ir = b.build()
    plan = KernelSourceGenerator(ir).plan()
    assert plan.kernel_count == 1 and plan.groups[0].kind == "matmul"
    got = check(ir, [torch.randn(9, 24), torch.randn(41, 24), torch.randn(41)], atol=1e-5)
    assert got[2].shape == (9,)  # a sum without keepdim is stored as [T]
    assert one_tile == [block_n >= 41]


def test_matmul_softmax_of_a_fully_masked_row_is_nan_like_torch() -> None:
    ir = _scores_softmax("scores_masked_row", 8)
    keep = torch.rand(6, 20) < 0.5
    keep[:, 0] = True
    keep[2] = False  # torch.softmax of a row of -inf is NaN
    q, k = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 20, 8)
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    assert got[:, :, 2].isnan().all()
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5, equal_nan=True)


SWITCHES = pytest.mark.parametrize(
    "last_rows_first", [True, False], ids=["last-rows-first", "in-order"]
)
"""The kernel's launch order (program.LAST_ROWS_FIRST, on by default)."""


@SWITCHES
@pytest.mark.parametrize("kind", ["causal", "anti-causal", "window"])
@pytest.mark.parametrize("t, s", [(53, 53), (64, 48)], ids=["ragged-tiles", "even-tiles"])
def test_matmul_softmax_skips_the_tiles_its_mask_hides(
    t: int,
    s: int,
    kind: str,
    last_rows_first: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A causal mask hides whole N tiles after the diagonal (an anti-causal one before it, a
    sliding window both), and one block of rows is masked throughout: skipped tiles store 0
    (NaN on the rows torch gives NaN), and every other value matches float64 exactly as when
    every tile is computed."""
    from warpforge.blueprint import program

    monkeypatch.setattr(program, "LAST_ROWS_FIRST", last_rows_first)
    ir = _scores_softmax(f"scores_skip_{t}_{s}_{kind}", 8)
    source = KernelSourceGenerator(ir).source()
    assert "kept = tl.max(in_keep.to(tl.int32)) != 0" in source  # the scan of the mask
    assert source.count("for n_start in range(first_tile, end_tile, BLOCK_N):") == 2
    i, j = torch.arange(t)[:, None], torch.arange(s)[None, :]
    keep = {"causal": j <= i, "anti-causal": j >= i, "window": (i - j).abs() < 10}[kind]
    keep[16:32] = False  # a whole block of rows of the CPU's 16-row tiles
    q, k = torch.randn(2, 3, t, 8), torch.randn(2, 3, s, 8)
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    assert got[:, :, 16:32].isnan().all() and not got[:, :, :16].isnan().any()
    assert (got[:, :, :16] != 0).any() and (got[:, :, :16] == 0).any()
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5, equal_nan=True)


_BLOCK_MASKS = st.sampled_from(["false", "true", "random"])


@pytest.fixture(scope="module")
def scores_module():  # type: ignore[no-untyped-def]
    """One compiled masked softmax for every hypothesis example (each shape specialises it)."""
    return warpforge.compile(_scores_softmax("scores_skip_property", 8), strict=True)


@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 50),
    s=st.integers(1, 50),
    blocks=st.lists(_BLOCK_MASKS, min_size=16, max_size=16),
    seed=st.integers(0, 2**16),
    last_rows_first=st.booleans(),
)
def test_masked_softmax_matches_float64_on_block_structured_masks(  # type: ignore[no-untyped-def]
    scores_module,
    t: int,
    s: int,
    blocks: list[str],
    seed: int,
    last_rows_first: bool,
) -> None:
    """Random masks made of 16 x 16 blocks (the CPU's tiles) that are false, true or random,
    with NaN and inf in the keys of columns no row keeps: the skipped tiles never leak into the
    result, which matches float64 everywhere (NaN exactly on the rows masked throughout), in
    either launch order."""
    from warpforge.blueprint import program

    generator = torch.Generator().manual_seed(seed)
    keep = torch.rand(t, s, generator=generator) < 0.5
    for index, kind in enumerate(blocks):  # a 4 x 4 grid of blocks covers 64 x 64
        row, col = 16 * (index // 4), 16 * (index % 4)
        if kind != "random":
            keep[row : row + 16, col : col + 16] = kind == "true"
    q = torch.randn(1, 2, t, 8, generator=generator)
    k = torch.randn(1, 2, s, 8, generator=generator)
    hidden = ~keep.any(dim=0)  # columns no row keeps: their scores never count
    k[:, :, hidden] = torch.tensor([float("nan"), float("inf")]).repeat(4)
    saved = program.LAST_ROWS_FIRST
    program.LAST_ROWS_FIRST = last_rows_first
    try:
        got = scores_module(q, k, keep)
    finally:
        program.LAST_ROWS_FIRST = saved
    scores = q.double() @ k.double().transpose(-2, -1) * 0.3
    want = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5, equal_nan=True)
    assert torch.equal(got.isnan().all(dim=-1), (~keep.any(dim=-1)).expand(1, 2, t))


@pytest.mark.parametrize("block_n", [16, 64], ids=["two-passes", "one-tile"])
def test_matmul_softmax_with_64_bit_offsets(  # type: ignore[no-untyped-def]
    block_n: int, monkeypatch: pytest.MonkeyPatch, check
) -> None:
    """The int64 offsets of the matmul row kernels (taken past 2**31 elements; here forced by a
    lower limit), through the mask scan, the kept range and the hidden tiles' stores."""
    from warpforge.blueprint import program

    one_tile = _one_tile_spy(monkeypatch, block_n)
    index_64: list[bool] = []
    real_launch = program.KernelProgram._launch_kernel

    def spy(self, kernel, grid, args, options):  # type: ignore[no-untyped-def]
        index_64.append(options["INDEX_64"])
        return real_launch(self, kernel, grid, args, options)

    monkeypatch.setattr(program.KernelProgram, "_launch_kernel", spy)
    monkeypatch.setattr(program, "_INT32_LIMIT", 64)
    ir = _scores_softmax(f"scores_index_64_{block_n}", 8)
    keep = torch.ones(40, 37, dtype=torch.bool).tril()
    keep[16:32] = False
    q, k = torch.randn(1, 2, 40, 8), torch.randn(1, 2, 37, 8)
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5, equal_nan=True)
    assert index_64 == [True] and one_tile == [block_n >= 37]


def test_a_where_before_the_softmax_mask_applies_in_every_kept_tile(check) -> None:  # type: ignore[no-untyped-def]
    """An earlier ``where`` of the same kernel applies in every tile the passes compute, beside
    the softmax mask's own select."""
    b = BlueprintBuilder("scores_two_wheres")
    q, k = b.input("q", ("T", 8), "float32"), b.input("k", ("S", 8), "float32")
    keep, clip = b.input("keep", ("T", "S"), "bool"), b.input("clip", ("T", "S"), "bool")
    product = b.op("matmul", q, b.op("transpose", k, dim0=0, dim1=1))
    clipped = b.op("where", clip, product, other=-1.0)
    b.output("p", b.op("softmax", b.op("where", keep, clipped, other="-inf")))
    ir = b.build()
    source = KernelSourceGenerator(ir).source()
    assert "first_tile" in source  # the kept-range kernel
    # one tile, and in each of the two passes
    assert source.count("v_where_0 = (tl.where(in_clip") == 3
    causal = torch.ones(50, 45, dtype=torch.bool).tril()
    check(ir, [torch.randn(50, 8), torch.randn(45, 8), causal, torch.rand(50, 45) < 0.5])


def test_masked_scores_used_elsewhere_are_computed_for_every_tile(check) -> None:  # type: ignore[no-untyped-def]
    """No tile is skipped when the masked scores also reach memory or the fill is not -inf."""
    b = BlueprintBuilder("scores_kept")
    q = b.input("q", ("T", 8), "float32")
    k = b.input("k", ("S", 8), "float32")
    keep = b.input("keep", ("T", "S"), "bool")
    scores = b.op(
        "where", keep, b.op("matmul", q, b.op("transpose", k, dim0=0, dim1=1)), other="-inf"
    )
    b.output("p", b.op("softmax", scores))
    b.output("scores", scores)
    b2 = BlueprintBuilder("scores_filled")
    q2, k2 = b2.input("q", ("T", 8), "float32"), b2.input("k", ("S", 8), "float32")
    keep2 = b2.input("keep", ("T", "S"), "bool")
    product = b2.op("matmul", q2, b2.op("transpose", k2, dim0=0, dim1=1))
    b2.output("p", b2.op("softmax", b2.op("where", keep2, product, other=-1e4)))
    mask = torch.ones(40, 37, dtype=torch.bool).tril()
    for ir in (b.build(), b2.build()):
        assert "first_tile" not in KernelSourceGenerator(ir).source()
        check(ir, [torch.randn(40, 8), torch.randn(37, 8), mask], atol=1e-5, rtol=1e-5)


def test_matmul_then_softmax_in_float16(check) -> None:  # type: ignore[no-untyped-def]
    ir = _scores_softmax("scores_fp16", "DH", "float16")
    keep = torch.ones(11, 19, dtype=torch.bool)
    q, k = torch.randn(1, 2, 11, 16).half(), torch.randn(1, 2, 19, 16).half()
    check(ir, [q, k, keep], atol=2e-3, rtol=1e-2)


def test_row_ops_after_a_matmul_fuse_only_one_level_and_small_k() -> None:
    b = BlueprintBuilder("softmax_then_sum")
    x = b.input("x", ("T", "K"), "float32")
    w = b.input("w", ("N", "K"), "float32")
    p = b.op("softmax", b.op("linear", x, w))
    b.output("s", b.op("sum", b.op("mul", p, p), keepdim=True))  # fed by a row op: next kernel
    plan = KernelSourceGenerator(b.build()).plan()
    assert [(g.kind, [n.op for n in g.nodes]) for g in plan.groups] == [
        ("matmul", ["linear", "softmax", "mul"]),
        ("rows", ["sum"]),
    ]
    b = BlueprintBuilder("wide_k_softmax")
    x = b.input("x", ("T", 4096), "float32")  # a fixed K above ROW_FUSION_MAX_K
    w = b.input("w", ("N", 4096), "float32")
    b.output("p", b.op("softmax", b.op("linear", x, w)))
    plan = KernelSourceGenerator(b.build()).plan()
    assert [g.kind for g in plan.groups] == ["matmul", "rows"]


@pytest.mark.parametrize("inner", [32, 40], ids=["even-k", "k-tail"])
def test_matmul_k_loop_with_and_without_a_tail(inner: int, check) -> None:  # type: ignore[no-untyped-def]
    b = BlueprintBuilder("plain_matmul")
    a = b.input("a", (3, "M", "K"), "float32")
    m = b.input("m", ("K", "N"), "float32")  # broadcast over the batch
    b.output("y", b.op("add", b.op("matmul", a, m), scalar=1.0))
    ir = b.build()
    source = KernelSourceGenerator(ir).source()
    assert "if EVEN_K:" in source and "% M" in source
    check(ir, [torch.randn(3, 19, inner), torch.randn(inner, 21)], atol=1e-4, rtol=1e-5)


@pytest.mark.gpu
def test_bf16_matmul_kernels_on_gpu() -> None:
    ir = _scores_softmax("scores_bf16", "DH", "bfloat16")
    keep = torch.ones(300, 300, dtype=torch.bool, device="cuda").tril()
    q = torch.randn(2, 3, 300, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 3, 300, 64, dtype=torch.bfloat16, device="cuda")
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=2e-2)
    b = BlueprintBuilder("linear_bf16")
    x = b.input("x", ("T", "D"), "bfloat16")
    w = b.input("w", ("N", "D"), "bfloat16")
    b.output("y", b.op("gelu", b.op("linear", x, w), approximate="tanh"))
    x_val = torch.randn(1000, 1000, dtype=torch.bfloat16, device="cuda")  # ragged for every tile
    w_val = torch.randn(333, 1000, dtype=torch.bfloat16, device="cuda") / 32
    got = warpforge.compile(b.build(), strict=True)(x_val, w_val)
    want = torch.nn.functional.gelu(x_val.double() @ w_val.double().t(), approximate="tanh")
    torch.testing.assert_close(got.double(), want, atol=3e-2, rtol=2e-2)


@pytest.mark.gpu
@SWITCHES
@pytest.mark.parametrize("t", [300, 1024], ids=["ragged", "even"])
def test_bf16_masked_softmax_kept_tiles_on_gpu(
    t: int, last_rows_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept-range kernel compiled for the GPU (ragged and even tiles), in either launch
    order: a causal mask and a block of rows masked throughout."""
    from warpforge.blueprint import program

    monkeypatch.setattr(program, "LAST_ROWS_FIRST", last_rows_first)
    ir = _scores_softmax(f"scores_kept_gpu_{t}", "DH", "bfloat16")
    keep = torch.ones(t, t, dtype=torch.bool, device="cuda").tril()
    keep[64:128] = False
    q = torch.randn(2, 3, t, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 3, t, 64, dtype=torch.bfloat16, device="cuda")
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    assert got[:, :, 64:128].isnan().all()
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=2e-2, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("t", "launch_config"),
    [(48, {}), (1000, {"BLOCK_M": 16, "num_warps": 8}), (1000, {"BLOCK_M": 32, "num_warps": 16})],
    ids=["default-64-wide", "1024-wide-8-warps", "1024-wide-16-warps"],
)
def test_bf16_scores_in_one_tile_on_gpu(  # type: ignore[no-untyped-def]
    t: int, launch_config: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-tile kernel on the GPU: the default 64-column tile over a shorter row, and
    1024-column tiles as the tuner tries them at the bench shape (bf16, causal mask, ragged T)."""
    block_n = 64 if t <= 64 else 1024
    stages = {"num_stages": 2} if launch_config else {}
    one_tile = _one_tile_spy(monkeypatch, block_n, **launch_config, **stages)
    name = f"scores_one_tile_{t}_{launch_config.get('num_warps', 4)}"
    ir = _scores_softmax(name, "DH", "bfloat16")
    keep = torch.ones(t, t, dtype=torch.bool, device="cuda").tril()
    q = torch.randn(2, 3, t, 64, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 3, t, 64, dtype=torch.bfloat16, device="cuda")
    got = warpforge.compile(ir, strict=True)(q, k, keep)
    want = torch.softmax(
        (q.double() @ k.double().transpose(-2, -1) * 0.3).masked_fill(~keep, float("-inf")), -1
    )
    torch.testing.assert_close(got.double(), want, atol=1e-2, rtol=2e-2)
    assert one_tile == [True]


@pytest.mark.parametrize("use_tma", [True, False], ids=["tma", "pointer"])
@pytest.mark.parametrize(
    "m, k, n", [(13, 40, 24), (70, 36, 36), (5, 9, 7)], ids=["aligned", "ragged-tiles", "odd-k"]
)
def test_two_d_matmuls_on_the_persistent_tma_and_pointer_kernels(
    use_tma: bool, m: int, k: int, n: int, monkeypatch: pytest.MonkeyPatch, check
) -> None:  # type: ignore[no-untyped-def]
    from warpforge.blueprint import program

    monkeypatch.setattr(program, "USE_TMA", use_tma)
    chosen: list[bool] = []
    real = program.tma_operands
    monkeypatch.setattr(
        program, "tma_operands", lambda a, b: chosen.append(real(a, b) is not None) or real(a, b)
    )
    b = BlueprintBuilder("two_d_matmuls")
    x = b.input("x", ("M", "K"), "float32")
    w = b.input("w", ("N", "K"), "float32")  # linear: B stored [N, K]
    bias = b.input("bias", ("N",), "float32")
    kn = b.input("kn", ("K", "N"), "float32")  # matmul: B stored [K, N]
    b.output("y", b.op("gelu", b.op("linear", x, w, bias), approximate="tanh"))
    b.output("z", b.op("mul", b.op("matmul", x, kn), scalar=0.5))
    ir = b.build()
    assert "def k0_linear_gelu_tma(" in KernelSourceGenerator(ir).source()
    inputs = [torch.randn(m, k), torch.randn(n, k), torch.randn(n), torch.randn(k, n)]
    check(ir, inputs, atol=1e-4, rtol=1e-5)
    aligned = (k * 4) % 16 == 0 and (n * 4) % 16 == 0
    assert chosen == [use_tma and (k * 4) % 16 == 0, use_tma and aligned]


def test_persistent_matmul_keeps_one_tile_stride_for_every_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The persistent kernel's tile stride is a constexpr: fixed per device, so a new problem
    size reuses the compiled kernel; fewer tiles than the stride launch one program per tile."""
    from warpforge.blueprint import program

    launches: list[tuple[tuple[int, ...], dict]] = []
    real = program.KernelProgram._launch_kernel

    def spy(self, kernel, grid, args, options):  # type: ignore[no-untyped-def]
        if "NUM_PROGRAMS" in options:
            launches.append((tuple(grid), dict(options)))
        return real(self, kernel, grid, args, options)

    monkeypatch.setattr(program.KernelProgram, "_launch_kernel", spy)
    b = BlueprintBuilder("persistent_stride")
    x = b.input("x", ("M", "K"), "float32")
    w = b.input("w", ("N", "K"), "float32")
    b.output("y", b.op("linear", x, w))
    compiled = warpforge.compile(b.build(), strict=True)
    for m in (5, 200):  # 1 tile row, then many
        x_val, w_val = torch.randn(m, 32), torch.randn(48, 32)
        torch.testing.assert_close(compiled(x_val, w_val), x_val @ w_val.t(), atol=1e-4, rtol=1e-5)
    assert len(launches) == 2, launches
    (small_grid, small), (big_grid, big) = launches
    assert small["NUM_PROGRAMS"] == big["NUM_PROGRAMS"] == program._persistent_stride(x_val.device)
    assert small_grid[0] < small["NUM_PROGRAMS"] and big_grid[0] == big["NUM_PROGRAMS"]
