"""Cheat: the right values in a column-major buffer where the reference returns a row-major
(contiguous) tensor. Values compare equal; `.view` on the output fails, and torch.compile's
stride checks of a custom op refuse it: no drop-in replacement."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, m, n, stride_m, stride_n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < m * n
    row = offs // n
    col = offs % n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + row * stride_m + col * stride_n, x * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        m, n = x.shape
        y = torch.empty_strided((m, n), (1, m), device=x.device, dtype=x.dtype)
        _scale_kernel[(triton.cdiv(m * n, 256),)](x, y, m, n, y.stride(0), y.stride(1), BLOCK=256)
        return y
