"""Host (Python) overhead per eager call of each ``warpforge.ops`` function.

Runs on tiny CPU tensors. Two modes:

* ``reference`` (default): the PyTorch reference path (``TRITON_INTERPRET`` unset), where the
  math costs a few microseconds, so the time is mostly the Python path: validation, dispatch
  and autograd wiring.
* ``--stub-kernels``: the Triton path (interpreter mode) with every Triton kernel replaced by a
  launch that does nothing, so the time is exactly the Python work the op adds around its
  kernel launches on a GPU (allocation, views, launch configs), without Triton's own launcher.

* ``--cuda``: tiny CUDA tensors, real kernels: the eager time per call on a GPU, where a tiny
  problem's kernel takes a few microseconds, so the result is the host path (the GPU waits for
  it). Each timed batch ends with a synchronisation.

Prints the median of several repeats, in microseconds per call, for a plain call (no input
requires grad) and for a call whose inputs require grad (forward only; the graph is dropped),
with the eager PyTorch equivalent alongside where there is one.
Usage: ``PYTHONPATH=src python benchmarks/ops_host_overhead.py [--stub-kernels | --cuda]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

STUB_KERNELS = "--stub-kernels" in sys.argv
ON_CUDA = "--cuda" in sys.argv
os.environ.pop("WARPFORGE_INTERPRET", None)
if STUB_KERNELS:
    os.environ["TRITON_INTERPRET"] = "1"
else:
    os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402 (after the environment is set)
import torch.nn.functional as F  # noqa: E402

from warpforge import ops  # noqa: E402

DEVICE = "cuda" if ON_CUDA else "cpu"


def _per_call_us(fn, calls: int = 2000, repeats: int = 5) -> float:
    for _ in range(100):
        fn()
    samples = []
    for _ in range(repeats):
        if ON_CUDA:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if ON_CUDA:
            torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def _cases(grad: bool, torch_equivalents: bool = False):
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=g).to(DEVICE).requires_grad_(grad)

    x, w, b, r = t(4, 8), t(8), t(8), t(4, 8)
    target = torch.randint(0, 8, (4,), generator=g).to(DEVICE)
    q, k = t(1, 2, 2, 4), t(1, 2, 1, 4)
    cos, sin = torch.randn(2, 4).to(DEVICE), torch.randn(2, 4).to(DEVICE)
    hidden, weight = t(4, 8), t(16, 8)
    target16 = torch.randint(0, 16, (4,), generator=g).to(DEVICE)
    if torch_equivalents:
        return {
            "rms_norm": lambda: F.rms_norm(x, (8,), w, 1e-6),
            "layer_norm": lambda: F.layer_norm(x, (8,), w, b),
            "softmax": lambda: torch.softmax(x, -1),
            "log_softmax": lambda: torch.log_softmax(x, -1),
            "cross_entropy": lambda: F.cross_entropy(x, target),
            "swiglu": lambda: F.silu(x) * r,
            "geglu": lambda: F.gelu(x) * r,
        }
    return {
        "rms_norm": lambda: ops.rms_norm(x, w),
        "rms_norm+residual": lambda: ops.rms_norm(x, w, residual=r),
        "layer_norm": lambda: ops.layer_norm(x, w, b),
        "softmax": lambda: ops.softmax(x),
        "log_softmax": lambda: ops.log_softmax(x),
        "cross_entropy": lambda: ops.cross_entropy(x, target),
        "fused_linear_cross_entropy": lambda: ops.fused_linear_cross_entropy(
            hidden, weight, target16
        ),
        "swiglu": lambda: ops.swiglu(x, r),
        "geglu": lambda: ops.geglu(x, r),
        "rope": lambda: ops.rope(q, k, cos, sin),
    }


class _NoLaunch:
    """A Triton kernel stand-in whose launches do nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def _stub_kernels() -> None:
    import importlib
    import pkgutil

    import warpforge.ops._kernels as package

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name in dir(module):
            if name.endswith("_kernel"):
                setattr(module, name, _NoLaunch())


def main() -> None:
    torch.set_num_threads(1)
    if STUB_KERNELS:
        _stub_kernels()
    print(f"device: {DEVICE}, stubbed kernels: {STUB_KERNELS}")
    print(
        f"{'op':30s} {'no grad us':>11s} {'grad us':>9s} {'torch no grad':>14s} {'torch grad':>11s}"
    )
    plain, grad = _cases(False), _cases(True)
    torch_plain, torch_grad = _cases(False, True), _cases(True, True)
    for name in plain:
        row = f"{name:30s} {_per_call_us(plain[name]):11.1f} {_per_call_us(grad[name]):9.1f}"
        if name in torch_plain:
            row += (
                f" {_per_call_us(torch_plain[name]):14.1f} {_per_call_us(torch_grad[name]):11.1f}"
            )
        print(row)


if __name__ == "__main__":
    main()
