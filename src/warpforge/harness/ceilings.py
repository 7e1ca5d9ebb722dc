"""Speed of light: this device's measured copy bandwidth and matmul peak per dtype.

``warpforge ceilings`` measures them with the timing module and caches them per device
fingerprint (GPU name, driver, torch, CUDA) in ``cache_dir()/ceilings.json``. Reports use them
for percent-of-ceiling and the regime; ``bench`` uses them as the floor below which a result is
impossible (more than 5% faster than bytes / copy bandwidth or FLOPs / matmul peak).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from warpforge.atomic_write import write_atomically
from warpforge.harness import timing

IMPOSSIBLE_MARGIN = 0.05
"""A time more than this fraction below the floor is rejected as impossible."""

CACHE_FILE = "ceilings.json"
_DTYPE_NAMES = {
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float64: "fp64",
}


def dtype_key(dtype: torch.dtype) -> str:
    """The ceilings' name for a dtype (``fp32``, ``bf16``...)."""
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@dataclass(frozen=True)
class Ceilings:
    """Measured limits of one device."""

    device: str
    fingerprint: dict[str, Any]
    copy_bytes_per_s: float
    """Large device-to-device copy, bytes read + written per second."""
    matmul_flops_per_s: dict[str, float]
    """Peak matmul FLOP/s per dtype key: fp32 (no TF32), tf32, fp16, bf16, fp8 when available."""
    measured_at: str
    is_gpu: bool
    details: dict[str, Any] = field(default_factory=dict)

    def matmul_peak(self, dtype: torch.dtype) -> float | None:
        """The best matmul rate available to ``dtype`` (fp32 may use TF32), None if unknown."""
        key = dtype_key(dtype)
        if key == "fp32":
            rates = [self.matmul_flops_per_s.get(k) for k in ("fp32", "tf32")]
            present = [r for r in rates if r]
            return max(present) if present else None
        return self.matmul_flops_per_s.get(key)

    def floor_s(
        self, *, bytes_moved: float | None, flops: float | None, dtype: torch.dtype
    ) -> float:
        """The least time the work can take on this device: max of the memory and compute floors."""
        floor = 0.0
        if bytes_moved:
            floor = max(floor, bytes_moved / self.copy_bytes_per_s)
        peak = self.matmul_peak(dtype)
        if flops and peak:
            floor = max(floor, flops / peak)
        return floor

    def ridge_point(self, dtype: torch.dtype) -> float | None:
        """FLOP per byte where the compute and memory roofs meet."""
        peak = self.matmul_peak(dtype)
        return peak / self.copy_bytes_per_s if peak else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "fingerprint": self.fingerprint,
            "copy_bytes_per_s": self.copy_bytes_per_s,
            "matmul_flops_per_s": dict(self.matmul_flops_per_s),
            "measured_at": self.measured_at,
            "is_gpu": self.is_gpu,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ceilings:
        try:
            return cls(
                device=str(data["device"]),
                fingerprint=dict(data["fingerprint"]),
                copy_bytes_per_s=float(data["copy_bytes_per_s"]),
                matmul_flops_per_s={k: float(v) for k, v in data["matmul_flops_per_s"].items()},
                measured_at=str(data["measured_at"]),
                is_gpu=bool(data["is_gpu"]),
                details=dict(data.get("details", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"ceilings: malformed entry ({exc})") from exc


def device_fingerprint(device: torch.device | None = None) -> dict[str, Any]:
    """What the ceilings depend on: device name, driver, torch and CUDA versions."""
    from warpforge import environment, runtime

    device = device or runtime.default_device()
    caps = runtime.device_capabilities(device)
    return {
        "device": caps.name if caps.is_gpu else f"cpu:{caps.name or platform.machine()}",
        "arch": caps.arch,
        "driver": environment.environment_fingerprint()["driver"]
        if device.type == "cuda"
        else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "cpu_threads": torch.get_num_threads() if device.type == "cpu" else None,
    }


def fingerprint_key(fingerprint: dict[str, Any]) -> str:
    return json.dumps(fingerprint, sort_keys=True)


def _rate(work: float, fn: Callable[..., Any], inputs: tuple[Any, ...], max_time_s: float) -> float:
    m = timing.measure(fn, [inputs], cold=False, max_time_s=max_time_s, min_samples=5)
    return work / m.median_s


def _matmul_rate(
    n: int, dtype: torch.dtype, device: torch.device, max_time_s: float, *, tf32: bool = False
) -> float:
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return _rate(2.0 * n**3, torch.matmul, (a, b), max_time_s)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def _fp8_rate(n: int, device: torch.device, max_time_s: float) -> float | None:
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is None or torch.cuda.get_device_capability(device) < (8, 9):
        return None
    a = torch.randn(n, n, device=device).to(fp8)
    b = torch.randn(n, n, device=device).to(fp8).t().contiguous().t()  # column-major
    one = torch.ones((), device=device)

    def scaled(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    try:
        return _rate(2.0 * n**3, scaled, (a, b), max_time_s)
    except (RuntimeError, TypeError):  # no fp8 GEMM in this torch/driver: recorded as absent
        return None


def measure_ceilings(device: torch.device | None = None, *, quick: bool = False) -> Ceilings:
    """Measure copy bandwidth and matmul peaks on ``device`` (default: CUDA if present, else CPU).

    GPU: copy of 1 GiB (bytes read + written); matmul of 4096^3 and 8192^3 (the better of
    the two) for bf16 and fp16, 4096^3 for fp32 without and with TF32, fp8 (e4m3,
    ``torch._scaled_mm``) on sm_89+. CPU: copy of 64 MiB and an fp32 matmul of 1024^3.
    ``quick`` uses smaller sizes (for tests).
    """
    from warpforge import runtime

    device = torch.device(device) if device is not None else runtime.default_device()
    if device.type not in {"cuda", "cpu"}:
        raise ValueError(f"device: expected 'cuda' or 'cpu', got {str(device)!r}")
    fingerprint = device_fingerprint(device)
    details: dict[str, Any] = {}
    if device.type == "cuda":
        copy_bytes = (2**26 if quick else 2**30) // 4
        sizes = (1024,) if quick else (4096, 8192)
        budget = 0.3 if quick else 1.0
    else:
        copy_bytes = (2**22 if quick else 2**26) // 4
        sizes = (128,) if quick else (1024,)
        budget = 0.2 if quick else 1.0
    src = torch.randn(copy_bytes, device=device)
    dst = torch.empty_like(src)
    copy_rate = _rate(2.0 * src.numel() * 4, lambda s, d: d.copy_(s), (src, dst), budget)
    details["copy_bytes"] = src.numel() * 4
    del src, dst
    peaks: dict[str, float] = {}
    if device.type == "cuda":
        for dtype in (torch.bfloat16, torch.float16):
            rates = {n: _matmul_rate(n, dtype, device, budget) for n in sizes}
            peaks[dtype_key(dtype)] = max(rates.values())
            details[f"matmul_{dtype_key(dtype)}"] = {str(n): r for n, r in rates.items()}
        peaks["fp32"] = _matmul_rate(sizes[0], torch.float32, device, budget, tf32=False)
        peaks["tf32"] = _matmul_rate(sizes[0], torch.float32, device, budget, tf32=True)
        fp8 = _fp8_rate(sizes[0], device, budget)
        if fp8 is not None:
            peaks["fp8"] = fp8
        torch.cuda.empty_cache()
    else:
        peaks["fp32"] = _matmul_rate(sizes[0], torch.float32, device, budget)
    return Ceilings(
        device=str(fingerprint["device"]),
        fingerprint=fingerprint,
        copy_bytes_per_s=copy_rate,
        matmul_flops_per_s=peaks,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        is_gpu=device.type == "cuda",
        details=details,
    )


def cache_path() -> Path:
    from warpforge.environment import cache_dir

    return cache_dir() / CACHE_FILE


def _read_cache(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
            raise ValueError("no 'entries' object")
        return data["entries"]
    except (OSError, ValueError) as exc:
        # keep the unreadable file for inspection instead of overwriting it
        aside = path.with_suffix(f".corrupt-{os.getpid()}.json")
        with contextlib.suppress(OSError):
            path.replace(aside)
        warnings.warn(f"ceilings cache {path} unreadable ({exc}); moved to {aside}", stacklevel=3)
        return {}


def _write_cache(path: Path, entries: dict[str, Any]) -> None:
    """Atomic: a crash mid-write leaves the previous file intact."""
    write_atomically(path, json.dumps({"version": 1, "entries": entries}, indent=2, sort_keys=True))


def cached_ceilings(device: torch.device | None = None) -> Ceilings | None:
    """The cached ceilings for this device's fingerprint, or None."""
    entry = _read_cache(cache_path()).get(fingerprint_key(device_fingerprint(device)))
    if entry is None:
        return None
    try:
        return Ceilings.from_dict(entry)
    except ValueError:
        return None


def load_or_measure(
    device: torch.device | None = None, *, refresh: bool = False, quick: bool = False
) -> tuple[Ceilings, bool]:
    """(ceilings, from_cache): the cached entry unless ``refresh``, else measured and stored."""
    if not refresh:
        cached = cached_ceilings(device)
        if cached is not None:
            return cached, True
    measured = measure_ceilings(device, quick=quick)
    path = cache_path()
    entries = _read_cache(path)
    entries[fingerprint_key(measured.fingerprint)] = measured.as_dict()
    _write_cache(path, entries)
    return measured, False


def impossible(
    time_s: float,
    ceilings: Ceilings | None,
    *,
    bytes_moved: float | None,
    flops: float | None,
    dtype: torch.dtype,
) -> str | None:
    """Why ``time_s`` is impossible on this device, or None when it is plausible."""
    if ceilings is None:
        return None
    floor = ceilings.floor_s(bytes_moved=bytes_moved, flops=flops, dtype=dtype)
    if floor > 0 and time_s < floor * (1.0 - IMPOSSIBLE_MARGIN):
        return (
            f"{time_s * 1e6:.2f} us is {floor / time_s:.2f}x faster than this device's floor "
            f"of {floor * 1e6:.2f} us (bytes / copy bandwidth, FLOPs / matmul peak)"
        )
    return None
