"""Unit tests of the check functions (no candidate process needed)."""

from __future__ import annotations

import pytest
import torch

from warpforge.harness import checks, isolation
from warpforge.harness.checks import Reason
from warpforge.harness.problem import Tolerance


def _reasons(findings: list[checks.Finding]) -> set[str]:
    return {f.reason.value for f in findings}


def test_bitwise_equal_treats_identical_nan_bits_as_equal() -> None:
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert checks.bitwise_equal(a, a.clone())
    assert not checks.bitwise_equal(a, torch.tensor([1.0, float("nan"), 0.0]))  # -0 vs +0
    assert not checks.bitwise_equal(a, a.double())


def test_comparisons_in_slices_see_every_slice(monkeypatch) -> None:
    """Equality, the repeat checks and max_difference work a slice at a time (a whole-size
    temporary of a multi-GB output does not fit beside it): a difference in any slice counts,
    the last, ragged one included."""
    monkeypatch.setattr(checks, "BYTE_CHUNK", 12)
    monkeypatch.setattr(checks, "ERROR_CHUNK", 5)
    a = torch.randn(7, 3)
    for place in (0, 11, 20):
        b = a.clone()
        b.view(-1)[place] += 0.5
        assert checks.bitwise_equal(a, a.clone())
        assert not checks.bitwise_equal(a, b)
        assert checks.max_difference(a, b) == pytest.approx(0.5, abs=1e-6)
        assert not checks.repeat_equal(b, a, atol=0.1)
        assert checks.repeat_equal(b, a, atol=0.6)
        assert _reasons(checks.check_repeat((a,), (b,), Tolerance(), trial=0)) == {
            "nondeterministic"
        }
        b.view(-1)[place] = float("nan")
        assert checks.max_difference(a, b) != checks.max_difference(a, b)  # NaN
        assert not checks.repeat_equal(b, a, atol=1.0)
        found = checks.check_repeat((a,), (b,), Tolerance(), trial=0)
        assert _reasons(found) == {"uninitialised-memory"}
        assert "1 value(s)" in found[0].message


def test_values_accept_pytorch_level_error_and_reject_lower_precision() -> None:
    x = torch.randn(64, 33)
    ref64 = x.double() * 3.0 + 1.0
    native = x * 3.0 + 1.0
    assert checks.check_values((native,), (ref64,), (native,), Tolerance(), trial=0) == []
    low = (x.half() * 3.0 + 1.0).float()
    found = checks.check_values((low,), (ref64,), (native,), Tolerance(), trial=0)
    assert _reasons(found) == {"tolerance"}


def test_values_allow_twice_pytorch_error_at_the_dtype() -> None:
    # with a zero atol/rtol the bound is exactly 2x PyTorch's own max error on these inputs
    ref64 = torch.randn(256, dtype=torch.float64)
    native = ref64 + 1e-3  # "PyTorch at the candidate's dtype", off by 1e-3
    tol = Tolerance(atol={torch.float64: 0.0}, rtol={torch.float64: 0.0})
    within = ref64 + 1.5e-3
    assert checks.check_values((within,), (ref64,), (native,), tol, trial=0) == []
    beyond = ref64 + 2.5e-3
    found = checks.check_values((beyond,), (ref64,), (native,), tol, trial=0)
    assert _reasons(found) == {"tolerance"}
    assert "2 x PyTorch's own error 1.000e-03" in found[0].message


def test_values_add_the_extra_bound_elementwise() -> None:
    ref64 = torch.randn(300, dtype=torch.float64)
    tol = Tolerance(atol={torch.float64: 1e-6}, rtol={torch.float64: 0.0})
    extra = torch.zeros_like(ref64)
    extra[7] = 0.5
    off_there = ref64.clone()
    off_there[7] += 0.4  # covered by its own extra bound
    assert checks.check_values((off_there,), (ref64,), None, tol, trial=0) != []
    assert checks.check_values((off_there,), (ref64,), None, tol, trial=0,
                               extra_bounds=(extra,)) == []  # fmt: skip
    off_elsewhere = ref64.clone()
    off_elsewhere[8] += 0.4  # the extra bound is per element, not a global slack
    found = checks.check_values((off_elsewhere,), (ref64,), None, tol, trial=0,
                                extra_bounds=(extra,))  # fmt: skip
    assert _reasons(found) == {"tolerance"}
    assert "one-ulp rounding of the saved intermediate" in found[0].message
    with pytest.raises(ValueError, match="extra_bounds"):
        checks.check_values((ref64,), (ref64,), None, tol, trial=0, extra_bounds=(extra[:5],))


def test_relative_floor_scales_pytorch_error_to_each_element() -> None:
    # one large value and many small ones: PyTorch's error at the large one would, as a
    # plain floor, cover a candidate that zeroes every small one
    ref64 = torch.full((1000,), 1e-4, dtype=torch.float64)
    ref64[0] = 1.0
    native = ref64 * (1 + 2.0**-9)  # PyTorch: a half-ulp (bf16) relative error everywhere
    small_zeroed = ref64.clone()
    small_zeroed[1:] = 0.0
    plain = Tolerance(atol={torch.float64: 1e-9}, rtol={torch.float64: 1e-3})
    relative = Tolerance(
        atol={torch.float64: 1e-9}, rtol={torch.float64: 1e-3}, relative_floor=True
    )
    assert checks.check_values((small_zeroed,), (ref64,), (native,), plain, trial=0) == []
    found = checks.check_values((small_zeroed,), (ref64,), (native,), relative, trial=0)
    assert _reasons(found) == {"tolerance"} and "ratio" in found[0].message
    # PyTorch's own error (2x of it, in proportion) still passes
    within = ref64 * (1 + 2.0**-8)
    assert checks.check_values((within,), (ref64,), (native,), relative, trial=0) == []
    assert checks.error_ratio(native, ref64, 1e-9, 1e-3) == pytest.approx(2.0**-9 / 1e-3, rel=1e-3)


def test_nonfinite_only_where_the_reference_has_them() -> None:
    ref = torch.tensor([1.0, float("inf"), float("nan")], dtype=torch.float64)
    good = torch.tensor([1.0, float("inf"), float("nan")])
    assert checks.check_values((good,), (ref,), None, Tolerance(), trial=0) == []
    bad = torch.tensor([float("nan"), float("inf"), float("nan")])
    assert _reasons(checks.check_values((bad,), (ref,), None, Tolerance(), trial=0)) == {
        "nonfinite"
    }
    wrong_sign = torch.tensor([1.0, float("-inf"), float("nan")])
    found = checks.check_values((wrong_sign,), (ref,), None, Tolerance(), trial=0)
    assert _reasons(found) == {"nonfinite"}


def test_structure_reports_dtype_shape_and_count() -> None:
    ref = torch.zeros(3, 4)
    assert _reasons(checks.check_structure((ref.double(),), (ref,), "cpu")) == {"wrong-dtype"}
    assert _reasons(checks.check_structure((ref.reshape(-1),), (ref,), "cpu")) == {"wrong-shape"}
    assert _reasons(checks.check_structure((ref, ref), (ref,), "cpu")) == {"wrong-structure"}


def test_layout_and_timed_outputs_hold_the_verified_layout() -> None:
    ref = torch.randn(4, 6)
    transposed = ref.t().contiguous().t()
    assert checks.output_layout([transposed, 1.0]) == ([False, None], [[1, 4], None])
    found = checks.check_layout(*checks.output_layout([transposed]), [ref])
    assert _reasons(found) == {"wrong-layout"} and "strides (1, 4)" in found[0].message
    assert checks.matches_verified(ref.clone(), [ref], atol=0.0)
    assert not checks.matches_verified(transposed, [ref], atol=0.0)  # equal values, other layout
    assert checks.matches_verified(transposed, [transposed.clone()], atol=0.0)  # as verified
    assert not checks.matches_verified((ref, ref), [ref], atol=0.0)
    assert not checks.matches_verified(ref, [None], atol=0.0)


def test_repeat_distinguishes_poison_reads_from_nondeterminism() -> None:
    a = torch.randn(10)
    poisoned = a.clone()
    poisoned[5:] = float("nan")
    other = a.clone()
    other[5:] = 12.0
    assert _reasons(checks.check_repeat((poisoned,), (other,), Tolerance(), trial=0)) == {
        "uninitialised-memory"
    }
    jitter = a + 1e-6
    assert _reasons(checks.check_repeat((a,), (jitter,), Tolerance(), trial=0)) == {
        "nondeterministic"
    }
    assert checks.check_repeat((a,), (jitter,), Tolerance(repeat_atol=1e-5), trial=0) == []
    assert checks.check_repeat((a,), (a.clone(),), Tolerance(), trial=0) == []


def test_degenerate_and_replay() -> None:
    zeros = (torch.zeros(4),)
    assert _reasons(checks.check_not_degenerate([zeros, (torch.zeros(4),)])) == {"degenerate"}
    varied = [(torch.randn(4),), (torch.randn(4),)]
    assert checks.check_not_degenerate(varied) == []
    same = torch.randn(4)
    assert _reasons(checks.check_not_replayed([(same,), (same.clone(),)], varied)) == {"replay"}
    assert checks.check_not_replayed(varied, varied) == []
    # float64 references that differ below bf16 resolution: identical bf16 outputs are honest
    close = [
        (torch.tensor(10.0, dtype=torch.float64),),
        (torch.tensor(10.001, dtype=torch.float64),),
    ]
    bf16 = [
        (torch.tensor(10.0, dtype=torch.bfloat16),),
        (torch.tensor(10.0, dtype=torch.bfloat16),),
    ]
    assert checks.check_not_replayed(bf16, close) == []


def test_inputs_unchanged() -> None:
    x = torch.randn(5)
    assert checks.check_inputs_unchanged([x], [x.clone()], trial=0) == []
    changed = x.clone()
    changed[0] += 1
    assert _reasons(checks.check_inputs_unchanged([x], [changed], trial=1)) == {"input-mutation"}


def test_every_reason_has_a_distinct_code() -> None:
    values = [r.value for r in Reason]
    assert len(values) == len(set(values))


def test_messages_travel_by_value_and_code_is_refused() -> None:
    x = torch.randn(3)
    data = isolation.encode({"t": x, "n": [1, 2.5, None, "s"]})
    back = isolation.decode(data)
    assert torch.equal(back["t"], x) and back["t"].data_ptr() != x.data_ptr()

    class Evil:
        def __reduce__(self):  # would run code on unpickling
            return (print, ("pwned",))

    with pytest.raises(Exception):
        isolation.decode(isolation.encode({"x": Evil()}))


def test_poisoned_memory_fills_new_allocations_and_restores() -> None:
    original = torch.empty
    with isolation.poisoned_memory(isolation.POISON_NAN, torch.device("cpu")):
        assert torch.isnan(torch.empty(16)).all()
        assert torch.isnan(torch.empty_like(torch.zeros(3, dtype=torch.float16))).all()
    assert torch.empty is original


def test_aliasing_detects_views_of_inputs() -> None:
    x = torch.randn(8, 4)
    assert isolation.overlaps_inputs(x[2:4], [x])
    assert not isolation.overlaps_inputs(x.clone(), [x])


def test_timers_untouched_sees_patched_event_methods(monkeypatch) -> None:
    from warpforge.harness import timing

    assert timing.timers_untouched()
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, other: 0.0)
    assert not timing.timers_untouched()


class _Work:
    """A callable object whose ``__call__`` lives in this file."""

    def __init__(self, release) -> None:
        self.release = release

    def __call__(self) -> None:
        self.release.wait(10)

    def method(self) -> None:
        self.release.wait(10)


def _wait(release, _unused=None) -> None:
    release.wait(10)


def test_threads_left_running_are_traced_to_the_candidate_through_wrappers() -> None:
    """A thread counts as the candidate's when its target is reached through a partial, a bound
    method, a callable object or a Timer, or when a pool's worker is running the candidate's
    task; a thread running only library code does not count."""
    import concurrent.futures
    import functools
    import os
    import threading

    worker = object.__new__(isolation._Worker)
    worker.candidate_file = os.path.realpath(__file__)
    release = threading.Event()
    work = _Work(release)
    threads = [
        threading.Thread(target=functools.partial(_wait, release), daemon=True),
        threading.Thread(target=functools.partial(functools.partial(_wait), release), daemon=True),
        threading.Thread(target=work.method, daemon=True),
        threading.Thread(target=work, daemon=True),
        threading.Timer(0.0, _wait, (release,)),
    ]
    library = threading.Thread(target=release.wait, args=(10,), daemon=True)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    running = None
    try:
        for t in [*threads, library]:
            t.start()
        running = pool.submit(_wait, release)
        pool_threads = list(pool._threads)
        for t in threads:
            assert worker._started_here(t), t
        assert not worker._started_here(library)
        # the pool's worker targets concurrent.futures; its stack holds this file's _wait
        for _ in range(100):
            if any(worker._started_here(t) for t in pool_threads):
                break
            threading.Event().wait(0.01)
        assert any(worker._started_here(t) for t in pool_threads)
    finally:
        release.set()
        if running is not None:
            running.result(timeout=10)
        pool.shutdown()
    for t in [*threads, library]:
        t.join(10)
        assert not worker._started_here(t)  # finished threads never count


def test_check_against_reference_finds_a_wrong_variant_and_reports_the_worst_error() -> None:
    """In-process check of one function against a problem's float64 reference (the scripts
    that compare kernel variants use it): a right one passes with its error, a wrong one fails."""
    from types import SimpleNamespace

    problem = SimpleNamespace(reference=torch.exp, tolerance=Tolerance())
    x = torch.randn(64, dtype=torch.float32)
    found, worst = checks.check_against_reference(problem, torch.exp, (x,))
    assert found == [] and 0 <= worst < 1e-5
    found, worst = checks.check_against_reference(problem, lambda t: torch.exp(t) * 1.01, (x,))
    assert found and worst > 1e-3
