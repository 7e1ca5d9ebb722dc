"""Fixtures of the robotics tests: which execution path a CPU test exercises."""

from __future__ import annotations

import pytest
from robotics_paths import use_interpreter, use_torch_reference


@pytest.fixture(params=["interpreter", "torch-reference"])
def cpu_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once through the Triton interpreter and once through the PyTorch reference
    path (the CPU path without interpretation); both must give the same semantics."""
    if request.param == "torch-reference":
        use_torch_reference(monkeypatch)
    else:
        use_interpreter(monkeypatch)
    return request.param


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    use_interpreter(monkeypatch)


@pytest.fixture
def torch_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    use_torch_reference(monkeypatch)
