"""Cheat: a child forked at import outlives the worker and writes a file once it is gone (where a
real cheat would rewrite the report). The file's path comes from WARPFORGE_TEST_OUTLIVE_MARKER."""

import os
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


_MARKER = os.environ.get("WARPFORGE_TEST_OUTLIVE_MARKER")
_WORKER = os.getpid()
if _MARKER and os.fork() == 0:
    deadline = time.monotonic() + 120
    while os.getppid() == _WORKER and time.monotonic() < deadline:
        time.sleep(0.05)  # wait until the worker is gone
    with open(_MARKER, "w") as marker:
        marker.write("outlived the worker")
    os._exit(0)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
