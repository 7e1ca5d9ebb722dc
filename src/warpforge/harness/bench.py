"""Benchmarks: a KernelBench pair against its reference and baselines, and the built-in suite.

* :func:`bench_pair` verifies a candidate file (``verify.py``), then times it in its worker,
  interleaved with the reference model and any baseline files, every timed output checked.
* :func:`run_builtin_suite` runs every registered :class:`Problem` (warpforge's own kernels):
  verification on every shape and dtype (on CPU: ``cpu_shapes`` under Triton's interpreter),
  then on the GPU timing against each problem's baselines, interleaved in one run.

Both produce report rows (``report.result_entry``); a time faster than the device's floor is
rejected as impossible.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from warpforge.harness import ceilings as ceilings_mod
from warpforge.harness import checks, isolation, kernelbench, report, timing
from warpforge.harness.checks import Finding, Reason
from warpforge.harness.problem import BaselineUnavailable, Problem, Shape
from warpforge.harness.verify import (
    GPU_ONLY_CHECKS,
    MIN_TRIALS,
    PairSession,
    VerificationResult,
    VerifyOptions,
)
from warpforge.validation import check_positive

Progress = Callable[[str], None]


def _impossible_findings(
    times: dict[str, Any],
    ceilings: ceilings_mod.Ceilings | None,
    *,
    bytes_moved: float | None,
    flops: float | None,
    dtype: torch.dtype,
) -> list[dict[str, str]]:
    cand = times.get(report.CANDIDATE)
    if cand is None or cand.get("clock") != "cuda-events":
        return []  # CPU wall times are not judged against GPU floors
    why = ceilings_mod.impossible(
        cand["median_s"], ceilings, bytes_moved=bytes_moved, flops=flops, dtype=dtype
    )
    return [Finding(Reason.IMPOSSIBLE_SPEED, why).as_dict()] if why else []


def bench_pair(
    reference_path: str | Path,
    candidate_path: str | Path,
    *,
    baseline_paths: Sequence[str | Path] = (),
    options: VerifyOptions | None = None,
    ceilings: ceilings_mod.Ceilings | None = None,
    max_time_s: float = 2.0,
    cold: bool = True,
    cuda_graph: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """Verify then time one KernelBench pair; a report row (LoadError if a file cannot load)."""
    check_positive("max_time_s", max_time_s)
    with PairSession(
        reference_path, candidate_path, options=options, baseline_paths=baseline_paths
    ) as session:
        result = session.verify()
        times: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        if result.passed:
            reply = session.time(cold=cold, max_time_s=max_time_s, cuda_graph=cuda_graph)
            times = reply.get("measurements", {})
            skipped = reply.get("skipped", {})
        inputs, outputs = session.sample_inputs, session.sample_outputs
        flops = session.reference.flops(inputs) if inputs else None
        bytes_moved = session.reference.bytes_moved(inputs, outputs) if inputs else None
    dtype = kernelbench.compute_dtype(inputs)
    findings = _impossible_findings(
        times, ceilings, bytes_moved=bytes_moved, flops=flops, dtype=dtype
    )
    return report.result_entry(
        problem=name or Path(candidate_path).stem,
        shape=None,
        dtype=dtype,
        verification=result.as_dict(),
        times=times,
        flops=flops,
        bytes_moved=bytes_moved,
        ceilings=ceilings,
        skipped_baselines=skipped,
        findings=findings,
    )


# ---------------------------------------------------------------------------------------------
# Built-in problems (warpforge's own kernels: trusted code, verified in this process)


def verify_problem(
    problem: Problem,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device,
    *,
    trials: int = MIN_TRIALS,
) -> VerificationResult:
    """Every check that applies to a trusted in-process implementation, on fresh random inputs."""
    if trials < MIN_TRIALS:
        raise ValueError(f"trials: expected >= {MIN_TRIALS}, got {trials}")
    result = VerificationResult(
        reference=f"{problem.name}.reference", candidate=f"{problem.name}.implementation",
        device=str(device),
    )  # fmt: skip
    if device.type != "cuda":
        result.skipped_checks = list(GPU_ONLY_CHECKS)
    references: list[tuple[torch.Tensor, ...]] = []
    candidates: list[tuple[torch.Tensor, ...]] = []
    tol = problem.tolerance
    for trial in range(trials):
        # drop the last trial's tensors before allocating this one's: at 8192 x 262144 fp32 a
        # trial holds ~40 GB (inputs, their copy, outputs, PyTorch's own and the repeat)
        inputs = before = native = outputs = again = ref64 = None  # type: ignore[assignment]
        generator = torch.Generator(device=device)
        generator.manual_seed(secrets.randbits(62))
        inputs = tuple(problem.make_inputs(shape, dtype, device, generator))
        before = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        blocks = _reference_blocks(problem, before, device)
        ref64: tuple[Any, ...] | None = None
        try:
            if blocks is None:  # else computed block by block after the candidate ran
                ref64 = tuple(map(_detached, _float64_reference(problem, before)))
                native = tuple(map(_detached, checks.as_outputs(problem.reference(*before))))
            else:
                native = _native_by_rows(problem, before, blocks)
        except Exception as exc:
            result.add([Finding(Reason.CRASH, f"the reference raised {type(exc).__name__}: {exc}")])
            return result
        if ref64 is not None:
            references.append(tuple(_trial_sample(r) for r in ref64))
        outputs = _run_poisoned(problem, inputs, isolation.POISON_NAN, result)
        result.trials = trial + 1
        if outputs is None:
            return result
        found = _inspect_outputs(outputs, inputs, before, native, device, trial)
        result.add(found)
        if ref64 is None:
            assert blocks is not None
            references.append(
                _verify_in_row_blocks(problem, before, outputs, native, blocks, trial, result,
                                      compare=not found)
            )  # fmt: skip
        if found:
            continue
        candidates.append(tuple(_trial_sample(o) for o in outputs))
        if ref64 is not None:
            extra = _saved_rounding_bounds(problem, before)
            result.add(checks.check_values(outputs, ref64, native, tol, trial=trial,
                                           extra_bounds=extra))  # fmt: skip
            for out, ref, nat in zip(outputs, ref64, native, strict=False):
                if out.is_floating_point() and ref.is_floating_point():
                    result.max_error = max(result.max_error, checks.max_abs_error(out, ref))
                    result.torch_error = max(result.torch_error, checks.max_abs_error(nat, ref))
        if trial < 2:
            # the repeat needs only the snapshot and the first outputs: free the rest first
            # (8192 x 262144 fp32 with a residual did not fit 80 GB holding them all)
            inputs = native = ref64 = None  # type: ignore[assignment]
            again = _run_poisoned(problem, before, isolation.POISON_FINITE, result)
            if again is None:
                return result
            # the first call's outputs passed the layout check and stand in for the reference's
            result.add(checks.check_layout(*checks.output_layout(again), outputs))
            result.add(checks.check_repeat(outputs, again, tol, trial=trial))
    result.add(checks.check_not_degenerate(references))
    if len(candidates) == len(references):
        result.add(checks.check_not_replayed(candidates, references))
    return result


def _float64_reference(problem: Problem, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """The ground truth: the reference on float64 copies (or as given, for exact outputs)."""
    if problem.float64_reference:
        return checks.as_outputs(problem.reference(*map(kernelbench.to_float64, inputs)))
    return checks.as_outputs(problem.reference(*inputs))


def _saved_rounding_bounds(
    problem: Problem, inputs: Sequence[Any]
) -> tuple[torch.Tensor | None, ...] | None:
    """:attr:`Problem.saved_rounding` at the inputs' working dtype (None: the problem has none)."""
    if problem.saved_rounding is None:
        return None
    dtype = kernelbench.compute_dtype(tuple(inputs))
    return tuple(problem.saved_rounding(list(map(kernelbench.to_float64, inputs)), dtype))


REFERENCE_MEMORY_SHARE = 4
"""The float64 reference may use at most 1/this of the free memory in one piece."""
CPU_REFERENCE_BYTES = 4 << 30


def _reference_blocks(
    problem: Problem, inputs: Sequence[Any], device: torch.device
) -> list[slice] | None:
    """Row blocks for a float64 reference too large to compute in one piece (None: it fits).

    The estimate is three float64 copies of the inputs (inputs, outputs, one temporary), within
    a share of the memory left once PyTorch's and the candidate's outputs are allocated."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if problem.row_split is None or not tensors or tensors[0].dim() == 0:
        return None
    rows = tensors[0].shape[0]
    need = 3 * 8 * sum(x.numel() for x in tensors)
    if device.type == "cuda":
        # PyTorch's result and the candidate's outputs, allocated after this, are about the
        # inputs' size each: leave room for them
        later = 2 * sum(x.numel() * x.element_size() for x in tensors)
        budget = max(0, _free_device_bytes(device) - later) // REFERENCE_MEMORY_SHARE
    else:
        budget = CPU_REFERENCE_BYTES
    if need <= budget or rows <= 1:
        return None
    per_block = max(1, rows * budget // need)
    return [slice(start, min(start + per_block, rows)) for start in range(0, rows, per_block)]


def _verify_in_row_blocks(
    problem: Problem,
    before: Sequence[Any],
    outputs: Sequence[torch.Tensor],
    native: Sequence[Any],
    blocks: list[slice],
    trial: int,
    result: VerificationResult,
    *,
    compare: bool,
) -> tuple[torch.Tensor, ...]:
    """Check ``outputs`` against a float64 reference computed one block of rows at a time.

    Pass 1 measures PyTorch's own error over the whole output (the tolerance bound must not
    depend on the blocking) and adds up the blocks' shares of the ``row_sums`` outputs, which
    are then checked once, whole; pass 2 recomputes each block and checks the candidate's rows.
    Returns the reference's trial sample (the same positions as :func:`_trial_sample`).

    PyTorch's error on a ``row_sums`` output is that of its whole sum (``native``: its shares
    added up in float64, rounded once), not the largest on one block's share: the error of a
    sum over rows grows with the rows (each row's rounding of its inputs, such as h = x +
    residual in bfloat16, adds to it), so one block's share would understate it by about the
    square root of the number of blocks and reject PyTorch's own whole result (it rejected the
    chunked RMSNorm kernel's correct add+RMSNorm dweight at 8192 x 262144 bf16). The price: the
    shares' own roundings (half a unit in the last place of each, at most) count as PyTorch's
    error too; there they took it to 1.6-2.1 where one rounding of |dweight| ~ 256-512 is 1.0,
    a bound looser than unblocked only where the rtol part does not dominate it anyway."""
    assert problem.row_split is not None
    sums = set(problem.row_sums)
    torch_errors = [0.0] * len(native)
    torch_ratios = [0.0] * len(native)
    samples: list[list[torch.Tensor]] = [[] for _ in native]
    tol = problem.tolerance
    totals: dict[int, torch.Tensor] = {}
    for rows, part_inputs, ref in _reference_by_rows(problem, before, blocks):
        # PyTorch's ratios need the extra bounds only under a relative floor
        extra = _saved_rounding_bounds(problem, part_inputs) if tol.relative_floor else None
        for i, r in enumerate(ref):
            if i in sums:
                totals[i] = r.clone() if i not in totals else totals[i].add_(r)
                continue
            nat = native[i][rows]
            samples[i].append(_block_sample(r, rows, native[i]))
            if nat.is_floating_point() and r.is_floating_point():
                torch_errors[i] = max(torch_errors[i], checks.max_abs_error(nat, r))
                if tol.relative_floor:
                    bound_extra = extra[i] if extra is not None else None
                    ratio = checks.error_ratio(nat, r, *tol.for_dtype(nat.dtype), bound_extra)
                    torch_ratios[i] = max(torch_ratios[i], ratio)
    for i, total in totals.items():
        samples[i] = [_trial_sample(total)]
        if native[i].is_floating_point() and total.is_floating_point():
            torch_errors[i] = checks.max_abs_error(native[i], total)
            if tol.relative_floor:
                torch_ratios[i] = checks.error_ratio(
                    native[i], total, *tol.for_dtype(native[i].dtype)
                )
    result.torch_error = max([result.torch_error, *torch_errors])
    if not compare:
        return tuple(torch.cat(parts) for parts in samples)
    if totals:
        whole = [totals.get(i, o) for i, o in enumerate(outputs)]
        found = checks.check_values(outputs, whole, None, tol, trial=trial,
                                    torch_errors=torch_errors, torch_ratios=torch_ratios,
                                    only=sums)  # fmt: skip
        for i, total in totals.items():
            if outputs[i].is_floating_point() and total.is_floating_point():
                result.max_error = max(result.max_error, checks.max_abs_error(outputs[i], total))
        result.add([Finding(f.reason, f"{f.message} (a sum over all rows, its reference added "
                            f"up over {len(blocks)} row blocks)") for f in found])  # fmt: skip
    del totals
    for rows, part_inputs, ref in _reference_by_rows(problem, before, blocks):
        part = [o if i in sums else o[rows] for i, o in enumerate(outputs)]
        rowwise = set(range(len(part))) - sums
        extra = _saved_rounding_bounds(problem, part_inputs)
        found = checks.check_values(part, ref, None, tol, trial=trial, torch_errors=torch_errors,
                                    extra_bounds=extra, torch_ratios=torch_ratios,
                                    only=rowwise)  # fmt: skip
        for i in rowwise:
            out, r = part[i], ref[i]
            if out.is_floating_point() and r.is_floating_point():
                result.max_error = max(result.max_error, checks.max_abs_error(out, r))
        if found:
            result.add([Finding(f.reason, f"{f.message} (rows {rows.start}:{rows.stop})")
                        for f in found])  # fmt: skip
            break
    return tuple(torch.cat(parts) for parts in samples)


def _native_by_rows(
    problem: Problem, before: Sequence[Any], blocks: list[slice]
) -> tuple[torch.Tensor, ...]:
    """PyTorch's own result at the inputs' dtype, one block of rows at a time and concatenated:
    its temporaries (an fp32 upcast, a gradient problem's autograd graph) of a shape too large
    for a float64 reference in one piece may not fit beside the inputs either.

    A ``row_sums`` output is each block's share added up in float64 and rounded once to its
    dtype, as PyTorch computing the whole sum rounds once."""
    assert problem.row_split is not None
    sums = set(problem.row_sums)
    whole: list[torch.Tensor] = []
    dtypes: dict[int, torch.dtype] = {}
    for rows in blocks:
        part = checks.as_outputs(problem.reference(*problem.row_split(before, rows)))
        if not whole:  # shaped from the first block: the outputs' leading dimension is the rows
            rows_total = blocks[-1].stop
            whole = [p.new_zeros(p.shape, dtype=torch.float64) if i in sums
                     else p.new_empty((rows_total, *p.shape[1:]))
                     for i, p in enumerate(part)]  # fmt: skip
        for i, (out, p) in enumerate(zip(whole, part, strict=True)):
            if i in sums:
                dtypes[i] = p.dtype
                out += p.detach()
            else:
                out[rows] = p.detach()
    return tuple(o.to(dtypes[i]) if i in sums else o for i, o in enumerate(whole))


def _reference_by_rows(problem: Problem, before: Sequence[Any], blocks: list[slice]):
    assert problem.row_split is not None
    """(rows, their inputs, the float64 reference of those rows) for each block."""
    for rows in blocks:
        part = problem.row_split(before, rows)
        yield rows, part, tuple(map(_detached, _float64_reference(problem, part)))


def _block_sample(ref_block: torch.Tensor, rows: slice, whole: torch.Tensor) -> torch.Tensor:
    """The elements of ``ref_block`` (rows ``rows`` of an output shaped like ``whole``) that
    :func:`_trial_sample` picks from the whole output."""
    step = max(1, -(-whole.numel() // TRIAL_SAMPLE))
    base = rows.start * (whole.numel() // max(1, whole.shape[0]))
    return ref_block.reshape(-1)[(-base) % step :: step].clone()


POOL_MEMORY_SHARE = 3
"""The rotating input pool (inputs and their expected outputs) may use at most 1/this of the
free device memory: the rest is for the contenders' outputs and temporaries."""


def _pool_that_fits(inputs: Sequence[Any], outputs: Sequence[Any], device: torch.device) -> int:
    """How many input sets like ``inputs`` (with ``outputs``) fit the pool's memory share."""
    if device.type != "cuda":
        return 1 << 30
    per_set = sum(t.numel() * t.element_size() for t in (*inputs, *outputs)
                  if isinstance(t, torch.Tensor))  # fmt: skip
    return pool_sets_within(per_set, _free_device_bytes(device))


def _free_device_bytes(device: torch.device) -> int:
    """Memory a new allocation can get: free on the device plus what the caching allocator
    holds unused."""
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)


def pool_sets_within(per_set_bytes: int, free_bytes: int) -> int:
    """Input sets of ``per_set_bytes`` (one already allocated) that fit a ``POOL_MEMORY_SHARE``
    share of ``free_bytes``; at least 1. A set that large is far beyond the L2, so fewer sets
    still time cold calls."""
    budget = (free_bytes + per_set_bytes) // POOL_MEMORY_SHARE
    return max(1, budget // max(1, per_set_bytes))


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def _run_poisoned(
    problem: Problem, inputs: Sequence[Any], byte: int, result: VerificationResult
) -> tuple[Any, ...] | None:
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    try:
        with isolation.poisoned_memory(byte, device):
            outputs = checks.as_outputs(problem.implementation(*inputs))
        if device.type == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:
        result.add(
            [Finding(Reason.CRASH, f"the implementation raised {type(exc).__name__}: {exc}")]
        )
        return None
    return tuple(_detached(o) for o in outputs)


def _inspect_outputs(
    outputs: Sequence[Any],
    inputs: Sequence[Any],
    before: Sequence[Any],
    native: Sequence[Any],
    device: torch.device,
    trial: int,
) -> list[Finding]:
    found: list[Finding] = []
    for i, out in enumerate(outputs):
        if type(out) is not torch.Tensor:
            found.append(
                Finding(
                    Reason.OUTPUT_TYPE,
                    f"output {i} is a {type(out).__qualname__}, expected exactly torch.Tensor",
                )
            )
            return found
        if out.device.type != device.type:
            found.append(
                Finding(Reason.WRONG_DEVICE, f"output {i} is on {out.device}, expected {device}")
            )
        if isolation.overlaps_inputs(out, inputs):
            found.append(
                Finding(Reason.ALIASING, f"trial {trial}: output {i} shares memory with an input")
            )
    found += checks.check_inputs_unchanged(before, inputs, trial=trial)
    found += checks.check_outputs_fit(outputs, native, str(device))
    return found


def _clone_tensors(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values)


def _restore_if_changed(values: tuple[Any, ...], snapshot: tuple[Any, ...]) -> bool:
    """Copy ``snapshot`` back over tensors of ``values`` that changed; True if any had."""
    changed = False
    for value, saved in zip(values, snapshot, strict=True):
        if isinstance(value, torch.Tensor) and not checks.bitwise_equal(value.detach(), saved):
            with torch.no_grad():
                value.copy_(saved)
            changed = True
    return changed


def _on_private_copies(
    fn: Callable[..., Any], input_sets: Sequence[tuple[Any, ...]]
) -> Callable[..., Any]:
    """``fn`` called on its own copy of whichever input set it is given."""
    copies = {tuple(map(id, s)): _clone_tensors(s) for s in input_sets}

    def run(*inputs: Any) -> Any:
        return fn(*copies[tuple(map(id, inputs))])

    return run


TRIAL_SAMPLE = 1 << 20
"""Elements of each output kept per trial for the degenerate and replay checks (8, 2)."""


def _trial_sample(t: torch.Tensor) -> torch.Tensor:
    """The same evenly spaced elements of ``t`` in every trial, at most ``TRIAL_SAMPLE``.

    Five trials of a multi-GB float64 output do not fit on the device; a constant or replayed
    output is identical on any fixed subset, while two different random references agree on a
    million fixed positions with negligible probability.
    """
    flat = t.reshape(-1)
    step = max(1, -(-flat.numel() // TRIAL_SAMPLE))
    return flat[::step].clone()


def _baselines(problem: Problem) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    available: dict[str, Callable[..., Any]] = {"reference": problem.reference}
    skipped: dict[str, str] = {}
    for name, factory in problem.baselines.items():
        try:
            available[name] = factory()
        except BaselineUnavailable as exc:
            skipped[name] = str(exc)
        except Exception as exc:  # a broken baseline is reported, the suite goes on
            skipped[name] = f"{type(exc).__name__}: {exc}"
    return available, skipped


def time_problem(
    problem: Problem,
    shape: Shape,
    dtype: torch.dtype,
    device: torch.device,
    *,
    max_time_s: float = 2.0,
    cold: bool = True,
    cuda_graph: bool = False,
    pool: int = 4,
) -> tuple[dict[str, Any], dict[str, str], list[Finding]]:
    """Time the implementation against the reference and baselines, interleaved.

    Every output of the implementation produced while timing is compared with its output on the
    same inputs before timing (check 11). Returns (times, skipped baselines, findings).
    """
    check_positive("max_time_s", max_time_s)
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
        raise ValueError(f"pool: expected an int >= 1, got {pool!r}")
    input_sets: list[tuple[Any, ...]] = []
    expected: dict[int, tuple[Any, ...]] = {}
    while len(input_sets) < pool:
        generator = torch.Generator(device=device)
        generator.manual_seed(secrets.randbits(62))
        inputs = tuple(problem.make_inputs(shape, dtype, device, generator))
        outputs = checks.as_outputs(problem.implementation(*inputs))
        input_sets.append(inputs)
        expected[id(inputs)] = tuple(_detached(o).clone() for o in outputs)
        del outputs
        if len(input_sets) == 1:
            pool = min(pool, _pool_that_fits(input_sets[0], expected[id(inputs)], device))
    contenders, skipped = _baselines(problem)
    private_inputs: list[str] = []
    for name in list(contenders):
        # a baseline that cannot run these inputs (an API change in its library, say) is
        # reported as skipped with its error; it must not end the run for everyone else
        snapshot = _clone_tensors(input_sets[0])
        try:
            contenders[name](*input_sets[0])
        except Exception as exc:
            skipped[name] = f"failed on these inputs: {type(exc).__name__}: {exc}"[:300]
            del contenders[name]
            continue
        finally:
            changed = _restore_if_changed(input_sets[0], snapshot)
            snapshot = None  # before the next contender's copy: at 8192 x 262144 fp32, 16 GB
        if changed:
            # a baseline that writes its inputs (Liger's in-place gradients) would feed every
            # other contender corrupted inputs: it runs on its own copies instead
            contenders[name] = _on_private_copies(contenders[name], input_sets)
            private_inputs.append(name)
    contenders = {report.CANDIDATE: problem.implementation, **contenders}
    mismatches = [0, 0]

    def check(name: str, inputs: tuple[Any, ...], output: Any) -> None:
        if name != report.CANDIDATE:
            return
        mismatches[1] += 1
        if not checks.matches_verified(output, expected[id(inputs)], problem.tolerance.repeat_atol):
            mismatches[0] += 1

    measurements = timing.measure_interleaved(
        contenders, input_sets, cold=cold, max_time_s=max_time_s, cuda_graph=cuda_graph,
        on_output=check,
    )  # fmt: skip
    findings = []
    if mismatches[0]:
        findings.append(
            Finding(
                Reason.TIMED_OUTPUT,
                f"{mismatches[0]} of {mismatches[1]} timed calls differ from the verified output",
            )
        )
    times = {
        name: m.as_dict() | {"samples_s": list(m.samples_s)} for name, m in measurements.items()
    }
    for name in private_inputs:
        times[name]["notes"].append("writes its inputs: timed on private copies of them")
    return times, skipped, findings


def select_problems(problems: Sequence[Problem], pattern: str | None) -> list[Problem]:
    """Problems whose name matches the glob ``pattern`` (all when None); commas separate globs."""
    if pattern is not None and not isinstance(pattern, str):
        raise TypeError(f"pattern: expected a glob string or None, got {type(pattern).__name__}")
    if pattern is None:
        return list(problems)
    globs = [g.strip() for g in pattern.split(",") if g.strip()]
    chosen = [p for p in problems if any(fnmatch.fnmatchcase(p.name, g) for g in globs)]
    if not chosen:
        known = ", ".join(p.name for p in problems) or "none registered"
        raise ValueError(f"problem: no problem matches {pattern!r}; known: {known}")
    return chosen


def _shape_selected(shape: Shape, filters: Sequence[dict[str, int]] | None) -> bool:
    """A shape passes when it has every size of one of ``filters`` (all pass when None)."""
    if filters is None:
        return True
    return any(all(shape.get(k) == v for k, v in f.items()) for f in filters)


def suite_tasks(
    problems: Sequence[Problem],
    device: torch.device,
    *,
    dtype: torch.dtype | None = None,
    sweep: bool = False,
    shapes: Sequence[dict[str, int]] | None = None,
) -> list[tuple[Problem, Shape, torch.dtype, str | None]]:
    """(problem, shape, dtype, skip reason or None) for every row the suite will produce;
    ``shapes`` (sizes as :func:`warpforge.validation.parse_shape` reads them) keeps only the rows
    of shapes with all the sizes of one of them."""
    tasks = []
    for problem in problems:
        if device.type == "cuda":
            candidates = [*problem.shapes, *(problem.sweep if sweep else ())]
        else:
            candidates = list(problem.cpu_shapes)
        dtypes = [d for d in problem.dtypes if dtype is None or d == dtype]
        unique = list({tuple(sorted(s.items())): s for s in candidates}.values())
        for shape in (s for s in unique if _shape_selected(s, shapes)):
            for d in dtypes:
                skip = None
                if device.type != "cuda" and d == torch.bfloat16:
                    skip = "bfloat16 is unreliable under Triton's CPU interpreter; GPU only"
                tasks.append((problem, shape, d, skip))
    return tasks


def _raised_at(exc: BaseException, frames: int = 4) -> str:
    """Where ``exc`` was raised: its innermost ``frames`` frames as ``file:line function``,
    outermost first (an out-of-memory row says which allocation did not fit)."""
    stack = traceback.extract_tb(exc.__traceback__)[-frames:]
    return "at " + " > ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in stack)


def run_builtin_suite(
    tasks: Sequence[tuple[Problem, Shape, torch.dtype, str | None]],
    device: torch.device,
    *,
    ceilings: ceilings_mod.Ceilings | None = None,
    trials: int = MIN_TRIALS,
    max_time_s: float = 2.0,
    cold: bool = True,
    cuda_graph: bool = False,
    progress: Progress | None = None,
    verify_only: bool = False,
) -> list[dict[str, Any]]:
    """Verify (and on GPU, unless ``verify_only``, time) every task; one report row each."""
    check_positive("max_time_s", max_time_s)
    if trials < MIN_TRIALS:
        raise ValueError(f"trials: expected >= {MIN_TRIALS}, got {trials}")
    rows = []
    for problem, shape, dtype, skip in tasks:
        if progress is not None:
            progress(f"{problem.name} {dict(shape)} {str(dtype).removeprefix('torch.')}")
        flops = float(problem.flops(shape, dtype))
        bytes_moved = float(problem.bytes_moved(shape, dtype))
        if skip is not None:
            row = report.result_entry(
                problem=problem.name, shape=shape, dtype=dtype,
                verification={"passed": None, "skipped": skip}, times={}, flops=flops,
                bytes_moved=bytes_moved, ceilings=ceilings,
            )  # fmt: skip
            row["status"] = "skipped"
            rows.append(row)
            continue
        stage = "verification"
        try:
            verification = verify_problem(problem, shape, dtype, device, trials=trials)
            stage = "timing"
            times: dict[str, Any] = {}
            skipped: dict[str, str] = {}
            findings: list[dict[str, str]] = []
            if verification.passed and device.type == "cuda" and not verify_only:
                times, skipped, timed_findings = time_problem(
                    problem, shape, dtype, device, max_time_s=max_time_s, cold=cold,
                    cuda_graph=cuda_graph,
                )  # fmt: skip
                findings += [f.as_dict() for f in timed_findings]
                findings += _impossible_findings(
                    times, ceilings, bytes_moved=bytes_moved, flops=flops, dtype=dtype
                )
            rows.append(
                report.result_entry(
                    problem=problem.name,
                    shape=shape,
                    dtype=dtype,
                    verification=verification.as_dict(),
                    times=times,
                    flops=flops,
                    bytes_moved=bytes_moved,
                    ceilings=ceilings,
                    skipped_baselines=skipped,
                    findings=findings,
                )
            )
        except Exception as exc:  # one broken row (a crash, out of memory) must not end the suite
            error = f"{stage}, {_raised_at(exc)}: {type(exc).__name__}: {exc}"
            row = report.result_entry(
                problem=problem.name, shape=shape, dtype=dtype,
                verification={"passed": False, "error": error[:700]},
                times={}, flops=flops, bytes_moved=bytes_moved, ceilings=ceilings,
            )  # fmt: skip
            row["status"] = "error"
            rows.append(row)
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows
