"""The norm and softmax benchmark problems: registered, correct on their CPU shapes, honest
byte counts, and baselines that either run or say why not."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import warpforge.ops.norm_problems
import warpforge.ops.softmax_problems  # noqa: F401  (registers)
from warpforge.harness import BaselineUnavailable, checks, get_problem
from warpforge.ops._row_problems import ulp

NAMES = [
    "rms_norm.fwd",
    "rms_norm.bwd",
    "add_rms_norm.fwd",
    "add_rms_norm.bwd",
    "layer_norm.fwd",
    "layer_norm.bwd",
    "softmax.fwd",
    "softmax.bwd",
    "log_softmax.fwd",
    "log_softmax.bwd",
]


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check_against_float64(problem, candidate, shape, device):
    gen = torch.Generator(device=device).manual_seed(1234)
    inputs = problem.make_inputs(shape, torch.float32, torch.device(device), gen)
    expected = _flat(problem.reference(*(t.double() for t in inputs)))
    got = _flat(candidate(*inputs))
    assert len(got) == len(expected)
    atol, rtol = problem.tolerance.for_dtype(torch.float32)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), e, atol=atol, rtol=rtol)


@pytest.mark.parametrize("name", NAMES)
def test_implementation_matches_reference_on_cpu_shapes(name, device):
    problem = get_problem(name)
    for shape in problem.cpu_shapes:
        _check_against_float64(problem, problem.implementation, shape, device)


@pytest.mark.parametrize("name", NAMES)
def test_eager_baseline_matches_reference(name, device):
    problem = get_problem(name)
    _check_against_float64(problem, problem.baselines["torch"](), problem.cpu_shapes[0], device)


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("log_softmax.")])
def test_liger_baseline_unavailable_is_explicit(name):
    if importlib.util.find_spec("liger_kernel") is not None:
        pytest.skip("Liger-Kernel is installed here; the GPU run exercises it")
    with pytest.raises(BaselineUnavailable, match="Liger-Kernel"):
        get_problem(name).baselines["liger"]()


def test_byte_counts_are_the_minimum():
    shape, bf16 = {"M": 16384, "N": 4096}, torch.bfloat16
    mn = 16384 * 4096 * 2
    assert get_problem("rms_norm.fwd").bytes_moved(shape, bf16) == 2 * mn + 4096 * 2
    assert get_problem("add_rms_norm.fwd").bytes_moved(shape, bf16) == 4 * mn + 4096 * 2
    assert get_problem("softmax.fwd").bytes_moved(shape, bf16) == 2 * mn
    assert get_problem("softmax.bwd").bytes_moved(shape, bf16) == 5 * mn
    assert get_problem("log_softmax.bwd").bytes_moved(shape, bf16) == 5 * mn
    add_bwd = get_problem("add_rms_norm.bwd").bytes_moved(shape, bf16)
    assert 8 * mn < add_bwd < 8.01 * mn
    rms_bwd = get_problem("rms_norm.bwd").bytes_moved(shape, bf16)
    assert 5 * mn < rms_bwd < 5.01 * mn


def test_shapes_cover_the_brief():
    for name in ("softmax.fwd", "softmax.bwd", "log_softmax.fwd", "log_softmax.bwd"):
        softmax_shapes = [(s["M"], s["N"]) for s in get_problem(name).shapes]
        assert (8192, 262144) in softmax_shapes and (32768, 256) in softmax_shapes, name
    for name in NAMES:
        problem = get_problem(name)
        assert problem.dtypes == (torch.float32, torch.bfloat16)
        assert {"torch", "torch.compile"} <= set(problem.baselines)


@pytest.mark.parametrize(
    "name",
    [
        "softmax.fwd",
        "log_softmax.fwd",
        "softmax.bwd",
        "log_softmax.bwd",
        "rms_norm.fwd",
        "add_rms_norm.fwd",
        "layer_norm.fwd",
        "rms_norm.bwd",
        "add_rms_norm.bwd",
        "layer_norm.bwd",
    ],
)
def test_giant_row_problems_verify_in_row_blocks(name, device, monkeypatch):
    # 8192 x 262144 needs its float64 reference a block of rows at a time on an 80 GB GPU: the
    # same path, forced here by a tiny memory budget
    from warpforge.harness import bench

    problem = get_problem(name)
    assert problem.row_split is not None
    shape = problem.cpu_shapes[0]
    gen = torch.Generator(device=device).manual_seed(0)
    inputs = problem.make_inputs(shape, torch.float32, torch.device(device), gen)
    monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * len(inputs) * shape["N"])
    monkeypatch.setattr(bench, "REFERENCE_MEMORY_SHARE", 10**12)  # on a GPU: 1-byte budget
    blocks = bench._reference_blocks(problem, inputs, torch.device(device))
    assert blocks is not None and len(blocks) == shape["M"]
    result = bench.verify_problem(problem, shape, torch.float32, torch.device(device))
    assert result.passed, [str(f) for f in result.findings]


def test_ulp_at_each_dtype():
    values = torch.tensor([1.0, -3.0, 0.0, 2.0**-130], dtype=torch.float64)
    assert ulp(values, torch.bfloat16).tolist()[:3] == [2.0**-7, 2.0**-6, 0.0]
    assert ulp(values, torch.float16).tolist()[:3] == [2.0**-10, 2.0**-9, 0.0]
    assert ulp(values, torch.float32).tolist()[:3] == [2.0**-23, 2.0**-22, 0.0]
    # below the smallest normal the unit stops shrinking
    tiny = torch.finfo(torch.bfloat16)
    assert ulp(values, torch.bfloat16)[3] == tiny.smallest_normal * tiny.eps


@pytest.mark.parametrize("name", ["softmax.bwd", "log_softmax.bwd"])
def test_saved_rounding_covers_a_forward_one_ulp_off_and_no_more(name):
    """A backward from a forward output that rounded one value to its neighbour (two correct
    forwards may) passes; the same with a wrong row sum fails."""
    problem = get_problem(name)
    log = name.startswith("log_")
    gen = torch.Generator().manual_seed(7)
    x, dy = problem.make_inputs({"M": 4, "N": 8192}, torch.bfloat16, torch.device("cpu"), gen)
    x64, dy64 = x.double(), dy.double()
    (ref,) = problem.reference(x64, dy64)
    (extra,) = problem.saved_rounding([x64, dy64], torch.bfloat16)
    fwd = torch.log_softmax if log else torch.softmax
    y = fwd(x.float(), dim=-1).to(torch.bfloat16)
    at = int(extra.argmax())
    flat = y.view(-1)
    flat[at] = (
        torch.nextafter(flat[at], flat[at] + (1 if flat[at] < 0 else -1))
        if log
        else (torch.nextafter(flat[at], torch.tensor(1.0, dtype=torch.bfloat16)))
    )

    def backward(y, scale=1.0):
        y, g = y.float(), dy.float()
        if log:
            return (g - y.exp() * g.sum(-1, keepdim=True) * scale).to(torch.bfloat16)
        return (y * (g - (g * y).sum(-1, keepdim=True) * scale)).to(torch.bfloat16)

    tol = problem.tolerance
    assert checks.check_values((backward(y),), (ref,), None, tol, trial=0,
                               extra_bounds=(extra,)) == []  # fmt: skip
    found = checks.check_values((backward(y, scale=1.5),), (ref,), None, tol, trial=0,
                                extra_bounds=(extra,))  # fmt: skip
    assert [f.reason.value for f in found] == ["tolerance"]


@pytest.mark.parametrize("name", ["softmax.fwd", "softmax.bwd"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_softmax_checks_reject_an_all_zero_output_of_long_rows(name, dtype):
    """Softmax values are ~1/N: an absolute floor at the dtype's usual size would pass zeros."""
    problem = get_problem(name)
    gen = torch.Generator().manual_seed(11)
    inputs = problem.make_inputs({"M": 4, "N": 8192}, dtype, torch.device("cpu"), gen)
    ref = _flat(problem.reference(*(t.double() for t in inputs)))
    native = _flat(problem.reference(*inputs))
    extra = None
    if problem.saved_rounding is not None:
        extra = problem.saved_rounding([t.double() for t in inputs], dtype)
    args = dict(trial=0, extra_bounds=extra)
    assert checks.check_values(native, ref, native, problem.tolerance, **args) == []
    zeros = [torch.zeros_like(t) for t in native]
    found = checks.check_values(zeros, ref, native, problem.tolerance, **args)
    assert [f.reason.value for f in found] == ["tolerance"]


@pytest.mark.parametrize("name", ["rms_norm.bwd", "add_rms_norm.bwd", "layer_norm.bwd"])
def test_giant_norm_backward_catches_a_wrong_weight_gradient(name, monkeypatch):
    # verified in one-row blocks, a weight gradient missing the last row's share still fails:
    # the blocks' float64 shares are added up and compared with the whole dweight
    import dataclasses

    from warpforge.harness import bench

    problem = get_problem(name)
    last = problem.row_sums[-1]

    def wrong(*inputs):
        grads = list(problem.reference(*(t.double() for t in inputs)))
        drop = [t[-1:] if t.dim() == 2 else t for t in inputs]
        grads[last] = grads[last] - problem.reference(*(t.double() for t in drop))[last]
        return tuple(g.float() for g in grads)

    shape = problem.cpu_shapes[0]
    monkeypatch.setattr(bench, "CPU_REFERENCE_BYTES", 3 * 8 * 5 * shape["N"])
    result = bench.verify_problem(dataclasses.replace(problem, implementation=wrong), shape,
                                  torch.float32, torch.device("cpu"))  # fmt: skip
    assert "tolerance" in result.reasons(), [str(f) for f in result.findings]
    assert "row blocks" in str(result.findings[0])
