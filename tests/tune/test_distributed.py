from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import warpforge
from warpforge.tune.database import PerfDatabase
from warpforge.tune.distributed import Rank, plan_work, shard


def test_shard_is_round_robin_and_covers_everything() -> None:
    items = list(range(7))
    parts = [shard(items, Rank(r, 3)) for r in range(3)]
    assert parts == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(i for part in parts for i in part) == items


def test_plan_splits_problems_or_configs() -> None:
    assert plan_work(5, Rank(1, 2)) == plan_work(5, Rank(1, 2))
    assert plan_work(5, Rank(1, 2)).problems == [1, 3] and not plan_work(5, Rank(1, 2)).config_shard
    one = plan_work(1, Rank(1, 2))
    assert one.problems == [0] and one.config_shard
    assert not plan_work(1, Rank()).config_shard


def _torchrun_tune(
    tmp_path: Path, nproc: int, op: str, shape: str, env_extra: dict[str, str]
) -> tuple[list, list, str, str]:
    """Run ``torchrun -m warpforge tune OP --shape SHAPE`` over ``nproc`` ranks into one SQLite file."""
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    src = str(Path(warpforge.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
        "COLUMNS": "250",
        **env_extra,
    }
    cmd = [
        sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
        "--standalone", "-m", "warpforge", "tune", op, "--shape", shape, "--db", url,
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=480)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    with PerfDatabase(url) as db:
        return db.trials(kernel=op), db.best_configs(kernel=op), done.stdout, output


def test_torchrun_two_cpu_ranks_share_the_configs_into_one_database(tmp_path: Path) -> None:
    trials, best, stdout, output = _torchrun_tune(
        tmp_path, 2, "row_sum", "M=3,N=20",
        {"TRITON_INTERPRET": "1", "WARPFORGE_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""},
    )  # fmt: skip
    # Each of the 9 valid configs tried exactly once, split over two processes.
    assert len(trials) == 9, output
    assert len({json_key(t.config) for t in trials}) == 9, output
    assert len({t.host for t in trials}) == 2, output
    assert len(best) == 1, output
    # Rank 0 alone prints the summary, and it counts the other rank's trials.
    assert stdout.count("row_sum on cpu/") == 1 and "9/0/0" in stdout, output


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="needs at least 2 visible GPUs for a tuning run split with NCCL",
)
def test_torchrun_over_gpus_with_nccl_shares_the_configs_into_one_database(
    tmp_path: Path,
) -> None:
    from warpforge.tune.tunable import get_tunable
    from warpforge.validation import parse_shape

    nproc = torch.cuda.device_count()
    kernel = get_tunable("rms_norm.fwd")
    shape = "M=4096,N=4096"
    features = kernel.features(kernel.check_shape(parse_shape(shape)), kernel.dtypes[0])
    expected = {json_key(c) for c in kernel.space.valid_configs(features)}
    trials, best, stdout, output = _torchrun_tune(tmp_path, nproc, "rms_norm.fwd", shape, {})
    # Every valid config tried exactly once, each rank on its own GPU, nothing lost or doubled.
    assert len(trials) == len(expected), output
    assert {json_key(t.config) for t in trials} == expected, output
    assert len({t.host for t in trials}) == nproc, output
    assert len(best) == 1, output
    ok = f"{len(expected)}/0/0"
    assert stdout.count("rms_norm.fwd on ") == 1 and ok in stdout, output


def json_key(config: dict) -> str:
    return repr(sorted(config.items()))
