"""Fixtures of the robotics tests: which execution path a CPU test exercises."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["interpreter", "torch-reference"])
def cpu_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once through the Triton interpreter and once through the PyTorch reference
    path (the CPU path without interpretation); both must give the same semantics."""
    if request.param == "torch-reference":
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        monkeypatch.setenv("WARPFORGE_INTERPRET", "0")
    else:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    return request.param
