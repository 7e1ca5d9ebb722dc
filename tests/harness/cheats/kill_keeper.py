"""Cheat: kills the process above its worker (the keeper, which holds the orphans of a worker
that dies) in forward, then answers honestly; with the keeper gone, processes that left the
worker's group would reach init once the worker ended. The worker dies with its keeper, so the
candidate is rejected as a crash. For safety it never signals the process named by
WARPFORGE_TEST_HARNESS_PID (where there is no keeper, the worker's parent is the harness)."""

import os
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        parent = os.getppid()
        if str(parent) != os.environ.get("WARPFORGE_TEST_HARNESS_PID", str(parent)):
            os.kill(parent, signal.SIGKILL)
        y = torch.empty_like(x)
        _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
