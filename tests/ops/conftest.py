"""Fixtures shared by the op tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def poison_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every floating ``torch.empty`` buffer starts as NaN, so an element a kernel forgets to
    write shows up as NaN instead of stale memory that happens to hold the right value."""
    real_empty = torch.empty

    def poisoned(*args, **kwargs):
        out = real_empty(*args, **kwargs)
        if out.is_floating_point():
            out.fill_(float("nan"))
        return out

    monkeypatch.setattr(torch, "empty", poisoned)


@pytest.fixture(autouse=True)
def _narrow_plans_not_carried_over():
    """``norm_bwd_narrow_plan`` caches plans read from ``NORM_BWD_NARROW``, which tests replace:
    a plan cached under a replaced table must not reach the next test, even one that failed."""
    yield
    from warpforge.ops import norm

    norm.norm_bwd_narrow_plan.cache_clear()
