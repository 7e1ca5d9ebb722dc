"""One execution policy for every warpforge kernel, and the device's capabilities.

Every op asks :func:`execution_path` how to run instead of deciding for itself:

* a CUDA tensor runs the compiled Triton kernel;
* a CPU tensor runs the *same* Triton kernel under Triton's interpreter when interpretation
  was asked for (``WARPFORGE_INTERPRET=1`` or ``TRITON_INTERPRET=1``; the test suite sets it);
* otherwise a CPU tensor runs the op's PyTorch reference path, which has identical semantics.

Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, so :func:`_sync_interpreter_flag`
runs at ``import warpforge`` (before any kernel module is imported) and mirrors
``WARPFORGE_INTERPRET`` into it.
"""

from __future__ import annotations

import enum
import functools
import os
from dataclasses import dataclass

import torch

_TRUE = {"1", "true", "yes", "on"}


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to 1, true, yes or on (any case)."""
    return os.environ.get(name, "").strip().lower() in _TRUE


def _sync_interpreter_flag() -> None:
    if env_flag("WARPFORGE_INTERPRET") and not env_flag("TRITON_INTERPRET"):
        os.environ["TRITON_INTERPRET"] = "1"


_sync_interpreter_flag()


class ExecutionPath(enum.Enum):
    """How an op runs for a given device."""

    TRITON_GPU = "triton-gpu"
    TRITON_INTERPRETER = "triton-interpreter"
    TORCH_REFERENCE = "torch-reference"


def switch_on(name: str) -> bool:
    """A switch that is on unless the environment variable ``name`` is 0, false, no or off
    (read at each call, so tests and sweeps can flip it)."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def interpreter_enabled() -> bool:
    """True when Triton kernels run under Triton's CPU interpreter."""
    return env_flag("TRITON_INTERPRET") or env_flag("WARPFORGE_INTERPRET")


def checks_enabled() -> bool:
    """True when ``WARPFORGE_CHECKS=1`` asks for device-side input checks (e.g. target ranges)."""
    return env_flag("WARPFORGE_CHECKS")


def execution_path(device: torch.device | str) -> ExecutionPath:
    """The one decision of how a kernel runs on ``device``."""
    device = torch.device(device)
    if device.type == "cuda":
        return ExecutionPath.TRITON_GPU
    if device.type == "cpu":
        return (
            ExecutionPath.TRITON_INTERPRETER
            if interpreter_enabled()
            else ExecutionPath.TORCH_REFERENCE
        )
    raise ValueError(
        f"device: expected a 'cuda' or 'cpu' device, got {str(device)!r}; "
        "warpforge kernels run on NVIDIA GPUs, with a CPU path for testing"
    )


def uses_triton(device: torch.device | str) -> bool:
    """True when ``device`` runs Triton kernels (compiled or interpreted)."""
    return execution_path(device) is not ExecutionPath.TORCH_REFERENCE


@dataclass(frozen=True)
class DeviceCapabilities:
    """What a kernel may assume about the device it runs on."""

    name: str
    compute_capability: tuple[int, int] | None
    sm_count: int | None
    l2_bytes: int | None
    total_memory_bytes: int | None
    max_shared_memory_per_block: int | None

    @property
    def is_gpu(self) -> bool:
        return self.compute_capability is not None

    @property
    def arch(self) -> str:
        """Architecture tag used in cache keys, e.g. ``sm_90`` or ``cpu``."""
        if self.compute_capability is None:
            return "cpu"
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def has_tma(self) -> bool:
        """Hopper (sm_90) and newer have the bulk tensor copy engine (TMA)."""
        return self.compute_capability is not None and self.compute_capability >= (9, 0)

    @property
    def has_wgmma(self) -> bool:
        return self.compute_capability is not None and self.compute_capability[0] == 9

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "arch": self.arch,
            "compute_capability": (
                ".".join(map(str, self.compute_capability)) if self.compute_capability else None
            ),
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "total_memory_bytes": self.total_memory_bytes,
            "max_shared_memory_per_block": self.max_shared_memory_per_block,
            "has_tma": self.has_tma,
            "has_wgmma": self.has_wgmma,
        }


def _cpu_capabilities() -> DeviceCapabilities:
    import platform

    return DeviceCapabilities(
        name=platform.processor() or platform.machine() or "cpu",
        compute_capability=None,
        sm_count=None,
        l2_bytes=None,
        total_memory_bytes=None,
        max_shared_memory_per_block=None,
    )


@functools.cache
def _cuda_capabilities(index: int) -> DeviceCapabilities:
    props = torch.cuda.get_device_properties(index)
    shared = getattr(props, "shared_memory_per_block_optin", None)
    return DeviceCapabilities(
        name=props.name,
        compute_capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
        total_memory_bytes=props.total_memory,
        max_shared_memory_per_block=shared,
    )


def device_capabilities(device: torch.device | str | None = None) -> DeviceCapabilities:
    """Capabilities of ``device`` (default: the current CUDA device, else the CPU)."""
    if device is None:
        device = torch.device("cuda", torch.cuda.current_device()) if cuda_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _cuda_capabilities(index)
    return _cpu_capabilities()


def cuda_available() -> bool:
    return torch.cuda.is_available()


def default_device() -> torch.device:
    """The device benchmarks and examples use: CUDA when present, else the CPU."""
    return torch.device("cuda") if cuda_available() else torch.device("cpu")


def command_device() -> torch.device:
    """The device a command-line tool runs kernels on: CUDA when present; else the CPU, with
    Triton's interpreter switched on unless the environment says otherwise (call it before any
    kernel module is imported: Triton reads the switch when a kernel is defined)."""
    if cuda_available():
        return torch.device("cuda")
    os.environ.setdefault("WARPFORGE_INTERPRET", "1")
    os.environ.setdefault("TRITON_INTERPRET", "1")
    return torch.device("cpu")
