"""Offline checks of the nearest-match lookup on recorded trials (scripts/tune_replay.py,
scripts/tune_merge.py): leave-one-out over tuned shapes, and denser training shapes."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from tune_synthetic import make_synthetic, synthetic_space

from script_module import load_script
from warpforge.tune.database import PerfDatabase
from warpforge.tune.lookup import ConfigLookup
from warpforge.tune.search import Trial
from warpforge.tune.tunable import device_fingerprint, register_tunable, unregister_tunable

CPU = device_fingerprint("cpu")


def _load(name: str):
    return load_script(f"scripts/{name}.py")  # tune_table imports tune_merge beside it


@pytest.fixture
def kernel() -> Iterator:
    space = synthetic_space(blocks=(64, 128, 256))
    k = register_tunable(make_synthetic("replay_synthetic", space=space), replace=True)
    yield k
    unregister_tunable(k.name)


def _record(url: str, kernel, n: int, medians: Mapping[str, float] | None = None) -> None:
    """Every valid config of ``kernel`` at N=n, timed by a bowl whose best block is N / 8."""
    features = {"N": n, "dtype": "float32"}
    with PerfDatabase(url) as db:
        for config in kernel.space.valid_configs(features):
            b = math.log2(int(config["BLOCK"])) - math.log2(n / 8)
            w = math.log2(int(config["num_warps"])) - 2
            median = 1e-5 * (1 + b * b + 0.5 * w * w + 0.1 * int(config["unroll"]))
            db.record_trial(
                kernel=kernel.name,
                source_hash=kernel.source_hash,
                device=CPU,
                features=features,
                trial=Trial(config, "ok", median),
            )


def test_leave_one_out_holds_each_exhaustive_problem_out_in_turn(kernel, tmp_path: Path) -> None:
    replay = _load("tune_replay")
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    for n in (512, 1024, 2048):
        _record(url, kernel, n)
    with PerfDatabase(url) as db:  # a problem measured only in part cannot be scored
        db.record_trial(
            kernel=kernel.name,
            source_hash=kernel.source_hash,
            device=CPU,
            features={"N": 4096, "dtype": "float32"},
            trial=Trial({"BLOCK": 256, "num_warps": 4, "unroll": 1}, "ok", 1e-5),
        )
    cases = replay.leave_one_out([kernel.name], [tmp_path / "runs.db"], tmp_path)
    assert sorted(c["shape"]["N"] for c in cases) == [512, 1024, 2048]
    for case in cases:
        # the other three problems trained it (the partial one too); the held-out one scored it
        assert case["training_shapes"] == 3 and case["dtype"] == "float32"
        for column in ("nearest_database", "consensus_database", "consensus_shipped"):
            assert 0 < case[column]["quality"] <= 1.0
    # the middle shape's best block (N / 8 = 128) lies between its neighbours' (64, 256)
    middle = next(c for c in cases if c["shape"]["N"] == 1024)
    assert middle["consensus_database"]["config"]["BLOCK"] in (64, 256)
    summary = replay.summarise(cases)["consensus_database"]
    assert summary["cases"] == 3 and 0 < summary["min"] <= summary["geomean"] <= 1.0


# The H100 norm backward, in miniature: the best config changes between the row lengths an octave
# apart (X at N=1024, Z at N=4096), and the held-out N=2048's best, Y, is a poor second at both;
# tuned shapes half an octave from it (N=1536, N=3072) rate Y best.
X = {"BLOCK": 128, "num_warps": 4, "unroll": 1}
Y = {"BLOCK": 256, "num_warps": 4, "unroll": 2}
Z = {"BLOCK": 512, "num_warps": 8, "unroll": 4}
OCTAVES = {
    1024: {"X": 1.00e-5, "Y": 1.25e-5, "Z": 1.30e-5},
    4096: {"X": 4.8e-5, "Y": 4.9e-5, "Z": 4.0e-5},
}
HALF_OCTAVES = {
    1536: {"X": 1.6e-5, "Y": 1.5e-5, "Z": 1.9e-5},
    3072: {"X": 3.5e-5, "Y": 3.0e-5, "Z": 3.2e-5},
}
TARGET = {"X": 2.6e-5, "Y": 2.0e-5, "Z": 2.5e-5}
"""Held-out N=2048: X and Z reach 0.77 and 0.80 of Y's speed."""


@pytest.fixture
def wide_kernel() -> Iterator:
    k = register_tunable(make_synthetic("density_synthetic"), replace=True)
    yield k
    unregister_tunable(k.name)


def _fill(url: str, kernel, problems: Mapping[int, Mapping[str, float]]) -> None:
    configs = {"X": X, "Y": Y, "Z": Z}
    with PerfDatabase(url) as db:
        for n, medians in problems.items():
            for name, median in medians.items():
                db.record_trial(
                    kernel=kernel.name,
                    source_hash=kernel.source_hash,
                    device=CPU,
                    features={"N": n, "dtype": "float32"},
                    trial=Trial(configs[name], "ok", median),
                )


def _quality(config: Mapping[str, object]) -> float:
    name = {"X": X, "Y": Y, "Z": Z}
    chosen = next(k for k, v in name.items() if v == dict(config))
    return min(TARGET.values()) / TARGET[chosen]


@pytest.mark.parametrize("selection", ["consensus", "nearest"])
def test_half_octave_training_shapes_fix_a_pick_the_octave_neighbours_get_wrong(
    wide_kernel, tmp_path: Path, selection: str
) -> None:
    target = {"N": 2048, "dtype": "float32"}
    default = {"BLOCK": 64, "num_warps": 2, "unroll": 1}
    sparse = f"sqlite:///{tmp_path / 'octaves.db'}"
    _fill(sparse, wide_kernel, OCTAVES)
    lookup = ConfigLookup(database_url=sparse, shipped_dir=tmp_path, selection=selection)
    old = lookup.config_for(wide_kernel.name, target, default, device="cpu")
    assert old in (X, Z) and _quality(old) < 0.95
    dense = f"sqlite:///{tmp_path / 'dense.db'}"
    _fill(dense, wide_kernel, {**OCTAVES, **HALF_OCTAVES})
    lookup = ConfigLookup(database_url=dense, shipped_dir=tmp_path, selection=selection)
    new = lookup.config_for(wide_kernel.name, target, default, device="cpu")
    assert new == Y and _quality(new) >= 0.95
    origin = lookup.origin(wide_kernel.name, target, device="cpu")
    assert "'N': 1536" in origin or "'N': 3072" in origin  # a half-octave shape was nearest


def _report(commit: str, kernel: str, wall: float, device: str = "GPU/sm_90") -> dict:
    return {
        "benchmark": "tune_bench",
        "complete": True,
        "device_fingerprint": device,
        "environment_fingerprint": {"git_commit": commit, "torch": "2.11", "triton": "3.6"},
        "arguments": {"budget": 60.0, "kernels": [kernel], "budget_kernels": [kernel]},
        "method": {"budget_kernels": [kernel]},
        "wall_s": wall,
        "max_wall_s": 450.0,
        "skipped": [{"what": "training shape", "kernel": kernel, "at_s": 1.0}]
        if wall > 300
        else [],
        "shipped_file": None,
        "results": [
            {
                "kernel": kernel,
                "dtype": "bfloat16",
                "train": [],
                "summary": {},
                "heldout": [
                    {
                        "shape": {"M": 4, "N": 8},
                        "features": {"M": 4, "N": 8, "dtype": "bfloat16"},
                        "exhaustive": {"valid_configs": 3},
                        "nearest_quality": 0.97,
                        "default_quality": 0.9,
                    }
                ],
            }
        ],
    }


def test_parts_of_a_tuning_run_merge_into_one_report_and_render(tmp_path: Path) -> None:
    merge = _load("tune_merge")
    table = _load("tune_table")
    norms, blueprints = _report("abc", "rms_norm.bwd", 200.0), _report("abc", "blueprint.k", 350.0)
    merged = merge.merge_runs([("norms.json", norms), ("blueprints.json", blueprints)])
    assert [r["kernel"] for r in merged["results"]] == ["rms_norm.bwd", "blueprint.k"]
    assert merged["wall_s"] == 550.0 and merged["complete"] is True
    assert [p["report"] for p in merged["parts"]] == ["norms.json", "blueprints.json"]
    assert merged["method"]["budget_kernels"] == ["blueprint.k", "rms_norm.bwd"]
    assert len(merged["skipped"]) == 1
    rendered = table.render(merged)
    assert "run in 2 parts (one device call each) that took 200 s + 350 s" in rendered
    assert "| rms_norm.bwd | bfloat16 | M=4 N=8 |" in rendered
    assert "| blueprint.k | bfloat16 | M=4 N=8 |" in rendered
    assert "nearest match >= 0.95 of exhaustive: 2/2 shapes" in rendered
    assert merge.heldout_problems(merged) == [
        ("rms_norm.bwd", {"M": 4, "N": 8, "dtype": "bfloat16"}),
        ("blueprint.k", {"M": 4, "N": 8, "dtype": "bfloat16"}),
    ]


@pytest.mark.parametrize(
    ("other", "match"),
    [
        (_report("def", "blueprint.k", 1.0), "git_commit 'def' differs"),
        (_report("abc", "blueprint.k", 1.0, device="other/sm_80"), "device 'other/sm_80'"),
        (_report("abc", "rms_norm.bwd", 1.0), "already tuned in norms.json"),
        ({"benchmark": "bench"}, "expected a tune_bench report"),
    ],
)
def test_parts_from_other_runs_are_refused(other: dict, match: str) -> None:
    merge = _load("tune_merge")
    with pytest.raises(ValueError, match=match):
        merge.merge_runs([("norms.json", _report("abc", "rms_norm.bwd", 1.0)), ("x", other)])
    with pytest.raises(ValueError, match="at least one"):
        merge.merge_runs([])


def test_merge_command_joins_part_directories_and_their_shipped_files(tmp_path: Path) -> None:
    merge = _load("tune_merge")
    for part, kernel in (("norms", "rms_norm.bwd"), ("blueprints", "blueprint.k")):
        directory = tmp_path / part
        directory.mkdir()
        report = _report("abc", kernel, 10.0)
        report["shipped_file"] = "shipped-gpu.json"
        (directory / "tune_bench.json").write_text(json.dumps(report))
        shipped = {
            "format": "warpforge.tune.configs",
            "version": 2,
            "kernels": {
                kernel: [
                    {"source_hash": "h", "device": "GPU/sm_90", "features": {"M": 1, "N": 2},
                     "config": {"B": 1}, "measured": [{"config": {"B": 1}, "relative": 1.0}]}
                ]
            },
        }  # fmt: skip
        (directory / "shipped-gpu.json").write_text(json.dumps(shipped))
    out = tmp_path / "merged"
    assert (
        merge.main(["runs", str(out), str(tmp_path / "norms"), str(tmp_path / "blueprints")]) == 0
    )
    document = json.loads((out / "tune_bench.json").read_text())
    assert document["shipped_file"] == "shipped-gpu.json" and len(document["results"]) == 2
    kernels = json.loads((out / "shipped-gpu.json").read_text())["kernels"]
    assert set(kernels) == {"rms_norm.bwd", "blueprint.k"}
    # composing a shipped file: the runs' held-out shapes are left out
    (tmp_path / "held.json").write_text(
        json.dumps(_report("abc", "rms_norm.bwd", 1.0) | {"results": [
            {"kernel": "rms_norm.bwd", "dtype": "bfloat16", "train": [], "summary": {},
             "heldout": [{"shape": {"M": 1, "N": 2}, "features": {"M": 1, "N": 2}}]}
        ]})
    )  # fmt: skip
    composed = tmp_path / "composed.json"
    argv = ["shipped", str(composed), str(out / "shipped-gpu.json"),
            "--exclude-heldout", str(tmp_path / "held.json")]  # fmt: skip
    assert merge.main(argv) == 0
    assert set(json.loads(composed.read_text())["kernels"]) == {"blueprint.k"}
