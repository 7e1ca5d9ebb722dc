"""The tuning benchmark and its GPU script run end to end on the CPU, so neither can rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tune_synthetic import WRONG_BUT_FAST, make_synthetic

from script_module import load_script
from warpforge.tune.lookup import ConfigLookup
from warpforge.tune.tunable import register_tunable, unregister_tunable

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "tune_bench.py"
SCRIPT = ROOT / "scripts" / "gpu" / "tune_check.sh"
TABLE = ROOT / "scripts" / "tune_table.py"
REPLAY = ROOT / "scripts" / "tune_replay.py"


def _load(path: Path):
    return load_script(str(path.relative_to(ROOT)))


@pytest.fixture
def bench():
    return _load(BENCH)


@pytest.fixture
def synthetic() -> Iterator[str]:
    kernel = make_synthetic("bench_synthetic")
    kernel = type(kernel)(
        **{**kernel.__dict__, "sweep": tuple({"N": n} for n in (512, 1024, 4096, 8192))}
    )
    register_tunable(kernel, replace=True)
    yield kernel.name
    unregister_tunable(kernel.name)


FAST = ["--device", "cpu", "--trial-time", "0.002", "--retime-time", "0.002",
        "--min-samples", "2", "--max-samples", "4", "--input-sets", "1"]  # fmt: skip


def test_bench_writes_json_with_fingerprint_qualities_and_shipped_file(
    bench, synthetic: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WARPFORGE_TUNE_DB", "0")  # as the GPU script sets it: ops must not look
    args = ["--out", str(tmp_path), "--kernels", synthetic, "--budget", "0.05", *FAST]
    assert bench.main(args) == 0
    document = json.loads((tmp_path / "tune_bench.json").read_text())
    assert document["environment_fingerprint"]["torch"]
    assert document["complete"] is True and document["skipped"] == []
    assert document["method"]["budget_kernels"] == [synthetic]
    (result,) = document["results"]
    assert [e["shape"]["N"] for e in result["train"]] == [512, 4096, 8192]
    assert [e["shape"]["N"] for e in result["heldout"]] == [1024]
    for entry in result["heldout"]:
        assert entry["exhaustive"]["best_config"] not in (None, WRONG_BUT_FAST)
        assert entry["exhaustive"]["status_counts"]["incorrect"] == 1
        assert entry["exhaustive"]["covered_space"] is True
        # the bench's own database was read, whatever WARPFORGE_TUNE_DB says
        assert entry["nearest_origin"].startswith("database consensus of 3 nearest")
        assert entry["nearest_quality"] > 0 and entry["budget_quality"] > 0
        # the lookup's own cost: one database query, then cached answers (timed, not asserted)
        latency = entry["lookup_latency"]
        assert latency["db_queries"] == 1 and latency["cached_samples"] == bench.LOOKUP_SAMPLES
        assert 0 < latency["cached_p50_us"] <= latency["cached_p99_us"] <= latency["cached_max_us"]
        assert set(entry["retimed"]) == {
            "exhaustive", "nearest", "nearest_single", "refined", "default", "budgeted"
        }  # fmt: skip
        assert entry["nearest_single_quality"] > 0  # the rule before the consensus, re-timed too
        assert entry["budgeted"]["elapsed_s"] > 0
        # the refinement starts from the training shapes' configs carried over, the nearest first
        assert entry["refine_seeds"][0] == entry["nearest_config"]
        assert entry["refine_seeds"][-1] == entry["default_config"]  # as tune --refine seeds it
        assert 1 <= entry["refined"]["trials"] <= 12 and entry["refined_quality"] > 0
        assert entry["refined"]["status_counts"]["incorrect"] <= 1
        (evidence,) = entry["budget_evidence"]  # no --short-budget asked
        assert evidence["search"] == "budget"
        assert evidence["valid_configs"] == entry["exhaustive"]["valid_configs"]
        assert evidence["configs_tried"] == entry["budgeted"]["trials"]
        assert evidence["best_over_exhaustive_best"] == entry["budget_quality"]
        if entry["budgeted"]["covered_space"]:
            assert evidence["exhaustive_cold_wall_s"] == entry["budgeted"]["elapsed_s"]
        else:  # no --cold-exhaustive asked: the cold exhaustive time is unknown
            assert evidence["exhaustive_cold_wall_s"] is None
        assert evidence["budget_below_exhaustive"] is False
        replay = {r["fraction"]: r for r in entry["budget_replay"]}
        assert set(replay) == {0.25, 0.5}
        assert replay[0.5]["max_trials"] == entry["exhaustive"]["valid_configs"] // 2
        assert 0 < replay[0.25]["quality_min"] <= replay[0.25]["quality_median"] <= 1.0
        assert replay[0.5]["seeds"] == 20
    assert result["summary"]["nearest_match"]["shapes"] == 1
    assert result["summary"]["nearest_single"]["shapes"] == 1
    assert result["summary"]["refined_match"]["shapes"] == 1
    table = _load(TABLE).render(document)
    assert "single nearest (old rule) >= 0.95 of exhaustive: " in table
    assert f"| {synthetic} | float32 | N=1024 |" in table
    assert "nearest match >= 0.95 of exhaustive: " in table
    assert "refined match >= 0.95 of exhaustive: " in table
    assert f"| {synthetic} | N=1024 | 0.05 s, this process, before any other compile |" in table
    assert "cap 25%: trials: min / median / seeds within 3%" in table
    # The training shapes' exhaustive bests are exported for shipping, never the held-out one
    # (a later nearest-match check on it must not find it shipped).
    shipped = tmp_path / document["shipped_file"]
    entries = json.loads(shipped.read_text())["kernels"][synthetic]
    assert sorted(e["features"]["N"] for e in entries) == [512, 4096, 8192]
    assert all(e["measured"][0] == {"config": e["config"], "relative": 1.0} for e in entries)

    # The offline replay reads this run's databases and scores every rule from its trials.
    replay_out = tmp_path / "replay.json"
    assert _load(REPLAY).main([str(tmp_path / "tune_bench.json"), "--databases",
                               str(tmp_path / "tune.db"), "--out", str(replay_out)]) == 0  # fmt: skip
    replay = json.loads(replay_out.read_text())
    (case,) = replay["cases"]
    assert case["kernel"] == synthetic and case["shape"] == {"N": 1024}
    assert case["training_shapes"] == 3
    assert case["consensus_database"]["config"] == entry["nearest_config"]
    assert case["nearest_database"]["config"] == entry["nearest_single_config"]
    assert case["gpu_run"]["config"] == entry["nearest_config"]
    for column in (
        "nearest_database",
        "consensus_database",
        "nearest_shipped",
        "consensus_shipped",
    ):
        assert 0 < case[column]["quality"] <= 1.0
        assert replay["summary"][column]["cases"] == 1


def test_wall_time_bound_skips_and_says_so(bench, synthetic: str, tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--kernels", synthetic, "--budget", "0", "--max-wall",
            "0.001", "--reserve", "0", *FAST]  # fmt: skip
    assert bench.main(args) == 0
    document = json.loads((tmp_path / "tune_bench.json").read_text())
    skipped = {(s["what"], s["shape"]["N"]) for s in document["skipped"]}
    assert skipped == {("training shape", 512), ("training shape", 4096), ("training shape", 8192)}
    assert document["results"][0]["train"] == []


def test_given_shapes_go_to_the_kernels_whose_sizes_they_name(bench, synthetic: str) -> None:
    args = bench.parse_args(
        ["--out", "x", "--kernels", synthetic, "rms_norm.fwd", "--train", "N=64",
         "--heldout", "N=128", "--train", "M=4,N=8", "--heldout", "M=2,N=8"]
    )  # fmt: skip
    from warpforge.tune.tunable import get_tunable

    assert bench.split_shapes(get_tunable(synthetic), args) == ([{"N": 64}], [{"N": 128}])
    assert bench.split_shapes(get_tunable("rms_norm.fwd"), args) == (
        [{"M": 4, "N": 8}],
        [{"M": 2, "N": 8}],
    )


def test_kernel_patterns_expand_and_unknown_names_fail(bench) -> None:
    names = bench.expand_kernel_names(["rms_norm.*", "blueprint.mlp_block.*", "rms_norm.fwd"])
    assert names == [
        "rms_norm.bwd",
        "rms_norm.fwd",
        "blueprint.mlp_block.k0_linear_gelu",
        "blueprint.mlp_block.k1_linear_add",
    ]
    with pytest.raises(SystemExit, match="matches no registered tunable"):
        bench.expand_kernel_names(["no_such_kernel.*"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--budget", "-1"], "--budget"),
        (["--max-wall", "0"], "--max-wall"),
        (["--train", "M=x"], "--train"),
        ([], "--kernels"),
    ],
)
def test_bad_arguments_are_refused(bench, argv: list[str], message: str, capsys) -> None:
    kernels = [] if not argv else ["--kernels", "rms_norm.fwd"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", "x", *kernels, *argv])
    assert message in capsys.readouterr().err


def test_device_slug_is_a_file_name(bench) -> None:
    assert bench.device_slug("NVIDIA H100 80GB HBM3/sm_90") == "nvidia-h100-80gb-hbm3-sm_90"


def test_gpu_script_smoke_resolves_the_plan_runs_and_ships(tmp_path: Path) -> None:
    """``tune_check.sh --smoke``: the GPU plan resolves (names, shapes, spaces), a few kernels run
    under the interpreter with a compile-ahead worker, and the exported file feeds the lookup."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        ["bash", str(SCRIPT), str(out), "--smoke"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    logs = {p.name: p.read_text() for p in out.glob("*.log")}
    assert done.returncode == 0, (done.stdout, done.stderr, logs)
    plan = json.loads((out / "plan.json").read_text())
    planned = {row["kernel"] for row in plan["searches"]}
    assert {"rms_norm.bwd", "add_rms_norm.fwd", "layer_norm.bwd"} <= planned
    assert sum(name.startswith("blueprint.") for name in planned) >= 10
    assert all(row["valid_configs"] > 0 for row in plan["searches"]), plan
    assert sum(row["budget"] for row in plan["searches"]) == 2

    document = json.loads((out / "tune_bench.json").read_text())
    assert document["compile_ahead"]["configs_run"] > 0
    assert not document["compile_ahead"]["broke"]
    by_kernel = {r["kernel"]: r for r in document["results"]}
    matmul = by_kernel["blueprint.layernorm_linear_gelu.k1_linear_gelu"]["heldout"][0]
    assert "budget_quality" in matmul and "refined_quality" in matmul
    # the 0.2 s search runs in a fresh process when the 0.5 s one took longer than 0.2 s; the
    # exhaustive one (stopped after 1 s) when the 0.5 s one could not try every config
    searches = {row["search"]: row for row in matmul["budget_evidence"]}
    budget = searches["budget"]
    assert budget["budget_s"] == 0.5 and budget["configs_tried"] == matmul["budgeted"]["trials"]
    assert ("short" in searches) == (matmul["budgeted"]["elapsed_s"] > 0.2)
    if "short" in searches:
        assert searches["short"]["budget_s"] == 0.2 and searches["short"]["configs_tried"] >= 1
        assert "short_budget_quality" in matmul
    if budget["covered_space"]:
        assert budget["exhaustive_cold_source"] == "the budgeted search tried every valid config"
    else:
        assert matmul["budgeted"]["exhaustive_cold"]["strategy"] == "exhaustive"
        assert budget["exhaustive_cold_source"] in (None, "exhaustive search in a fresh process")
    assert not (set(out.glob("wf-probe-*/triton")) | set(out.glob("wf-probe-*/cache")))
    fused = by_kernel["add_rms_norm.fwd"]["heldout"][0]
    assert "nearest_quality" in fused
    # M=5,N=37's best carried over to M=3,N=130 (a whole-row block of 64 becomes 256)
    assert fused["nearest_origin"].startswith("database consensus of 1 nearest"), fused

    shipped = out / document["shipped_file"]
    entry = json.loads(shipped.read_text())["kernels"]["add_rms_norm.fwd"][0]
    lookup = ConfigLookup(shipped_dir=shipped.parent, use_database=False)
    assert (
        lookup.config_for("add_rms_norm.fwd", entry["features"], {}, device="cpu")
        == (entry["config"])
    )


def test_probe_runs_one_exhaustive_search_and_stops_at_its_limit(
    bench, synthetic: str, tmp_path: Path
) -> None:
    def probe(limit: str) -> dict:
        args = ["--out", str(tmp_path), "--probe", synthetic, "--probe-shape",
                "N=1024", "--probe-limit", limit, *FAST]  # fmt: skip
        assert bench.main(args) == 0
        return json.loads((tmp_path / "probe.json").read_text())

    whole = probe("1000")
    assert whole["finished"] is True and whole["trials"] == whole["valid_configs"] > 10
    assert whole["status_counts"] == {"ok": whole["trials"] - 2, "incorrect": 1, "error": 1}
    assert whole["best_config"] != WRONG_BUT_FAST and whole["search_wall_s"] > 0
    stopped = probe("0")
    assert stopped["finished"] is False and stopped["trials"] == 1


def test_probes_run_in_a_fresh_process(bench, tmp_path: Path) -> None:
    from warpforge.tune.tunable import get_tunable

    args = bench.parse_args(
        ["--out", str(tmp_path), "--kernels", "rms_norm.fwd", "--cold-exhaustive", "0", *FAST]
    )
    bench_run = bench.Bench(args)
    kernel = get_tunable("rms_norm.fwd")
    import torch

    cold = bench_run.probe(kernel, {"M": 3, "N": 130}, torch.float32, budget_s=0, limit_s=0)
    assert "failure" not in cold, cold
    assert cold["kernel"] == "rms_norm.fwd" and cold["shape"] == {"M": 3, "N": 130}
    assert cold["finished"] is False and cold["trials"] == 1  # stopped at its 0 s limit
    assert cold["process_wall_s"] >= cold["search_wall_s"] > 0
    short = bench_run.probe(kernel, {"M": 3, "N": 130}, torch.float32, budget_s=0.5, limit_s=0)
    assert "failure" not in short, short
    assert short["strategy"] == "budgeted" and short["budget_s"] == 0.5
    assert short["finished"] is True and short["best_config"] is not None
    assert 1 <= short["trials"] <= short["valid_configs"]
    assert len(list(tmp_path.glob("wf-probe-*/probe.json"))) == 2


def _search(trials: int, valid: int, wall: float, **extra) -> dict:
    return {"trials": trials, "valid_configs": valid, "covered_space": trials >= valid,
            "elapsed_s": wall, **extra}  # fmt: skip


def test_budget_evidence_compares_each_budget_with_a_cold_exhaustive_search(bench) -> None:
    # The 60 s search tried all 56 configs in 48 s: that was the cold exhaustive search; the 20 s
    # one (a probe: search_wall_s, no elapsed_s) tried 20 of them.
    short = {"trials": 20, "valid_configs": 56, "covered_space": False, "search_wall_s": 21.0,
             "budget_s": 20.0}  # fmt: skip
    covered = {**_search(56, 56, 48.0, budget_s=60.0), "short": short}
    rows = bench.budget_evidence(covered, {"budget": 1.0, "short": 0.99})
    assert [r["search"] for r in rows] == ["budget", "short"]
    assert rows[0]["exhaustive_cold_wall_s"] == rows[1]["exhaustive_cold_wall_s"] == 48.0
    assert rows[0]["budget_below_exhaustive"] is False  # it covered the space
    assert rows[1]["budget_below_exhaustive"] is True
    assert (rows[1]["configs_tried"], rows[1]["budget_wall_s"]) == (20, 21.0)
    assert rows[1]["best_over_exhaustive_best"] == 0.99

    # 60 s tried 70 of 200; the cold exhaustive search finished in 150 s, or was stopped at 90 s.
    finished = {"finished": True, "search_wall_s": 150.0, "trials": 200}
    partial = _search(70, 200, 60.5, budget_s=60.0, exhaustive_cold=finished)
    (row,) = bench.budget_evidence(partial, {"budget": 0.98})
    assert row["exhaustive_cold_wall_s"] == 150.0 and row["budget_below_exhaustive"] is True
    stopped = {**partial, "exhaustive_cold": {"finished": False, "search_wall_s": 90.0}}
    (row,) = bench.budget_evidence(stopped, {"budget": 0.98})
    assert row["exhaustive_cold_wall_s"] is None
    assert row["exhaustive_cold_stopped_after_s"] == 90.0 and row["budget_below_exhaustive"]
    unknown = _search(70, 200, 60.5, budget_s=60.0)  # no cold search asked: proves nothing
    (row,) = bench.budget_evidence(unknown, {"budget": 0.98})
    assert row["exhaustive_cold_source"] is None and row["budget_below_exhaustive"] is False


def test_gpu_script_parts_split_the_plan_and_hold_the_norms_shapes_out(tmp_path: Path) -> None:
    """``tune_check.sh OUT norms`` and ``... blueprints`` (two device calls) plan exactly the
    kernels of the whole run between them, one budget kernel each; the norms train on 5 row
    lengths and hold out one that is none of them. An unknown part is refused."""
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "src")}
    plans = {}
    for part in ("norms", "blueprints", "all"):
        done = subprocess.run(
            ["bash", str(SCRIPT), str(tmp_path / part), part],
            cwd=ROOT, env={**env, "TUNE_PLAN_ONLY": "1"}, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert not (tmp_path / part / "tune_bench.json").exists()  # planned, nothing run
        plans[part] = json.loads((tmp_path / part / "plan.json").read_text())["searches"]
    kernels = {part: {row["kernel"] for row in rows} for part, rows in plans.items()}
    assert kernels["norms"] | kernels["blueprints"] == kernels["all"]
    assert not kernels["norms"] & kernels["blueprints"]
    assert all(not k.startswith("blueprint.") for k in kernels["norms"])
    assert len(kernels["blueprints"]) >= 10
    for part in ("norms", "blueprints"):
        assert len({row["kernel"] for row in plans[part] if row["budget"]}) == 1
    norm_rows = [row for row in plans["norms"] if row["kernel"] == "rms_norm.bwd"]
    train = {row["shape"]["N"] for row in norm_rows if row["role"] == "train"}
    heldout = [row["shape"] for row in norm_rows if row["role"] == "heldout"]
    assert train == {1024, 4096, 6144, 12288, 16384} and heldout == [{"M": 4096, "N": 8192}]
    refused = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "x"), "everything"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "norms|blueprints|all" in refused.stderr
    assert not (tmp_path / "x").exists()
