"""The KernelBench-style problem set in benchmarks/kernelbench: every honest candidate passes.

On CPU each pair runs at its small size under Triton's interpreter (float32); on the GPU the
same test runs the full sizes in bf16.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from warpforge.harness import audit, suite, verify

KERNELBENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "kernelbench"
PAIRS = suite.discover_pairs(KERNELBENCH)


def test_problem_set_has_at_least_ten_pairs() -> None:
    assert len(PAIRS) >= 10
    names = {p.name for p in PAIRS}
    assert {"matmul", "softmax", "layer_norm", "row_sum", "bias_gelu"} <= names


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_candidate_passes_strict_audit(pair: suite.Pair) -> None:
    assert audit.audit_source(pair.candidate.read_text()) == []


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p.name)
def test_honest_candidate_verifies(pair: suite.Pair) -> None:
    result = verify.verify_pair(pair.reference, pair.candidate)
    assert result.passed, [str(f) for f in result.findings]
    assert result.compute_ops == []
