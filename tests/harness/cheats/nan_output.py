"""Cheat: a NaN where the reference is finite."""

import torch
import triton
import triton.language as tl


@triton.jit
def _nan_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.where(offs == 3, float("nan"), x * 2.0 + 1.0)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _nan_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
