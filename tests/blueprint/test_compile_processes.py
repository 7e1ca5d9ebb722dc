"""compile() across processes sharing one cache directory, end to end through real kernels.

Child processes (``blueprint_child_process.run_child``: this environment plus ``PYTHONPATH=src``
and the cache directory) compile a fused pointwise + row-reduction blueprint with ``strict=True``
and run it on the CPU under Triton's interpreter, on fresh random inputs; this process checks
their results against the float64 PyTorch reference and inspects the disk tier: several
processes compiling at once leave exactly one complete, verified entry, and a real entry that is
truncated, bit-flipped or missing a file is quarantined and rebuilt, never loaded.

The children run on the CPU even where CUDA is present: the layout checked here is the one entry
of generated source (a GPU run stores its Triton binaries as a second entry).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from blueprint_child_process import run_child

from warpforge.blueprint import BlueprintBuilder, BlueprintIR
from warpforge.blueprint.compiler import SOURCE_FILE
from warpforge.cache import KernelRegistry
from warpforge.cache.artifact import MANIFEST_NAME
from warpforge.cache.disk import LOCK_NAME, QUARANTINE, REASON_NAME, STAGING

COLS = 48
PROCESSES = 3
# What gelu(approximate="tanh") puts in the generated source: changing one of its digits keeps
# the file the same size and valid Python but computes wrong numbers.
GELU_CONSTANT = b"0.7978845608028654"

CHILD_BODY = """
import json, sys, time
from pathlib import Path
import torch
import warpforge
from warpforge.blueprint import BlueprintIR, program
from warpforge.cache import default_metrics

program.POISON_OUTPUTS = True  # an element a kernel forgets to store reads NaN, not a lucky 0
ir = BlueprintIR.from_json(sys.stdin.read())
generator = torch.Generator().manual_seed(SEED)
inputs = [torch.randn(ROWS, COLS, generator=generator), torch.randn(COLS, generator=generator)]
module = warpforge.compile(ir, strict=True)  # strict: a failure raises, not runs the reference
if BARRIER is not None:
    # wait for the others, so every process looks the kernels up, builds and publishes at once
    Path(BARRIER, f"ready-{SEED}").touch()
    deadline = time.monotonic() + 90
    while len(list(Path(BARRIER).iterdir())) < PROCESSES:
        if time.monotonic() > deadline:
            sys.exit("the other processes never reached the start line")
        time.sleep(0.001)
outputs = module(*inputs)
torch.save({"inputs": inputs, "outputs": outputs}, RESULT)
print(json.dumps(default_metrics().snapshot()))
"""


@pytest.fixture(autouse=True)
def interpreted_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children inherit this environment: their kernels run under Triton's CPU interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _gelu_rms_rows() -> BlueprintIR:
    """Pointwise ops around two row reductions: the generator fuses all of it into one kernel."""
    b = BlueprintBuilder("gelu_rms_rows")
    x = b.input("x", ("B", COLS), "float32")
    bias = b.input("bias", (COLS,), "float32")
    h = b.op("gelu", b.op("add", x, bias), approximate="tanh")
    mean_square = b.op("mean", b.op("mul", h, h), keepdim=True)
    b.output("y", b.op("mul", h, b.op("rsqrt", b.op("add", mean_square, scalar=1e-5))))
    b.output("row_max", b.op("amax", h))
    return b.build()


def _child_script(
    seed: int, rows: int, result: Path, barrier: Path | None = None, processes: int = 1
) -> str:
    settings = {
        "SEED": seed,
        "ROWS": rows,
        "COLS": COLS,
        "RESULT": str(result),
        "BARRIER": None if barrier is None else str(barrier),
        "PROCESSES": processes,
    }
    return "".join(f"{name} = {value!r}\n" for name, value in settings.items()) + CHILD_BODY


def _checked_result(
    done: subprocess.CompletedProcess, result: Path, ir: BlueprintIR, reference64
) -> dict:  # type: ignore[no-untyped-def]
    """The child's metrics, after checking that its kernels ran and computed the right thing."""
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    saved = torch.load(result)
    inputs, outputs = saved["inputs"], saved["outputs"]
    assert all(bool(t.ne(0).all()) for t in inputs)  # zeros could hide a kernel that did nothing
    for got, want in zip(outputs, reference64(ir, inputs), strict=True):
        torch.testing.assert_close(got.double(), want, atol=2e-5, rtol=2e-5)
    # the generated kernel ran (not the PyTorch reference, which would match by construction)
    assert metrics["fallbacks"] == {}
    assert metrics["first_launches"]["count"] == 1
    return metrics


def _the_one_verified_entry(cache: Path, ir: BlueprintIR, *, quarantine: bool = False) -> Path:
    """The blueprint's entry, after checking that the disk tier verifies it and holds nothing
    else: no other entry, no staged or half-written folder, no quarantine unless expected."""
    disk = KernelRegistry.from_environment().disk  # where a process with this environment looks
    assert disk is not None and disk.root == cache / "kernels"
    report = disk.verify()
    assert report.clean and (report.checked, report.ok) == (1, 1), report.as_dict()
    (manifest_path,) = disk.root.glob(f"??/*/{MANIFEST_NAME}")
    entry = manifest_path.parent
    manifest = json.loads(manifest_path.read_bytes())
    assert entry == disk.entry_dir(manifest["digest"])
    assert manifest["key"]["graph_hash"] == ir.canonical_hash()
    assert len(manifest["metadata"]["kernels"]) == 1  # fused: one kernel for the whole graph
    # complete: exactly the files its manifest lists
    assert sorted(p.name for p in entry.iterdir()) == sorted([*manifest["files"], MANIFEST_NAME])
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]
    expected = {entry.parent.name} | ({QUARANTINE} if quarantine else set())
    assert {p.name for p in disk.root.iterdir()} - {LOCK_NAME, STAGING} == expected
    # a writer's staging folder is gone once it published (or found another's entry)
    staging = disk.root / STAGING
    assert not staging.exists() or list(staging.iterdir()) == []
    return entry


def test_processes_compiling_one_blueprint_at_once_share_one_verified_entry(
    fresh_blueprint_cache: Path, tmp_path: Path, reference64
) -> None:  # type: ignore[no-untyped-def]
    ir = _gelu_rms_rows()
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    # each process its own seed and row count (one specialisation: rows are the symbolic B)
    scripts = [
        _child_script(seed, 3 + 4 * seed, tmp_path / f"result-{seed}.pt", barrier, PROCESSES)
        for seed in range(PROCESSES)
    ]
    with ThreadPoolExecutor(PROCESSES) as pool:  # threads only wait: the work is in children
        runs = list(pool.map(lambda script: run_child(script, ir, fresh_blueprint_cache), scripts))
    for seed, done in enumerate(runs):
        metrics = _checked_result(done, tmp_path / f"result-{seed}.pt", ir, reference64)
        # kernels came through the registry: built here, or another process's from disk
        assert metrics["builds"]["count"] + metrics["hits"]["disk"] == 1, metrics
        assert metrics["corruptions"]["disk"] == 0  # nobody read a half-written entry
    _the_one_verified_entry(fresh_blueprint_cache, ir)


@pytest.fixture(scope="module")
def populated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory holding the blueprint's entry as a compile in a new process wrote it;
    one compile for every corruption case, each of which damages its own copy."""
    cache = tmp_path_factory.mktemp("populated") / "warpforge-cache"
    script = _child_script(seed=0, rows=5, result=cache.parent / "result.pt")
    # module scope runs before the per-test fixtures that set the environment up
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WARPFORGE_REDIS_URL", raising=False)
        patch.setenv("TRITON_INTERPRET", "1")
        done = run_child(script, _gelu_rms_rows(), cache)
    assert json.loads(done.stdout.strip().splitlines()[-1])["builds"]["count"] == 1
    return cache


def _truncate(path: Path) -> None:
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])


def _flip_a_digit(path: Path) -> None:
    content = path.read_bytes()
    at = content.index(GELU_CONSTANT) + 2  # 0.7978... -> 0.9978...: same size, still Python
    path.write_bytes(content[:at] + b"9" + content[at + 1 :])
    compile(path.read_bytes(), str(path), "exec")  # loading it would run, and be wrong


def _delete(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_truncate, rf"file '{SOURCE_FILE}' has \d+ bytes, manifest records \d+"),
        (_flip_a_digit, rf"file '{SOURCE_FILE}' does not match its SHA-256 checksum"),
        (_delete, rf"missing file\(s\) \['{SOURCE_FILE}'\]"),
    ],
    ids=["truncate", "flip-bytes", "delete-file"],
)
def test_a_corrupted_entry_is_quarantined_and_rebuilt_with_correct_results(
    damage: Callable[[Path], None],
    reason: str,
    populated_cache: Path,
    fresh_blueprint_cache: Path,
    tmp_path: Path,
    reference64,
) -> None:  # type: ignore[no-untyped-def]
    ir = _gelu_rms_rows()
    shutil.copytree(populated_cache, fresh_blueprint_cache)
    entry = _the_one_verified_entry(fresh_blueprint_cache, ir)
    source = (entry / SOURCE_FILE).read_bytes()
    damage(entry / SOURCE_FILE)

    result = tmp_path / "result.pt"
    done = run_child(_child_script(seed=1, rows=7, result=result), ir, fresh_blueprint_cache)
    metrics = _checked_result(done, result, ir, reference64)
    # the damaged entry was caught on read, never loaded, and the kernels were built again
    assert metrics["corruptions"]["disk"] == 1
    assert metrics["hits"]["disk"] == 0 and metrics["builds"]["count"] == 1

    disk = KernelRegistry.from_environment().disk
    assert disk is not None
    (moved,) = disk.quarantined()
    assert moved.parent == disk.root / QUARANTINE and moved.name.startswith(f"{entry.name}.")
    assert re.search(reason, (moved / REASON_NAME).read_text())
    assert (moved / MANIFEST_NAME).exists()  # the whole entry moved, kept for inspection
    rebuilt = _the_one_verified_entry(fresh_blueprint_cache, ir, quarantine=True)
    assert rebuilt == entry
    assert (rebuilt / SOURCE_FILE).read_bytes() == source  # generation is deterministic
