"""scripts/shipped_on_trials.py: a shipped table's configs against another GPU's trials."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from script_module import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "shipped_on_trials.py"


@pytest.fixture(scope="module")
def shipped_on_trials():
    return load_script("scripts/shipped_on_trials.py")


FEATURES = {"M": 4096, "N": 1024, "dtype": "bfloat16"}
SHIPPED = {
    "format": "warpforge.tune.configs",
    "kernels": {
        "rms_norm.fwd": [
            {"config": {"BLOCK_N": 1024, "num_warps": 4}, "device": "H100/sm_90",
             "features": FEATURES},
            {"config": {"BLOCK_N": 256, "num_warps": 1}, "device": "H100/sm_90",
             "features": dict(FEATURES, M=8)},  # not searched on the other GPU
        ],
        "softmax.fwd": [
            {"config": {"BLOCK_N": 64, "num_warps": 1}, "device": "H100/sm_90",
             "features": FEATURES},  # searched, but its config never tried
        ],
    },
}  # fmt: skip


def _trial(kernel, config, median_s, status="ok"):
    return {"kernel": kernel, "config": config, "features": FEATURES, "median_s": median_s,
            "status": status, "device": "H200/sm_90"}  # fmt: skip


TRIALS = {
    "format": "warpforge.tune.trials",
    "trials": [
        _trial("rms_norm.fwd", {"num_warps": 4, "BLOCK_N": 1024}, 12e-6),  # key order differs
        _trial("rms_norm.fwd", {"BLOCK_N": 1024, "num_warps": 2}, 10e-6),
        _trial("rms_norm.fwd", {"BLOCK_N": 512, "num_warps": 1}, 1e-6, status="error"),
        _trial("softmax.fwd", {"BLOCK_N": 128, "num_warps": 2}, 5e-6),
    ],
}


def test_the_shipped_config_is_timed_against_the_best_trial(shipped_on_trials) -> None:
    text = shipped_on_trials.render(SHIPPED, TRIALS)
    assert (
        "| rms_norm.fwd | M=4096 N=1024 | bfloat16 | BLOCK_N=1024 num_warps=2 | 10.00 | 12.00 | 1.200 |"
        in text
    )
    assert (
        "| softmax.fwd | M=4096 N=1024 | bfloat16 | BLOCK_N=128 num_warps=2 | 5.00 | not tried | — |"
        in text
    )
    assert "M=8 " not in text  # a shipped shape the trials never searched has no row
    assert "- shapes: 2; shipped config timed at 1; slowest against the best there: 1.200x" in text


def test_a_kernel_glob_keeps_only_its_kernels(shipped_on_trials) -> None:
    text = shipped_on_trials.render(SHIPPED, TRIALS, "softmax.*")
    assert "rms_norm.fwd" not in text and "| softmax.fwd |" in text


def test_files_of_the_wrong_format_are_refused(tmp_path) -> None:
    shipped, trials = tmp_path / "shipped.json", tmp_path / "trials.json"
    shipped.write_text(json.dumps(SHIPPED))
    trials.write_text(json.dumps(SHIPPED))  # a table where trials belong
    result = subprocess.run([sys.executable, str(SCRIPT), str(shipped), str(trials)],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode != 0 and "expected a 'warpforge.tune.trials' file" in result.stderr
    trials.write_text(json.dumps(TRIALS))
    result = subprocess.run([sys.executable, str(SCRIPT), str(shipped), str(trials)],
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert "| 1.200 |" in result.stdout
