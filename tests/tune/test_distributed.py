from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_torchrun_two_cpu_ranks_share_the_configs_into_one_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    src = str(Path(warpforge.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "TRITON_INTERPRET": "1",
        "WARPFORGE_INTERPRET": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "COLUMNS": "250",
    }
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
        "--standalone",
        "-m", "warpforge", "tune", "row_sum", "--shape", "M=3,N=20", "--db", url,
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    with PerfDatabase(url) as db:
        trials = db.trials(kernel="row_sum")
        best = db.best_configs(kernel="row_sum")
    # Each of the 9 valid configs tried exactly once, split over two processes.
    assert len(trials) == 9, output
    assert len({json_key(t.config) for t in trials}) == 9, output
    assert len({t.host for t in trials}) == 2, output
    assert len(best) == 1, output
    # Rank 0 alone prints the summary, and it counts the other rank's trials.
    assert done.stdout.count("row_sum on cpu/") == 1 and "9/0/0" in done.stdout, output


def json_key(config: dict) -> str:
    return repr(sorted(config.items()))
