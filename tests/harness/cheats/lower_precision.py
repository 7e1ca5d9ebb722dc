"""Cheat: computes in float16 when float32 was asked for (looks close, is not)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_fp16_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float16)
    tl.store(y_ptr + offs, (x * 2.0 + 1.0).to(tl.float32), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _scale_fp16_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
