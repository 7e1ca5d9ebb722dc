"""The cheating gallery: every cheat is rejected with its own reason; honest candidates pass.

Each file in ``cheats/`` is a KernelBench candidate with a docstring saying what it tries. The
ones that need no GPU run here (CPU, Triton interpreter), each through the full verification
(its own spawned worker), except those only the static audit can catch, which are audited
directly (no process needed) and once end to end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from warpforge.harness import audit, bench, kernelbench, verify
from warpforge.harness.kernelbench import LoadError
from warpforge.harness.problem import Problem

CHEATS = Path(__file__).parent / "cheats"

# candidate, reference, the reason it must be rejected with
DYNAMIC_GALLERY = [
    ("replay_cached", "ref_scale", "replay"),
    ("public_seed", "ref_scale", "replay"),
    ("input_mutation", "ref_scale", "input-mutation"),
    ("tensor_subclass", "ref_scale", "output-type"),
    ("lower_precision", "ref_scale", "tolerance"),
    ("partial_write", "ref_scale", "uninitialised-memory"),
    ("stale_memory", "ref_scale", "uninitialised-memory"),
    ("const_zero", "ref_degenerate", "degenerate"),
    ("disguised_torch_op", "ref_linear", "torch-compute"),
    ("hidden_linear", "ref_linear", "torch-compute"),
    ("patched_timer", "ref_scale", "timer-tampering"),
    ("background_thread", "ref_scale", "concurrency"),
    ("correct_while_checked", "ref_scale", "timed-output"),
    ("wrong_dtype", "ref_scale", "wrong-dtype"),
    ("wrong_shape", "ref_scale", "wrong-shape"),
    ("nan_output", "ref_scale", "nonfinite"),
    ("alias_input", "ref_copy", "aliasing"),
    ("transposed_output", "ref_scale", "wrong-layout"),
    ("transposed_while_timed", "ref_scale", "timed-output"),
    ("nondeterministic", "ref_scale", "nondeterministic"),
    ("crash", "ref_scale", "crash"),
    ("exit_process", "ref_scale", "crash"),
    ("try_fallback", "ref_scale", "audit-fallback"),
]

# caught by reading the source; audited without running
STATIC_GALLERY = [
    ("gc_snoop", "audit-introspection"),
    ("try_fallback", "audit-fallback"),
    ("side_stream", "audit-stream"),
    ("background_thread", "audit-concurrency"),
    ("patched_timer", "audit-patching"),
    ("harness_access", "audit-harness-access"),
    ("dynamic_import", "audit-dynamic-code"),
    ("disguised_torch_op", "audit-dynamic-code"),
    ("vendor_library", "audit-vendor-library"),
    ("public_seed", "audit-torch-op"),
    ("alias_patch", "audit-patching"),
    ("module_attribute", "audit-introspection"),
    ("module_attribute", "audit-harness-access"),
    ("numpy_host", "audit-torch-op"),
    ("identity_cache", "audit-introspection"),
]

HONEST = [("honest_scale", "ref_scale"), ("honest_linear", "ref_linear")]


def _verify(candidate: str, reference: str, **options: object) -> verify.VerificationResult:
    return verify.verify_pair(
        CHEATS / f"{reference}.py",
        CHEATS / f"{candidate}.py",
        options=verify.VerifyOptions(**options),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("candidate", "reference", "reason"), DYNAMIC_GALLERY)
def test_cheat_rejected_with_its_reason(candidate: str, reference: str, reason: str) -> None:
    result = _verify(candidate, reference, timeout_s=60.0)
    assert not result.passed
    assert reason in result.reasons(), [str(f) for f in result.findings]


@pytest.mark.parametrize(("candidate", "reference"), HONEST)
def test_honest_candidate_passes(candidate: str, reference: str) -> None:
    result = _verify(candidate, reference)
    assert result.passed, [str(f) for f in result.findings]
    assert result.trials >= verify.MIN_TRIALS
    assert result.max_error <= 1e-4
    assert result.compute_ops == []


def test_a_process_the_candidate_leaves_running_dies_with_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    marker = tmp_path / "outlived"
    monkeypatch.setenv("WARPFORGE_TEST_OUTLIVE_MARKER", str(marker))
    result = _verify("outliving_child", "ref_scale", timeout_s=60.0)
    assert not result.passed and "audit-concurrency" in result.reasons(), result.reasons()
    deadline = time.monotonic() + 5  # the child writes within 0.05 s of the worker's end
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marker.exists(), "a process the candidate forked outlived its worker"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_processes_that_leave_the_worker_group_die_with_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setsid() child and a daemon (double fork, new session) escape the group kill; the
    worker, their subreaper, holds them, and the harness kills them before the worker."""
    import time

    monkeypatch.setenv("WARPFORGE_TEST_ESCAPE_DIR", str(tmp_path))
    result = _verify("escaping_child", "ref_scale", timeout_s=60.0)
    assert not result.passed and "audit-concurrency" in result.reasons(), result.reasons()
    pid_files = [tmp_path / "setsid.pid", tmp_path / "daemon.pid"]
    assert all(f.exists() for f in pid_files), "the candidate's children did not start"
    pids = [int(f.read_text()) for f in pid_files]
    deadline = time.monotonic() + 5  # they write within 0.05 s of the worker's end, then exit
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    outlived = sorted(f.name for f in tmp_path.glob("*.outlived"))
    assert outlived == [], f"processes the candidate started outlived its worker: {outlived}"
    assert not any(_running(pid) for pid in pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a child subreaper is Linux's")
def test_a_process_that_escapes_then_kills_its_worker_dies_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setsid() child, then the candidate kills its own worker: the orphan goes to the
    worker's keeper (a subreaper above it), not to init, and is killed with it; the candidate
    is rejected as a crash, with the worker's exit code (killed by SIGKILL: -9)."""
    import time

    monkeypatch.setenv("WARPFORGE_TEST_ESCAPE_DIR", str(tmp_path))
    result = _verify("escape_then_crash", "ref_scale", timeout_s=60.0)
    assert not result.passed and "crash" in result.reasons(), result.reasons()
    assert any("exit code -9" in str(f) for f in result.findings), [str(f) for f in result.findings]
    pid_file = tmp_path / "escapee.pid"
    assert pid_file.exists(), "the candidate's child did not start"
    pid = int(pid_file.read_text())
    assert not _running(pid), "the orphan of the killed worker still runs"
    time.sleep(2.0)  # it would write its marker 1.5 s after the worker's end
    assert not (tmp_path / "escapee.outlived").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the keeper is Linux's")
def test_a_candidate_that_kills_the_keeper_dies_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker gets SIGKILL when its keeper dies (PR_SET_PDEATHSIG): killing the keeper, the
    first step of escaping it, is a crash, even where the candidate then answers honestly."""
    import os

    monkeypatch.setenv("WARPFORGE_TEST_HARNESS_PID", str(os.getpid()))
    result = _verify("kill_keeper", "ref_scale", timeout_s=60.0)
    assert not result.passed and "crash" in result.reasons(), result.reasons()


def _running(pid: int) -> bool:
    """Process ``pid`` exists and has not exited (a zombie left for init to reap has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def test_transposed_output_is_caught_in_process_too(device: torch.device) -> None:
    """The layout check runs where no worker does (built-in problems are verified in the
    harness process): the gallery's transposed candidate, called in process, is rejected too."""
    reference = kernelbench.load_reference(CHEATS / "ref_scale.py")
    path = CHEATS / "transposed_output.py"
    module = kernelbench.load_module(path, role="candidate")
    model_new = kernelbench.model_class(module, path, role="candidate")

    def inputs(shape, dtype, device, generator):
        seed = int(torch.randint(1 << 62, (1,), generator=generator, device=device))
        return reference.inputs(seed, device)

    problem = Problem(
        name="gallery.transposed_output",
        reference=kernelbench.build_model(reference.model_class, [], seed=0, device=device),
        implementation=kernelbench.build_model(model_new, [], seed=0, device=device),
        make_inputs=inputs,
        flops=lambda shape, dtype: 0.0,
        bytes_moved=lambda shape, dtype: 0.0,
        shapes=[{}],
        cpu_shapes=[{}],
    )
    result = bench.verify_problem(problem, {}, torch.float32, device)
    assert result.reasons() == ["wrong-layout"], [str(f) for f in result.findings]


def test_hanging_candidate_times_out() -> None:
    result = _verify("hang", "ref_scale", timeout_s=2.0)
    assert result.reasons() == ["timeout"]


@pytest.mark.parametrize(("candidate", "reason"), STATIC_GALLERY)
def test_static_audit_flags_cheat(candidate: str, reason: str) -> None:
    findings = audit.audit_source((CHEATS / f"{candidate}.py").read_text())
    assert reason in {f.reason.value for f in findings}, [str(f) for f in findings]


@pytest.mark.parametrize("candidate", ["honest_scale", "honest_linear"])
def test_static_audit_passes_honest_triton(candidate: str) -> None:
    assert audit.audit_source((CHEATS / f"{candidate}.py").read_text()) == []


def test_policy_allow_torch_accepts_torch_candidate() -> None:
    source = (CHEATS / "hidden_linear.py").read_text()
    assert audit.audit_source(source, policy=audit.AuditPolicy(allow_torch=True)) == []


def test_candidate_without_model_new_is_a_load_error() -> None:
    with pytest.raises(LoadError, match="does not define ModelNew") as caught:
        _verify("no_model_new", "ref_scale")
    assert (
        str(caught.value).startswith("candidate: ") and str(caught.value).count("candidate:") == 1
    )
    assert "LoadError" not in str(caught.value)  # the worker's own type name is not repeated


def test_candidate_failing_at_import_or_construction_is_one_named_load_error(tmp_path) -> None:
    at_import = tmp_path / "at_import.py"
    at_import.write_text("raise RuntimeError('no GPU here, says the candidate')\n")
    with pytest.raises(LoadError) as caught:
        verify.verify_pair(CHEATS / "ref_scale.py", at_import)
    message = str(caught.value)
    assert message.startswith("candidate: importing ") and message.count("candidate:") == 1
    assert message.endswith("RuntimeError: no GPU here, says the candidate")
    in_init = tmp_path / "in_init.py"
    in_init.write_text(
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def __init__(self, *args):\n        raise ValueError('bad width')\n"
    )
    with pytest.raises(LoadError) as caught:
        verify.verify_pair(CHEATS / "ref_scale.py", in_init)
    assert str(caught.value).count("candidate:") == 1 and "ValueError: bad width" in str(
        caught.value
    )


def test_candidate_with_syntax_error_is_a_load_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("class ModelNew(torch.nn.Module:\n    pass\n")
    with pytest.raises(LoadError, match="not valid Python"):
        verify.verify_pair(CHEATS / "ref_scale.py", broken)


def test_vendor_kernels_flagged_by_policy() -> None:
    names = ["sm90_xmma_gemm_bf16bf16_bf16f32", "void at::native::reduce_kernel<512>", "_scale_kernel",
             "void at::native::vectorized_elementwise_kernel<FillFunctor>"]  # fmt: skip
    strict = audit.forbidden_kernels(names)
    assert [f.reason.value for f in strict] == ["vendor-kernel", "vendor-kernel"]
    loose = audit.forbidden_kernels(names, audit.AuditPolicy(allow_torch=True, allow_vendor=True))
    assert loose == []


@pytest.mark.gpu
def test_gpu_profiler_flags_vendor_matmul() -> None:
    result = _verify("hidden_linear", "ref_linear")
    assert "vendor-kernel" in result.reasons(), [str(f) for f in result.findings]
    assert result.kernels


@pytest.mark.gpu
def test_gpu_side_stream_rejected() -> None:
    result = _verify("side_stream", "ref_scale")
    assert "audit-stream" in result.reasons()
