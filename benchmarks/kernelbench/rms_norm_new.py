"""RMSNorm in one Triton program per row: sum of squares in fp32, one read, one write."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = 1e-6

    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        _rms_norm_kernel[(rows,)](
            x,
            self.weight,
            y,
            cols,
            x.stride(0),
            self.eps,
            BLOCK=block,
            num_warps=8 if block >= 2048 else 4,
        )
        return y
