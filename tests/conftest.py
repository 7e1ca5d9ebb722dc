"""Test tiers: CPU tests run Triton kernels under the interpreter; `gpu` tests need CUDA.

TRITON_INTERPRET must be set before triton is imported, which is why this runs first.
"""

from __future__ import annotations

import os

import pytest
import torch

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")


def pytest_report_header(config: pytest.Config) -> list[str]:
    mode = "CUDA" if CUDA else "CPU, Triton interpreter (gpu tests skip)"
    return [f"warpforge test tier: {mode}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tier's skips, each with its reason: ``gpu`` tests without CUDA; ``interpreter`` tests
    (CPU tensors through Triton's interpreter, which is chosen for the whole process when Triton
    is imported) with it."""
    if CUDA:
        marker = "interpreter"
        reason = (
            "interpreter: needs Triton's CPU interpreter, off in a process with CUDA (CPU tier)"
        )
    else:
        marker, reason = "gpu", "gpu: needs a CUDA device (none here)"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if marker in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> torch.device:
    """The device kernels are tested on: CUDA when present, else CPU under the interpreter."""
    return torch.device("cuda" if CUDA else "cpu")


@pytest.fixture
def cpu_float_dtypes() -> tuple[torch.dtype, ...]:
    """Dtypes tested on this tier: bf16 loads are wrong under Triton's CPU interpreter."""
    return (
        (torch.float32, torch.float16, torch.bfloat16) if CUDA else (torch.float32, torch.float16)
    )


def _require_service(env_var: str, what: str) -> str:
    """The server address from ``env_var``; skip without it, but fail under CI (CI=true)."""
    value = os.environ.get(env_var)
    if value:
        return value
    message = f"{what} unavailable ({env_var} unset; `make test` starts it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of the PostgreSQL server that scripts/test_services.sh started."""
    return _require_service("WARPFORGE_TEST_PG_URL", "PostgreSQL")


@pytest.fixture(scope="session")
def redis_server_binary() -> str:
    """Path of redis-server; tests start (and stop) their own servers with it."""
    return _require_service("WARPFORGE_TEST_REDIS_SERVER", "redis-server")
