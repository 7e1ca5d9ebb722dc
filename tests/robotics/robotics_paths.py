"""Which CPU execution path a robotics test runs: the Triton interpreter or the reference."""

from __future__ import annotations

import pytest

from warpforge.runtime import interpreter_enabled

# Triton reads TRITON_INTERPRET when a kernel module is imported: with a GPU (no interpreter at
# start-up) the kernels are compiled for CUDA and cannot run on CPU tensors.
INTERPRETER = interpreter_enabled()


def use_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run CPU tensors through the Triton interpreter, or skip where this tier cannot."""
    if not INTERPRETER:
        pytest.skip("the Triton interpreter path runs in the CPU tier (GPU tier: test_*_gpu.py)")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def use_torch_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run CPU tensors through the PyTorch reference path."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("WARPFORGE_INTERPRET", "0")
