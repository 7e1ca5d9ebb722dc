"""The verification checks: each failure has its own reason code and a message saying what was seen.

The functions here compare what a candidate produced (outputs, inputs after the call, repeated
outputs) with the float64 reference and PyTorch's own result at the candidate's dtype. They run in
the harness process on data the candidate's worker sent back by value, except the two the worker
runs on outputs as returned (:func:`output_layout`, and :func:`matches_verified` on timed calls);
see ``isolation.py`` for the worker and ``verify.py`` for the order in which checks run.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from warpforge.harness.problem import Tolerance


class Reason(str, enum.Enum):
    """Why a candidate was rejected. The value is the code printed and written to reports."""

    CRASH = "crash"
    """(1) The candidate raised, or its process died, while the harness ran it."""
    TIMEOUT = "timeout"
    """(1) The candidate's process did not answer within the time limit."""
    REPLAY = "replay"
    """(2) The same output for different inputs while the reference changed: cached or replayed."""
    TOLERANCE = "tolerance"
    """(3) Error above max(atol + rtol*|ref|, 2x PyTorch's own error at the candidate's dtype)."""
    OUTPUT_TYPE = "output-type"
    """(4) The output is not exactly ``torch.Tensor`` (a subclass, lazy value or other object)."""
    WRONG_DTYPE = "wrong-dtype"
    WRONG_SHAPE = "wrong-shape"
    WRONG_DEVICE = "wrong-device"
    WRONG_STRUCTURE = "wrong-structure"
    """(4) A different number of outputs than the reference returns."""
    ALIASING = "aliasing"
    """(4) An output shares memory with an input."""
    WRONG_LAYOUT = "wrong-layout"
    """(4) A candidate's output is not contiguous where the reference's is (``.view`` on it
    fails, and torch.compile's stride checks of custom ops refuse it)."""
    NONFINITE = "nonfinite"
    """(4) NaN or Inf where the reference has a finite value (or a different one)."""
    INPUT_MUTATION = "input-mutation"
    """(5) An input is not bitwise identical after the call."""
    UNINITIALISED_MEMORY = "uninitialised-memory"
    """(6) The output changes with the poison the harness pre-fills memory with."""
    NONDETERMINISTIC = "nondeterministic"
    """(7) Repeated calls on the same inputs disagree (beyond the problem's repeat tolerance)."""
    DEGENERATE = "degenerate"
    """(8) The reference output does not change with the inputs, so a constant would pass."""
    TORCH_COMPUTE = "torch-compute"
    """(9, at run time) The candidate dispatched PyTorch compute operators the policy forbids."""
    VENDOR_KERNEL = "vendor-kernel"
    """(10) The profiler saw cuBLAS/cuDNN/ATen compute kernels the policy forbids (GPU)."""
    TIMED_OUTPUT = "timed-output"
    """(11) An output produced during the timed loop differs from the verified output."""
    TIMER_TAMPERING = "timer-tampering"
    """Timing functions changed after the candidate loaded, or event time exceeds wall time."""
    CONCURRENCY = "concurrency"
    """(9, at run time) The candidate left threads running after its call returned."""
    IMPOSSIBLE_SPEED = "impossible-speed"
    """Faster than the floor (bytes / copy bandwidth, FLOPs / matmul peak) by more than 5%."""
    AUDIT_TORCH_OP = "audit-torch-op"
    AUDIT_VENDOR = "audit-vendor-library"
    AUDIT_FALLBACK = "audit-fallback"
    AUDIT_STREAM = "audit-stream"
    AUDIT_CONCURRENCY = "audit-concurrency"
    AUDIT_PATCHING = "audit-patching"
    AUDIT_HARNESS_ACCESS = "audit-harness-access"
    AUDIT_DYNAMIC_CODE = "audit-dynamic-code"
    AUDIT_INTROSPECTION = "audit-introspection"


@dataclass(frozen=True)
class Finding:
    """One failed check: its reason code and what was seen."""

    reason: Reason
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason.value, "message": self.message}

    def __str__(self) -> str:
        return f"[{self.reason.value}] {self.message}"


Outputs = tuple[torch.Tensor, ...]


def as_outputs(value: Any) -> tuple[Any, ...]:
    """A model's return value as a tuple (a single tensor becomes a 1-tuple)."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (NaN == NaN when their bits match), same dtype and shape."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    a_bytes = a.detach().contiguous().reshape(-1).view(torch.uint8)
    b_bytes = b.detach().contiguous().reshape(-1).view(torch.uint8)
    # in slices: torch.equal on the GPU holds a whole-size bool result (8 GB for an 8 GB output)
    return all(torch.equal(x, y) for x, y in _chunks(a_bytes, b_bytes, size=BYTE_CHUNK))


def max_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| of two equally shaped tensors in float64 (NaN where either holds NaN at a
    place the other does not, or both), computed in slices."""
    worst = 0.0
    for x, y in _chunks(a, b):
        diff = float((x.to(torch.float64) - y.to(torch.float64)).abs().max())
        if math.isnan(diff):
            return math.nan
        worst = max(worst, diff)
    return worst


def repeat_equal(got: Any, want: torch.Tensor, atol: float) -> bool:
    """``got`` is a plain tensor equal to ``want`` bitwise, or within ``atol`` (no NaN) if > 0."""
    if type(got) is not torch.Tensor or got.shape != want.shape or got.dtype != want.dtype:
        return False
    want = want.to(got.device)
    if bitwise_equal(got, want):
        return True
    if atol <= 0 or not got.is_floating_point():
        return False
    return max_difference(got, want) <= atol  # False for NaN


def matches_verified(output: Any, verified: Sequence[torch.Tensor | None], atol: float) -> bool:
    """(11) A model's return value is its verified output again: as many outputs, each a plain
    tensor equal to the verified one bitwise (or within ``atol``, see :func:`repeat_equal`) and
    contiguous where that one is (:func:`check_layout`). ``verified``: copies of the outputs
    that passed verification (a copy keeps a contiguous or transposed layout; None where the
    verified output was no tensor, which never matches)."""
    outputs = as_outputs(output)
    wants = [want for want in verified if want is not None]
    if len(outputs) != len(verified) or len(wants) != len(verified):
        return False
    if not all(repeat_equal(got, want, atol) for got, want in zip(outputs, wants, strict=True)):
        return False
    return not check_layout(*output_layout(outputs), wants)


def check_structure(
    outputs: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], device: str
) -> list[Finding]:
    """(4) Count, dtype, shape and device of each output against the reference's."""
    if len(outputs) != len(expected):
        return [
            Finding(
                Reason.WRONG_STRUCTURE,
                f"expected {len(expected)} output(s) like the reference, got {len(outputs)}",
            )
        ]
    findings: list[Finding] = []
    for i, (out, ref) in enumerate(zip(outputs, expected, strict=False)):
        if out.dtype != ref.dtype:
            findings.append(
                Finding(
                    Reason.WRONG_DTYPE, f"output {i}: expected dtype {ref.dtype}, got {out.dtype}"
                )
            )
        if tuple(out.shape) != tuple(ref.shape):
            findings.append(
                Finding(
                    Reason.WRONG_SHAPE,
                    f"output {i}: expected shape {tuple(ref.shape)}, got {tuple(out.shape)}",
                )
            )
    return findings


def check_outputs_fit(
    outputs: Sequence[torch.Tensor],
    expected: Sequence[torch.Tensor],
    device: str,
    layout: tuple[Sequence[bool | None], Sequence[Sequence[int] | None]] | None = None,
) -> list[Finding]:
    """(4) :func:`check_structure`, then, where the structure fits, :func:`check_layout` of
    ``layout`` (:func:`output_layout` of the outputs as returned; by default of ``outputs``)."""
    findings = check_structure(outputs, expected, device)
    if not findings:
        findings += check_layout(*(layout or output_layout(outputs)), expected)
    return findings


def output_layout(outputs: Sequence[Any]) -> tuple[list[bool | None], list[list[int] | None]]:
    """Whether each output is contiguous, and its strides (None for an output that is no
    tensor): what :func:`check_layout` reads. Taken from the outputs as returned (the worker
    sends it back beside copies of them, whose layout a copy may change)."""
    tensors = [o if isinstance(o, torch.Tensor) else None for o in outputs]
    return (
        [None if t is None else t.is_contiguous() for t in tensors],
        [None if t is None else list(t.stride()) for t in tensors],
    )


def check_layout(
    contiguous: Sequence[bool | None],
    strides: Sequence[Sequence[int] | None],
    expected: Sequence[torch.Tensor],
) -> list[Finding]:
    """(4) Each output contiguous where the reference's output is: a candidate that returns the
    right values in another memory layout (a transposed view, say) is no drop-in replacement.
    ``contiguous`` and ``strides`` describe the candidate's outputs as it returned them."""
    findings = []
    for i, (is_contiguous, stride, ref) in enumerate(
        zip(contiguous, strides, expected, strict=False)
    ):
        if is_contiguous is False and ref.is_contiguous():
            findings.append(
                Finding(
                    Reason.WRONG_LAYOUT,
                    f"output {i}: strides {tuple(stride or ())} for shape {tuple(ref.shape)}, "
                    f"where the reference returns a contiguous tensor (strides {ref.stride()}); "
                    "write the output in that layout",
                )
            )
    return findings


ERROR_CHUNK = 1 << 24
"""Elements compared at a time: float64 temporaries of a multi-GB output would not fit beside it."""
BYTE_CHUNK = 1 << 28
"""Bytes compared at a time by :func:`bitwise_equal`."""


def _chunks(*tensors: torch.Tensor, size: int = ERROR_CHUNK) -> Iterator[list[torch.Tensor]]:
    """Aligned flat slices of equally shaped tensors, ``size`` elements each."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), size):
        yield [f[start : start + size] for f in flat]


def error_ratio(
    value: torch.Tensor,
    ref64: torch.Tensor,
    atol: float,
    rtol: float,
    extra: torch.Tensor | None = None,
) -> float:
    """max |value - ref64| / (atol + rtol*|ref64| + extra) where the reference is finite."""
    worst = 0.0
    pieces = _chunks(value, ref64) if extra is None else _chunks(value, ref64, extra)
    for v, r, *e in pieces:
        finite = torch.isfinite(r)
        if not bool(finite.any()):
            continue
        bound = (atol + rtol * r.abs() + (e[0] if e else 0.0)).clamp(min=1e-300)
        diff = torch.nan_to_num((v.to(torch.float64) - r).abs(), nan=float("inf"))
        worst = max(worst, float((diff / bound)[finite].max()))
    return worst


def max_abs_error(value: torch.Tensor, ref64: torch.Tensor) -> float:
    """max |value - ref64| over positions where the reference is finite (NaN counts as inf)."""
    worst = 0.0
    for v, r in _chunks(value, ref64):
        finite = torch.isfinite(r)
        if not bool(finite.any()):
            continue
        diff = torch.nan_to_num((v.to(torch.float64) - r).abs()[finite], nan=float("inf"))
        worst = max(worst, float(diff.max()))
    return worst


def check_values(
    outputs: Sequence[torch.Tensor],
    ref64: Sequence[torch.Tensor],
    torch_at_dtype: Sequence[torch.Tensor] | None,
    tol: Tolerance,
    *,
    trial: int,
    torch_errors: Sequence[float] | None = None,
    extra_bounds: Sequence[torch.Tensor | None] | None = None,
    torch_ratios: Sequence[float] | None = None,
    only: Collection[int] | None = None,
) -> list[Finding]:
    """(3) and (4): error within the allowed bound; NaN/Inf exactly where the reference has them.

    The bound is elementwise max(atol + rtol*|ref| + extra, 2 * PyTorch's own max error at the
    output's dtype), so computing in a lower precision than asked fails. ``torch_errors`` gives
    PyTorch's error per output directly (measured over the whole output when it is checked in
    row blocks); ``extra_bounds`` the elementwise extra of :attr:`Problem.saved_rounding`;
    ``torch_ratios`` PyTorch's largest error-to-bound ratio per output, for a tolerance with
    :attr:`Tolerance.relative_floor` checked in row blocks (else measured here). ``only``: the
    indices of the outputs to check (all when None; the others' ``ref64`` entries are not read).
    """
    findings: list[Finding] = []
    for i, (out, ref) in enumerate(zip(outputs, ref64, strict=False)):
        if only is not None and i not in only:
            continue
        if out.shape != ref.shape:
            continue  # reported by check_structure
        if not out.is_floating_point() or not ref.is_floating_point():
            if not torch.equal(out.to(ref.dtype), ref):
                wrong = int((out.to(ref.dtype) != ref).sum())
                findings.append(
                    Finding(
                        Reason.TOLERANCE,
                        f"trial {trial}, output {i}: {wrong} of {ref.numel()} exact (integer) "
                        "values differ from the reference",
                    )
                )
            continue
        torch_out = torch_at_dtype[i] if torch_at_dtype is not None else None
        torch_error = 0.0
        if torch_errors is not None:
            torch_error = torch_errors[i]
        elif torch_out is not None and torch_out.is_floating_point():
            torch_error = max_abs_error(torch_out, ref)
        atol, rtol = tol.for_dtype(out.dtype)
        extra = extra_bounds[i] if extra_bounds is not None and i < len(extra_bounds) else None
        if extra is not None and extra.shape != ref.shape:
            raise ValueError(f"extra_bounds[{i}]: expected shape {tuple(ref.shape)}, "
                             f"got {tuple(extra.shape)}")  # fmt: skip
        ratio = 0.0
        if tol.relative_floor:
            if torch_ratios is not None:
                ratio = torch_ratios[i]
            elif torch_out is not None and torch_out.is_floating_point():
                ratio = error_ratio(torch_out, ref, atol, rtol, extra)
        misplaced_special = over = 0
        worst = 0.0
        pieces = _chunks(out, ref) if extra is None else _chunks(out, ref, extra)
        for o, r, *e in pieces:
            o64 = o.to(torch.float64)
            ref_nonfinite, out_nonfinite = ~torch.isfinite(r), ~torch.isfinite(o64)
            same_special = torch.where(
                ref_nonfinite & out_nonfinite,
                (torch.isnan(o64) & torch.isnan(r)) | (o64 == r),
                ref_nonfinite == out_nonfinite,
            )
            misplaced_special += int((~same_special).sum())
            bound = atol + rtol * r.abs() + (e[0] if e else 0.0)
            if tol.relative_floor:
                bound = torch.maximum(
                    bound, torch.clamp(2.0 * ratio * bound, max=2.0 * torch_error)
                )
            else:
                bound = torch.clamp(bound, min=2.0 * torch_error)
            finite = ~ref_nonfinite
            err = (o64 - r).abs()
            over += int(((err > bound) & finite).sum())
            if bool(finite.any()):
                worst = max(worst, float(err[finite].max()))
        if misplaced_special:
            findings.append(
                Finding(
                    Reason.NONFINITE,
                    f"trial {trial}, output {i}: {misplaced_special} position(s) hold NaN/Inf "
                    "where the reference does not (or the reverse)",
                )
            )
        elif over:
            findings.append(
                Finding(
                    Reason.TOLERANCE,
                    f"trial {trial}, output {i}: {over} of {ref.numel()} values off; "
                    f"max error {worst:.3e}, allowed max(atol {atol:g} + rtol {rtol:g}*|ref|"
                    f"{' + one-ulp rounding of the saved intermediate' if extra is not None else ''}, "
                    f"2 x PyTorch's own error {torch_error:.3e} at {out.dtype}"
                    f"{f', scaled to each element: ratio {ratio:.3g}' if tol.relative_floor else ''})",
                )
            )
    return findings


def check_against_reference(
    problem: Any, fn: Any, inputs: Sequence[Any]
) -> tuple[list[Finding], float]:
    """:func:`check_values` of ``fn(*inputs)``, in this process, against ``problem``'s float64
    reference and within its tolerance (PyTorch's own error at the inputs' dtype included), and
    the largest absolute error (:func:`max_abs_error`): for scripts that compare variants of one
    kernel before timing them. An exception of ``fn`` propagates."""
    from warpforge.harness.kernelbench import to_float64

    ref64 = as_outputs(problem.reference(*map(to_float64, inputs)))
    native = as_outputs(problem.reference(*inputs))
    outputs = as_outputs(fn(*inputs))
    found = check_values(outputs, ref64, native, problem.tolerance, trial=0)
    worst = max((max_abs_error(o, r) for o, r in zip(outputs, ref64, strict=False)), default=0.0)
    return found, worst


def require_reference_match(problem: Any, fn: Any, inputs: Sequence[Any]) -> float:
    """The largest absolute error of ``fn`` against ``problem``'s float64 reference; an
    AssertionError naming what :func:`check_against_reference` found when it is out of
    tolerance (for scripts that must not time a wrong variant)."""
    found, worst = check_against_reference(problem, fn, inputs)
    if found:
        raise AssertionError("; ".join(f.detail for f in found))
    return worst


def check_inputs_unchanged(
    before: Sequence[Any], after: Sequence[Any], *, trial: int
) -> list[Finding]:
    """(5) Every tensor input bitwise identical after the call."""
    findings = []
    for i, (b, a) in enumerate(zip(before, after, strict=False)):
        if isinstance(b, torch.Tensor) and (
            not isinstance(a, torch.Tensor) or not bitwise_equal(b, a)
        ):
            findings.append(
                Finding(
                    Reason.INPUT_MUTATION,
                    f"trial {trial}: input {i} was modified by the call",
                )
            )
    return findings


def check_repeat(
    first: Sequence[torch.Tensor],
    second: Sequence[torch.Tensor],
    tol: Tolerance,
    *,
    trial: int,
) -> list[Finding]:
    """(6) and (7): two calls on the same inputs, under different memory poisons, must agree.

    The first call ran with memory pre-filled with NaN bytes, the second with a finite pattern.
    If they differ and either holds NaN where the other does not, the candidate read memory it
    never wrote (uninitialised or stale); otherwise it is nondeterministic.
    """
    for i, (a, b) in enumerate(zip(first, second, strict=False)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return [
                Finding(
                    Reason.NONDETERMINISTIC,
                    f"trial {trial}, output {i}: shape or dtype changed between two calls",
                )
            ]
        if bitwise_equal(a, b):
            continue
        if a.is_floating_point():
            nan_places = sum(int((torch.isnan(x) ^ torch.isnan(y)).sum()) for x, y in _chunks(a, b))
            if nan_places:
                return [
                    Finding(
                        Reason.UNINITIALISED_MEMORY,
                        f"trial {trial}, output {i}: {nan_places} value(s) "
                        "follow the harness' memory poison: the candidate reads memory it "
                        "never wrote (uninitialised, stale or another object's)",
                    )
                ]
            diff = max(
                float((x.to(torch.float64) - y.to(torch.float64)).abs().nan_to_num(0).max())
                for x, y in _chunks(a, b)
            )
            if diff <= tol.repeat_atol:
                continue
            return [
                Finding(
                    Reason.NONDETERMINISTIC,
                    f"trial {trial}, output {i}: two calls on the same inputs differ by up to "
                    f"{diff:.3e} (allowed {tol.repeat_atol:g})",
                )
            ]
        return [
            Finding(
                Reason.NONDETERMINISTIC,
                f"trial {trial}, output {i}: two calls on the same inputs differ",
            )
        ]
    return []


def check_not_degenerate(references: Sequence[Sequence[torch.Tensor]]) -> list[Finding]:
    """(8) The reference output must change when the inputs change."""
    if len(references) < 2:
        return []
    first = references[0]
    for other in references[1:]:
        for a, b in zip(first, other, strict=False):
            if a.shape != b.shape or not torch.equal(a.nan_to_num(0), b.nan_to_num(0)):
                return []
    return [
        Finding(
            Reason.DEGENERATE,
            f"the reference gave identical outputs for {len(references)} different random "
            "inputs: a constant would pass, so the problem cannot tell a kernel from a cheat",
        )
    ]


def check_not_replayed(
    candidate_outputs: Sequence[Sequence[torch.Tensor]],
    references: Sequence[Sequence[torch.Tensor]],
) -> list[Finding]:
    """(2) Different inputs with different reference outputs must not give identical outputs."""

    def poisoned(outputs: Sequence[torch.Tensor]) -> bool:
        return any(o.is_floating_point() and bool(torch.isnan(o).any()) for o in outputs)

    for j in range(1, len(candidate_outputs)):
        if poisoned(candidate_outputs[j]):
            continue  # NaN output: reported as nonfinite / uninitialised memory instead
        for k in range(j):
            same_candidate = all(
                bitwise_equal(a, b)
                for a, b in zip(candidate_outputs[j], candidate_outputs[k], strict=False)
            )
            # compared at the candidate's dtype: a bf16 scalar loss is legitimately identical
            # for inputs whose float64 losses differ below bf16's resolution
            same_reference = all(
                a.shape == b.shape and torch.equal(a.to(c.dtype), b.to(c.dtype))
                for a, b, c in zip(references[j], references[k], candidate_outputs[j], strict=False)
            )
            if same_candidate and not same_reference:
                return [
                    Finding(
                        Reason.REPLAY,
                        f"trials {k} and {j} had different inputs and reference outputs but the "
                        "candidate returned bit-identical outputs: cached or replayed results",
                    )
                ]
    return []
