"""Cheat: contiguous while the harness checks the output (the first calls), then the same values
in a column-major buffer, where a real cheat would write whichever layout is cheaper."""

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
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        m, n = x.shape
        strides = (n, 1) if self.calls <= 7 else (1, m)
        y = torch.empty_strided((m, n), strides, device=x.device, dtype=x.dtype)
        _scale_kernel[(triton.cdiv(m * n, 256),)](x, y, m, n, y.stride(0), y.stride(1), BLOCK=256)
        return y
