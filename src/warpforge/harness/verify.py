"""Verifying a KernelBench candidate against its reference: every check, in order.

:class:`PairSession` loads the reference in the harness process, audits the candidate's source,
starts the candidate's worker (``isolation.py``), runs the correctness trials and the checks of
``checks.py``, and can then time the same worker (``bench``). :func:`verify_pair` is the
one-call form that ``warpforge verify`` uses.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from warpforge.harness import audit, checks, isolation, kernelbench
from warpforge.harness.checks import Finding, Reason
from warpforge.harness.kernelbench import LoadError
from warpforge.harness.problem import Tolerance

MIN_TRIALS = 5
GPU_ONLY_CHECKS = (
    "profiler list of launched kernels, vendor kernels flagged (check 10)",
    "caching-allocator free blocks pre-filled with NaN (GPU part of check 6)",
    "CUDA-event timing with device-wide sync, event vs wall-clock cross-check",
    "side-stream work caught by device-wide synchronisation",
)


@dataclass(frozen=True)
class VerifyOptions:
    """How hard to check. The defaults are what suites use."""

    trials: int = MIN_TRIALS
    policy: audit.AuditPolicy = audit.STRICT
    timeout_s: float = 300.0
    """Per worker command (one candidate call, or one loop)."""
    timed_calls: int | None = None
    """Calls in the check-11 loop; default 20 on GPU, 6 on CPU (the interpreter is slow)."""
    repeat_trials: int = 2
    """Trials that are run twice (under two poisons) for checks 6 and 7."""

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < MIN_TRIALS:
            raise ValueError(f"trials: expected an int >= {MIN_TRIALS}, got {self.trials!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s: expected a number > 0, got {self.timeout_s!r}")
        if self.timed_calls is not None and self.timed_calls < 1:
            raise ValueError(f"timed_calls: expected >= 1, got {self.timed_calls!r}")


@dataclass
class VerificationResult:
    """What verification found; ``passed`` when no check failed."""

    reference: str
    candidate: str
    device: str
    trials: int = 0
    findings: list[Finding] = field(default_factory=list)
    skipped_checks: list[str] = field(default_factory=list)
    max_error: float = 0.0
    torch_error: float = 0.0
    compute_ops: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings

    def reasons(self) -> list[str]:
        return sorted({f.reason.value for f in self.findings})

    def add(self, found: Sequence[Finding]) -> None:
        """Keep one finding per reason: one line per failed check."""
        seen = {f.reason for f in self.findings}
        for finding in found:
            if finding.reason not in seen:
                self.findings.append(finding)
                seen.add(finding.reason)

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "candidate": self.candidate,
            "device": self.device,
            "passed": self.passed,
            "trials": self.trials,
            "findings": [f.as_dict() for f in self.findings],
            "skipped_checks": list(self.skipped_checks),
            "max_error": self.max_error,
            "torch_error": self.torch_error,
            "compute_ops": list(self.compute_ops),
            "kernels": list(self.kernels),
        }


class PairSession:
    """A reference file, a candidate file and the candidate's worker, for verify then bench."""

    def __init__(
        self,
        reference_path: str | Path,
        candidate_path: str | Path,
        *,
        options: VerifyOptions | None = None,
        baseline_paths: Sequence[str | Path] = (),
        device: torch.device | None = None,
    ) -> None:
        self.options = options or VerifyOptions()
        if device is None:
            # an explicit index: under torchrun each rank's worker must use the rank's GPU
            cuda = torch.cuda.is_available()
            device = (
                torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
            )
        self.device = device
        self.reference = kernelbench.load_reference(reference_path)
        self.candidate_path = Path(candidate_path)
        try:
            source = self.candidate_path.read_text()
        except OSError as exc:
            raise LoadError(f"candidate: cannot read {str(candidate_path)!r}: {exc}") from exc
        try:
            self.audit_findings = audit.audit_source(
                source, policy=self.options.policy, filename=str(candidate_path)
            )
        except SyntaxError as exc:
            raise LoadError(
                f"candidate: {str(candidate_path)!r} is not valid Python: {exc}"
            ) from exc
        self.init_seed = secrets.randbits(31)
        try:
            init_inputs = self.reference.init_inputs()
        except Exception as exc:
            raise LoadError(
                f"reference: get_init_inputs() failed: {type(exc).__name__}: {exc}"
            ) from exc
        self.tolerance = Tolerance(repeat_atol=self.reference.repeat_atol)
        try:
            self.ref_native = kernelbench.build_model(
                self.reference.model_class, init_inputs, seed=self.init_seed, device=self.device
            )
            self.ref64 = kernelbench.build_model(
                self.reference.model_class,
                init_inputs,
                seed=self.init_seed,
                device=self.device,
                dtype=torch.float64,
            )
        except Exception as exc:
            raise LoadError(
                f"reference: building Model failed: {type(exc).__name__}: {exc}"
            ) from exc
        self.sample_inputs: tuple[Any, ...] = ()
        self.sample_outputs: tuple[Any, ...] = ()
        config = isolation.WorkerConfig(
            candidate_path=str(self.candidate_path.resolve()),
            init_inputs=init_inputs,
            init_seed=self.init_seed,
            device=str(self.device),
            baseline_paths=tuple(str(Path(p).resolve()) for p in baseline_paths),
            reference_path=str(Path(reference_path).resolve()),
        )
        try:
            self.worker: isolation.CandidateProcess | None = isolation.CandidateProcess(
                config, timeout_s=self.options.timeout_s
            )
        except isolation.WorkerFailure as exc:
            if exc.kind == "load":  # the worker's message names the role
                raise LoadError(str(exc)) from None
            raise LoadError(f"candidate: its process failed to start: {exc}") from None
        self.result = VerificationResult(
            reference=str(reference_path), candidate=str(candidate_path), device=str(self.device)
        )

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def __enter__(self) -> PairSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, command: dict[str, Any]) -> dict[str, Any] | None:
        """Send a command; on crash or timeout record the finding and stop the worker."""
        if self.worker is None:
            return None
        try:
            reply = self.worker.request(command)
        except isolation.WorkerFailure as exc:
            reason = Reason.TIMEOUT if exc.kind == "timeout" else Reason.CRASH
            self.result.add([Finding(reason, str(exc))])
            self.close()
            return None
        if not reply.get("timers_ok", True):
            self.result.add(
                [
                    Finding(
                        Reason.TIMER_TAMPERING,
                        "timing functions changed in the candidate's process",
                    )
                ]
            )
        if reply.get("error"):
            self.result.add([Finding(Reason.CRASH, f"the candidate raised {reply['error']}")])
            return None
        return reply

    def _inspect_run(
        self, reply: dict[str, Any], inputs: tuple[Any, ...], expected: tuple[Any, ...], trial: int
    ) -> tuple[torch.Tensor, ...] | None:
        """Checks 4, 5, 9 (run time), 10 on one reply; the outputs when they are tensors."""
        found: list[Finding] = []
        for i, (plain, type_name) in enumerate(zip(reply["plain"], reply["types"], strict=False)):
            if not plain:
                found.append(
                    Finding(
                        Reason.OUTPUT_TYPE,
                        f"output {i} is a {type_name}, expected exactly torch.Tensor",
                    )
                )
        for i, device in enumerate(reply["devices"]):
            if device and torch.device(device) != _canonical(self.device):
                found.append(
                    Finding(
                        Reason.WRONG_DEVICE, f"output {i} is on {device}, expected {self.device}"
                    )
                )
        if any(reply["aliasing"]):
            found.append(
                Finding(Reason.ALIASING, f"trial {trial}: an output shares memory with an input")
            )
        found += checks.check_inputs_unchanged(
            [_cpu(x) for x in inputs], reply["inputs_after"], trial=trial
        )
        if reply["ops"] and not self.options.policy.allow_torch:
            found.append(
                Finding(
                    Reason.TORCH_COMPUTE,
                    f"dispatched PyTorch compute operators: {', '.join(reply['ops'][:8])}",
                )
            )
        found += audit.forbidden_kernels(reply["kernels"], self.options.policy)
        if reply["threads_left"]:
            found.append(
                Finding(
                    Reason.CONCURRENCY,
                    f"{reply['threads_left']} thread(s) still running after the call returned",
                )
            )
        self.result.compute_ops = sorted(set(self.result.compute_ops) | set(reply["ops"]))
        self.result.kernels = sorted(set(self.result.kernels) | set(reply["kernels"]))
        outputs = reply["outputs"]
        if any(o is None for o in outputs):
            found.append(Finding(Reason.OUTPUT_TYPE, f"trial {trial}: an output is not a tensor"))
            self.result.add(found)
            return None
        # the worker sent copies: the layout is the one of the outputs it returned
        layout = (reply["contiguous"], reply["strides"])
        found += checks.check_outputs_fit(outputs, expected, str(self.device), layout)
        self.result.add(found)
        # compared where the reference lives (the GPU when there is one: large float64 checks)
        return tuple(o.to(self.device) for o in outputs)

    def verify(self) -> VerificationResult:
        """Run every check; the result lists one finding per failed check."""
        result = self.result
        result.add(self.audit_findings)
        if self.device.type != "cuda":
            result.skipped_checks = list(GPU_ONLY_CHECKS)
        if self.worker is not None and not self.worker.ready.get("timers_ok", True):
            result.add(
                [
                    Finding(
                        Reason.TIMER_TAMPERING, "timing functions changed by the candidate's import"
                    )
                ]
            )
        references: list[tuple[torch.Tensor, ...]] = []
        candidates: list[tuple[torch.Tensor, ...]] = []
        for trial in range(self.options.trials):
            seed = secrets.randbits(62)  # unpredictable: no public seed to overfit
            try:
                inputs = self.reference.inputs(seed, self.device)
                with torch.no_grad():
                    ref64 = checks.as_outputs(self.ref64(*map(kernelbench.to_float64, inputs)))
                    native = checks.as_outputs(self.ref_native(*inputs))
            except Exception as exc:
                raise LoadError(
                    f"reference: running Model failed: {type(exc).__name__}: {exc}"
                ) from exc
            ref64 = tuple(_detached(r) for r in ref64)
            native = tuple(_detached(r) for r in native)
            if trial == 0:
                self.sample_inputs, self.sample_outputs = inputs, native
            references.append(ref64)
            reply = self._request(
                {
                    "op": "run",
                    "inputs": tuple(_cpu(x) for x in inputs),
                    "poison": isolation.POISON_NAN,
                    "keep": True,
                }
            )
            result.trials = trial + 1
            if reply is None:
                break
            outputs = self._inspect_run(reply, inputs, native, trial)
            if outputs is None:
                continue
            candidates.append(outputs)
            if not any(f.reason in _STRUCTURAL for f in result.findings):
                result.add(checks.check_values(outputs, ref64, native, self.tolerance, trial=trial))
                self._record_errors(outputs, ref64, native)
            if trial < self.options.repeat_trials:
                again = self._request(
                    {
                        "op": "run",
                        "inputs": tuple(_cpu(x) for x in inputs),
                        "poison": isolation.POISON_FINITE,
                        "keep": False,
                    }
                )
                if again is None:
                    break
                second = self._inspect_run(again, inputs, native, trial)
                if second is not None:
                    result.add(checks.check_repeat(outputs, second, self.tolerance, trial=trial))
        result.add(checks.check_not_degenerate(references))
        if len(candidates) == len(references):
            result.add(checks.check_not_replayed(candidates, references))
        if self.worker is not None and candidates:
            calls = self.options.timed_calls or (20 if self.device.type == "cuda" else 6)
            reply = self._request(
                {"op": "loop", "calls": calls, "repeat_atol": self.tolerance.repeat_atol}
            )
            if reply is not None and reply["mismatches"]:
                result.add(
                    [
                        Finding(
                            Reason.TIMED_OUTPUT,
                            f"{len(reply['mismatches'])} of {reply['calls']} timing-loop calls "
                            "returned something other than the verified output (first at call "
                            f"{reply['mismatches'][0]})",
                        )
                    ]
                )
        return result

    def _record_errors(
        self, outputs: Sequence[torch.Tensor], ref64: Sequence[torch.Tensor], native: Sequence[Any]
    ) -> None:
        for out, ref, nat in zip(outputs, ref64, native, strict=False):
            if out.is_floating_point() and ref.is_floating_point() and out.shape == ref.shape:
                self.result.max_error = max(self.result.max_error, checks.max_abs_error(out, ref))
                self.result.torch_error = max(
                    self.result.torch_error, checks.max_abs_error(nat, ref)
                )

    def time(
        self, *, cold: bool = True, max_time_s: float = 2.0, cuda_graph: bool = False
    ) -> dict[str, Any]:
        """Time candidate, reference and baselines interleaved in the worker (after verify)."""
        if self.worker is None:
            raise RuntimeError("time: the candidate's process is gone (verification failed)")
        reply = self._request(
            {
                "op": "time",
                "cold": cold,
                "max_time_s": max_time_s,
                "cuda_graph": cuda_graph,
                "repeat_atol": self.tolerance.repeat_atol,
            }
        )
        if reply is None:
            return {}
        if reply["mismatches"]:
            self.result.add(
                [
                    Finding(
                        Reason.TIMED_OUTPUT,
                        f"{len(reply['mismatches'])} of {reply['checked_calls']} timed calls "
                        "returned something other than the verified output",
                    )
                ]
            )
        for name, m in reply["measurements"].items():
            if not m.get("event_wall_consistent", True):
                self.result.add(
                    [Finding(Reason.TIMER_TAMPERING, f"{name}: event time exceeds wall-clock time")]
                )
        return reply


_STRUCTURAL = {Reason.WRONG_SHAPE, Reason.WRONG_DTYPE, Reason.WRONG_STRUCTURE, Reason.OUTPUT_TYPE}


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def _cpu(value: Any) -> Any:
    return value.detach().to("cpu") if isinstance(value, torch.Tensor) else value


def _canonical(device: torch.device) -> torch.device:
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def verify_pair(
    reference_path: str | Path,
    candidate_path: str | Path,
    *,
    options: VerifyOptions | None = None,
) -> VerificationResult:
    """Verify a candidate file against a reference file (LoadError when either cannot load)."""
    with PairSession(reference_path, candidate_path, options=options) as session:
        return session.verify()
