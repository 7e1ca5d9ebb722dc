"""The built-in suite: registered problems verified in process (and timed on the GPU)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import pytest
import torch
import triton
import triton.language as tl

from warpforge.harness import bench
from warpforge.harness.problem import BaselineUnavailable, Problem
from warpforge.runtime import interpreter_enabled
from warpforge.validation import parse_shape

requires_interpreter = pytest.mark.skipif(
    not interpreter_enabled(),
    reason="checks the CPU (interpreter) path: Triton here compiles for the GPU instead",
)


@triton.jit
def _axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * 3.0 - 1.0).to(y_ptr.dtype.element_ty), mask=mask)


def _axpb(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _axpb_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
    return y


def _inputs(shape, dtype, device, generator):
    return (torch.randn(shape["N"], 3, dtype=dtype, device=device, generator=generator),)


def _missing_baseline():
    raise BaselineUnavailable("liger-kernel is not installed")


def _problem(implementation, name: str = "test.axpb", reference=None) -> Problem:
    return Problem(
        name=name,
        reference=reference or (lambda x: x * 3.0 - 1.0),
        implementation=implementation,
        make_inputs=_inputs,
        flops=lambda s, d: 2.0 * s["N"] * 3,
        bytes_moved=lambda s, d: 2.0 * s["N"] * 3 * d.itemsize,
        shapes=[{"N": 1 << 20}],
        cpu_shapes=[{"N": 7}, {"N": 130}],
        dtypes=(torch.float32, torch.float16, torch.bfloat16),
        baselines={"liger": _missing_baseline},
    )


def _mutating(x: torch.Tensor) -> torch.Tensor:
    y = _axpb(x)
    x.zero_()
    return y


def _partial(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    y[: y.shape[0] // 2] = _axpb(x)[: y.shape[0] // 2]
    return y


def _transposed(x: torch.Tensor) -> torch.Tensor:
    """The right values in a column-major buffer: a transposed view of a contiguous result."""
    return _axpb(x.t().contiguous()).t()


def _transposed_on(calls: Callable[[int], bool]) -> Callable[[torch.Tensor], torch.Tensor]:
    """An implementation that returns its result transposed on the calls that ``calls`` picks
    (counted from 1) and contiguous on the others."""
    count = itertools.count(1)

    def implementation(x: torch.Tensor) -> torch.Tensor:
        return _transposed(x) if calls(next(count)) else _axpb(x)

    return implementation


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_honest_builtin_passes(dtype: torch.dtype, device: torch.device) -> None:
    result = bench.verify_problem(_problem(_axpb), {"N": 130}, dtype, device)
    assert result.passed, [str(f) for f in result.findings]
    assert result.trials == 5


@pytest.mark.parametrize(
    ("implementation", "reason"),
    [
        (_mutating, "input-mutation"),
        (_partial, "uninitialised-memory"),
        (lambda x: _axpb(x).double(), "wrong-dtype"),
        (lambda x: x, "aliasing"),
        (lambda x: (_axpb(x.half())).float(), "tolerance"),
        (_transposed, "wrong-layout"),
    ],
)
def test_broken_builtin_rejected(implementation, reason: str, device: torch.device) -> None:
    result = bench.verify_problem(_problem(implementation), {"N": 130}, torch.float32, device)
    assert reason in result.reasons(), [str(f) for f in result.findings]


def test_degenerate_builtin_rejected(device: torch.device) -> None:
    problem = _problem(lambda x: torch.zeros_like(x), reference=lambda x: x * 0.0)
    assert "degenerate" in bench.verify_problem(problem, {"N": 7}, torch.float32, device).reasons()


def test_suite_tasks_skip_bf16_on_cpu_and_filter() -> None:
    problem = _problem(_axpb)
    tasks = bench.suite_tasks([problem], torch.device("cpu"))
    assert len(tasks) == 2 * 3
    skipped = [t for t in tasks if t[3] is not None]
    assert {t[2] for t in skipped} == {torch.bfloat16}
    only = bench.suite_tasks([problem], torch.device("cpu"), dtype=torch.float16)
    assert {t[2] for t in only} == {torch.float16}
    gpu = bench.suite_tasks([problem], torch.device("cuda"), sweep=True)
    assert {t[1]["N"] for t in gpu} == {1 << 20}


def test_suite_tasks_keep_only_the_shapes_asked_for() -> None:
    shapes = [{"M": 4, "N": 7}, {"M": 8, "N": 7}, {"M": 4, "N": 130}]
    problem = dataclasses.replace(_problem(_axpb), cpu_shapes=shapes)
    cpu = torch.device("cpu")
    only_n = bench.suite_tasks([problem], cpu, shapes=[parse_shape("N=7")])
    assert [t[1] for t in only_n[::3]] == [{"M": 4, "N": 7}, {"M": 8, "N": 7}]
    both = [parse_shape("M=4, N=130"), parse_shape("M=8")]
    kept = bench.suite_tasks([problem], cpu, dtype=torch.float32, shapes=both)
    assert [t[1] for t in kept] == [{"M": 8, "N": 7}, {"M": 4, "N": 130}]
    assert bench.suite_tasks([problem], cpu, shapes=[{"N": 256}]) == []
    assert len(bench.suite_tasks([problem], cpu, shapes=None)) == 3 * 3
    for bad in ("", "N", "N=", "N=2x", "=4", "N=-1"):
        with pytest.raises(ValueError, match="NAME=SIZE"):
            parse_shape(bad)


def test_suite_tasks_time_a_shape_listed_twice_once() -> None:
    """A sweep shape that is also one of the problem's own shapes is one row, not two."""
    problem = dataclasses.replace(_problem(_axpb), shapes=[{"N": 7}, {"N": 9}],
                                  sweep=[{"N": 9}, {"N": 11}])  # fmt: skip
    tasks = bench.suite_tasks([problem], torch.device("cuda"), dtype=torch.float32, sweep=True)
    assert [t[1] for t in tasks] == [{"N": 7}, {"N": 9}, {"N": 11}]


def test_select_problems_by_glob() -> None:
    problems = [_problem(_axpb, "norm.rms"), _problem(_axpb, "norm.layer"), _problem(_axpb, "ce")]
    assert [p.name for p in bench.select_problems(problems, "norm.*")] == ["norm.rms", "norm.layer"]
    with pytest.raises(ValueError, match="no problem matches"):
        bench.select_problems(problems, "nothing*")


@requires_interpreter
def test_run_builtin_suite_rows_on_cpu() -> None:
    tasks = bench.suite_tasks([_problem(_axpb)], torch.device("cpu"))
    rows = bench.run_builtin_suite(tasks, torch.device("cpu"))
    assert {r["status"] for r in rows} == {"ok", "skipped"}
    ok = [r for r in rows if r["status"] == "ok"]
    assert all(r["times"] == {} for r in ok)  # CPU: verification only
    assert ok[0]["verification"]["skipped_checks"]


@pytest.mark.gpu
def test_builtin_timed_against_baselines_on_gpu() -> None:
    tasks = bench.suite_tasks([_problem(_axpb)], torch.device("cuda"), dtype=torch.bfloat16)
    rows = bench.run_builtin_suite(tasks, torch.device("cuda"), max_time_s=0.5)
    row = rows[0]
    assert row["status"] == "ok", row
    assert {"candidate", "reference"} <= set(row["times"])
    assert row["skipped_baselines"] == {"liger": "liger-kernel is not installed"}
    assert row["speedup"]["vs_best"]["value"] > 0


def test_baseline_failing_on_the_inputs_is_skipped_not_fatal(device: torch.device) -> None:
    def broken_baseline():
        def run(x):
            raise TypeError("forward() missing 1 required positional argument: 'weight'")

        return run

    problem = _problem(_axpb)
    problem = Problem(**{**problem.__dict__, "baselines": {"broken": broken_baseline}})
    times, skipped, findings = bench.time_problem(
        problem, {"N": 130}, torch.float32, device, max_time_s=0.05
    )
    assert "broken" not in times and "candidate" in times
    assert skipped["broken"].startswith("failed on these inputs: TypeError: forward() missing")
    assert findings == []


def test_a_crashing_row_is_reported_and_the_suite_goes_on(device: torch.device) -> None:
    def exploding_inputs(shape, dtype, device, generator):
        raise MemoryError("simulated out of memory")

    good = _problem(_axpb, name="test.good")
    bad = Problem(
        **{**_problem(_axpb).__dict__, "name": "test.bad", "make_inputs": exploding_inputs}
    )
    tasks = bench.suite_tasks([bad, good], device, dtype=torch.float32)
    rows = bench.run_builtin_suite(tasks, device, max_time_s=0.05)
    by_name = {}
    for row in rows:
        by_name.setdefault(row["problem"], set()).add(row["status"])
    assert by_name["test.bad"] == {"error"}
    assert by_name["test.good"] == {"ok"}
    error = rows[0]["verification"]["error"]
    assert "MemoryError: simulated out of memory" in error
    # the row says which stage failed and where (an out-of-memory row names the allocation)
    assert error.startswith("verification, at ")
    assert "exploding_inputs" in error.split(": MemoryError")[0]


def test_baseline_that_writes_its_inputs_runs_on_private_copies(device: torch.device) -> None:
    def in_place_baseline():
        def run(x):
            return x.mul_(3.0).sub_(1.0)  # right answer, but it overwrites x (Liger-style)

        return run

    problem = _problem(_axpb)
    problem = Problem(**{**problem.__dict__, "baselines": {"in_place": in_place_baseline}})
    times, skipped, findings = bench.time_problem(
        problem, {"N": 130}, torch.float32, device, max_time_s=0.05
    )
    assert findings == []  # the candidate saw uncorrupted inputs in every timed call
    assert skipped == {}
    assert "writes its inputs: timed on private copies of them" in times["in_place"]["notes"]


def test_builtin_output_transposed_on_the_repeat_calls_is_rejected(device: torch.device) -> None:
    """The repeat calls of checks 6 and 7 (calls 2 and 4) are held to the layout too, as the
    isolated path holds a candidate's every call."""
    problem = _problem(_transposed_on(lambda call: call in (2, 4)))
    result = bench.verify_problem(problem, {"N": 130}, torch.float32, device)
    assert result.reasons() == ["wrong-layout"], [str(f) for f in result.findings]


def test_builtin_output_transposed_while_timed_is_rejected(device: torch.device) -> None:
    """Check 11 compares the layout too: right values in another layout are not the verified
    output (an implementation could be verified contiguous, then timed writing a cheaper one)."""
    pool = 2
    problem = _problem(_transposed_on(lambda call: call > pool))
    times, _, findings = bench.time_problem(
        problem, {"N": 130}, torch.float32, device, max_time_s=0.05, pool=pool
    )
    assert [f.reason.value for f in findings] == ["timed-output"], findings
    assert "candidate" in times


def _row_softmax_problem(implementation) -> Problem:
    def inputs(shape, dtype, device, generator):
        return (
            torch.randn(shape["M"], shape["N"], dtype=dtype, device=device, generator=generator),
        )

    return Problem(
        name="test.row_softmax",
        reference=lambda x: torch.softmax(x, dim=-1),
        implementation=implementation,
        make_inputs=inputs,
        flops=lambda s, d: 5.0 * s["M"] * s["N"],
        bytes_moved=lambda s, d: 2.0 * s["M"] * s["N"] * d.itemsize,
        shapes=[],
        cpu_shapes=[{"M": 37, "N": 50}],
        row_split=lambda inputs, rows: (inputs[0][rows],),
    )


def _softmax_wrong_in_last_rows(x: torch.Tensor) -> torch.Tensor:
    y = torch.softmax(x.double(), dim=-1).to(x.dtype)
    y[-3:] *= 1.01
    return y


def test_gpu_reference_blocks_leave_room_for_the_outputs(monkeypatch) -> None:
    """On a GPU the blocks' budget is a share of the memory left once PyTorch's result and the
    candidate's outputs (about the inputs' size each) are allocated: 8192 x 262144 fp32 with a
    residual ran out of 80 GB when the share was taken of all the free memory."""
    problem = _row_softmax_problem(lambda x: x)
    x = torch.randn(64, 50)
    size = x.numel() * x.element_size()
    need = 3 * 8 * x.numel()
    monkeypatch.setattr(bench, "_free_device_bytes", lambda device: 2 * size + need * 4)
    assert bench._reference_blocks(problem, (x,), torch.device("cuda")) is None
    monkeypatch.setattr(bench, "_free_device_bytes", lambda device: 2 * size + need * 2)
    blocks = bench._reference_blocks(problem, (x,), torch.device("cuda"))
    assert blocks is not None and len(blocks) == 2 and blocks[-1].stop == 64
    monkeypatch.setattr(bench, "_free_device_bytes", lambda device: size)  # not even that
    blocks = bench._reference_blocks(problem, (x,), torch.device("cuda"))
    assert blocks is not None and len(blocks) == 64


@pytest.mark.parametrize(
    ("implementation", "reason"),
    [
        (lambda x: torch.softmax(x.double(), dim=-1).to(x.dtype), None),
        (_softmax_wrong_in_last_rows, "tolerance"),
        (lambda x: torch.softmax(x.half(), dim=-1).to(x.dtype), "tolerance"),
    ],
)
def test_float64_reference_in_row_blocks(monkeypatch, implementation, reason) -> None:
    # a reference "too large" for memory is computed 37 rows -> blocks of a few rows
    monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * 37 * 50 // 5)
    problem = _row_softmax_problem(implementation)
    x = torch.randn(37, 50)
    blocks = bench._reference_blocks(problem, (x,), torch.device("cpu"))
    assert blocks is not None and len(blocks) >= 5 and blocks[-1].stop == 37
    result = bench.verify_problem(problem, {"M": 37, "N": 50}, torch.float32, torch.device("cpu"))
    if reason is None:
        assert result.passed, [str(f) for f in result.findings]
        assert 0 < result.max_error < 1e-6
    else:
        assert reason in result.reasons(), [str(f) for f in result.findings]
    if implementation is _softmax_wrong_in_last_rows:
        first_bad = next(b for b in blocks if b.start <= 34 < b.stop)  # rows 34..36 are off
        assert f"(rows {first_bad.start}:{first_bad.stop})" in str(result.findings[0])


def test_block_samples_match_the_whole_output_sample(monkeypatch) -> None:
    monkeypatch.setattr(bench, "TRIAL_SAMPLE", 64)
    whole = torch.randn(37, 50, dtype=torch.float64)
    blocks = [slice(0, 7), slice(7, 20), slice(20, 37)]
    parts = [bench._block_sample(whole[b], b, whole) for b in blocks]
    assert torch.equal(torch.cat(parts), bench._trial_sample(whole))


def test_timing_pool_shrinks_to_fit_device_memory() -> None:
    gib = 1 << 30
    # 8 GB inputs + 8 GB expected outputs a set, 80 GB free besides the first: (80 + 16) / 3 / 16
    assert bench.pool_sets_within(16 * gib, 80 * gib) == 2
    assert bench.pool_sets_within(16 * gib, 10 * gib) == 1  # never below one set
    assert bench.pool_sets_within(64 << 20, 60 * gib) > 4  # small problems keep the full pool
    assert bench._pool_that_fits((torch.randn(4),), (torch.randn(4),), torch.device("cpu")) > 4


def _row_softmax_grad_problem(implementation, seen_rows: list[int]) -> Problem:
    """A forward + backward problem: inputs (x, dy), output dx, through autograd."""

    def reference(x, dy):
        seen_rows.append(x.shape[0])
        leaf = x.detach().requires_grad_()
        return torch.autograd.grad(torch.softmax(leaf, dim=-1), leaf, dy)

    def inputs(shape, dtype, device, generator):
        return tuple(
            torch.randn(shape["M"], shape["N"], dtype=dtype, device=device, generator=generator)
            for _ in range(2)
        )

    return Problem(
        name="test.row_softmax_grad",
        reference=reference,
        implementation=implementation,
        make_inputs=inputs,
        flops=lambda s, d: 8.0 * s["M"] * s["N"],
        bytes_moved=lambda s, d: 5.0 * s["M"] * s["N"] * d.itemsize,
        shapes=[],
        cpu_shapes=[{"M": 37, "N": 50}],
        row_split=lambda inputs, rows: (inputs[0][rows], inputs[1][rows]),
    )


def _softmax_grad(x, dy):
    y = torch.softmax(x.double(), dim=-1)
    return ((y * (dy.double() - (dy.double() * y).sum(-1, keepdim=True))).to(x.dtype),)


def _softmax_grad_wrong_in_last_rows(x, dy):
    (dx,) = _softmax_grad(x, dy)
    dx[-2:] += 1e-2
    return (dx,)


@pytest.mark.parametrize(
    ("implementation", "reason"),
    [(_softmax_grad, None), (_softmax_grad_wrong_in_last_rows, "tolerance")],
)
def test_gradient_problem_verifies_in_row_blocks(monkeypatch, implementation, reason) -> None:
    # two row inputs (x, dy) split alike; PyTorch's own result (an autograd graph at the
    # inputs' dtype) is computed a block at a time too, never on all 37 rows at once
    monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * 2 * 37 * 50 // 5)
    seen_rows: list[int] = []
    problem = _row_softmax_grad_problem(implementation, seen_rows)
    result = bench.verify_problem(problem, {"M": 37, "N": 50}, torch.float32, torch.device("cpu"))
    assert seen_rows and max(seen_rows) < 37 and sum(seen_rows) % 37 == 0
    if reason is None:
        assert result.passed, [str(f) for f in result.findings]
        assert 0 < result.max_error < 1e-5
        assert result.torch_error > 0  # measured on the blocks: fp32 autograd against float64
    else:
        assert reason in result.reasons(), [str(f) for f in result.findings]
        assert "(rows " in str(result.findings[0])


def _row_sum_problem(implementation, seen_rows: list[int]) -> Problem:
    """A weight-gradient-like problem: inputs (x, w, dy), outputs dx = dy * w (one row each)
    and dw = sum over rows of dy * x (``row_sums``: a block's reference gives its share)."""

    def reference(x, w, dy):
        seen_rows.append(x.shape[0])
        return dy * w, (dy * x).sum(dim=0)

    def inputs(shape, dtype, device, generator):
        M, N = shape["M"], shape["N"]
        x, dy = (torch.randn(M, N, dtype=dtype, device=device, generator=generator)
                 for _ in range(2))  # fmt: skip
        return x, torch.randn(N, dtype=dtype, device=device, generator=generator), dy

    return Problem(
        name="test.row_sum",
        reference=reference,
        implementation=implementation,
        make_inputs=inputs,
        flops=lambda s, d: 3.0 * s["M"] * s["N"],
        bytes_moved=lambda s, d: 3.0 * s["M"] * s["N"] * d.itemsize,
        shapes=[],
        cpu_shapes=[{"M": 37, "N": 50}],
        row_split=lambda inputs, rows: (inputs[0][rows], inputs[1], inputs[2][rows]),
        row_sums=(1,),
    )


def _row_sum_exact(x, w, dy):
    return (dy.double() * w.double()).to(x.dtype), (dy.double() * x.double()).sum(0).to(x.dtype)


def _row_sum_wrong_column(x, w, dy):
    dx, dw = _row_sum_exact(x, w, dy)
    dw[7] += 1e-3 * (1 + dw[7].abs())
    return dx, dw


def _row_sum_missing_last_row(x, w, dy):
    dx, _ = _row_sum_exact(x, w, dy)
    return dx, (dy[:-1].double() * x[:-1].double()).sum(0).to(x.dtype)


def _row_sum_first_block_only(x, w, dy):
    # dweight of the first rows only: what a harness comparing each block's share against the
    # whole output's first block would accept
    dx, _ = _row_sum_exact(x, w, dy)
    return dx, (dy[:4].double() * x[:4].double()).sum(0).to(x.dtype)


def _row_sum_unwritten(x, w, dy):
    dx, dw = _row_sum_exact(x, w, dy)
    out = torch.empty_like(dw)  # poisoned by the harness: NaN, then a finite pattern
    out[1:] = dw[1:]
    return dx, out


def _row_sum_half_precision(x, w, dy):
    dx, _ = _row_sum_exact(x, w, dy)
    return dx, (dy.half() * x.half()).sum(0).to(x.dtype)


def _row_sum_wrong_dx(x, w, dy):
    dx, dw = _row_sum_exact(x, w, dy)
    dx[-1] *= 1.01
    return dx, dw


@pytest.mark.parametrize("blocked", [True, False])
@pytest.mark.parametrize(
    ("implementation", "reason"),
    [
        (_row_sum_exact, None),
        (_row_sum_wrong_column, "tolerance"),
        (_row_sum_missing_last_row, "tolerance"),
        (_row_sum_first_block_only, "tolerance"),
        (_row_sum_unwritten, "nonfinite"),
        (_row_sum_half_precision, "tolerance"),
        (_row_sum_wrong_dx, "tolerance"),
    ],
)
def test_row_sum_outputs_verify_in_row_blocks(monkeypatch, implementation, reason, blocked):
    # the same verdict whether the reference is computed whole or in blocks of a few rows, whose
    # dweight shares are added up in float64 and compared once
    if blocked:
        monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * (2 * 37 * 50 + 50) // 5)
    seen_rows: list[int] = []
    problem = _row_sum_problem(implementation, seen_rows)
    x = torch.randn(37, 50)
    blocks = bench._reference_blocks(problem, (x, x[0], x), torch.device("cpu"))
    assert (blocks is not None and len(blocks) >= 5) == blocked
    result = bench.verify_problem(problem, {"M": 37, "N": 50}, torch.float32, torch.device("cpu"))
    assert (max(seen_rows) < 37) == blocked
    if reason is None:
        assert result.passed, [str(f) for f in result.findings]
        assert 0 < result.max_error < 1e-4
        assert result.torch_error > 0
    else:
        assert reason in result.reasons(), [str(f) for f in result.findings]
        if blocked and implementation is not _row_sum_wrong_dx:
            assert "row blocks" in str(result.findings[0]), [str(f) for f in result.findings]
        if blocked and implementation is _row_sum_wrong_dx:
            assert "(rows " in str(result.findings[0])


def _row_sum_rounded_inputs_problem(seen_rows: list[int]) -> Problem:
    """The row-sum problem whose reference rounds dy * x to bfloat16 below float64 (as
    add_rms_norm rounds h = x + residual): PyTorch's error on dweight then grows with the rows
    summed, not only by one final rounding."""
    problem = _row_sum_problem(None, seen_rows)

    def pytorch(x, w, dy):
        terms = dy * x
        if terms.dtype != torch.float64:
            terms = terms.to(torch.bfloat16).to(terms.dtype)
        return dy * w, terms.sum(dim=0)

    def reference(x, w, dy):
        seen_rows.append(x.shape[0])
        return pytorch(x, w, dy)

    return dataclasses.replace(problem, reference=reference, implementation=pytorch)


@pytest.mark.parametrize("blocked", [True, False])
def test_pytorchs_own_row_sum_passes_in_row_blocks(monkeypatch, blocked):
    # PyTorch's own whole result must pass however the reference is blocked: its error on
    # dweight is measured on its shares added up (the error of the whole sum), never on one
    # block's share, which understates an error that grows with the rows
    if blocked:
        monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * (2 * 512 * 64 + 64) // 16)
    seen: list[int] = []
    problem = _row_sum_rounded_inputs_problem(seen)
    shape = {"M": 512, "N": 64}
    for _ in range(3):
        seen.clear()
        result = bench.verify_problem(problem, shape, torch.float32, torch.device("cpu"))
        assert (max(seen) < 512) == blocked
        assert result.passed, [str(f) for f in result.findings]
        assert result.torch_error > 0


def test_row_sum_native_is_its_shares_added_once(monkeypatch):
    monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * (2 * 37 * 50 + 50) // 5)
    seen: list[int] = []
    problem = _row_sum_problem(_row_sum_exact, seen)
    before = problem.make_inputs({"M": 37, "N": 50}, torch.float32, torch.device("cpu"),
                                 torch.Generator().manual_seed(0))  # fmt: skip
    blocks = bench._reference_blocks(problem, before, torch.device("cpu"))
    native = bench._native_by_rows(problem, before, blocks)
    x, w, dy = before
    shares = [(dy[b] * x[b]).sum(0) for b in blocks]
    assert native[1].dtype == torch.float32 and native[1].shape == (50,)
    assert torch.equal(native[1], sum(s.double() for s in shares).float())
    assert torch.equal(native[0], dy * w)


def test_every_torch_compile_baseline_is_static_and_compiled_fresh(monkeypatch):
    """One process times many shapes of a problem: a torch.compile baseline must not recompile
    with dynamic shapes at the second shape, nor run eager past Dynamo's recompile limit."""
    import torch

    from warpforge.catalog import load_builtin_problems

    calls, resets = [], []
    monkeypatch.setattr(torch, "compile", lambda fn, **options: calls.append(options) or fn)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    checked = 0
    for problem in load_builtin_problems():
        factory = problem.baselines.get("torch.compile")
        if factory is None:
            continue
        before = len(calls), len(resets)
        factory()
        assert len(calls) == before[0] + 1, problem.name
        assert calls[-1].get("dynamic") is False, (problem.name, calls[-1])
        assert len(resets) == before[1] + 1, problem.name
        checked += 1
    assert checked >= 20
