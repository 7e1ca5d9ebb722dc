"""LayerNorm in one Triton program per row: mean and variance in fp32 from a single read."""

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    centered = tl.where(mask, x - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = centered * tl.rsqrt(var + eps) * w + b
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():  # same initialisation as the reference (same seed, same order)
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        _layer_norm_kernel[(rows,)](
            x,
            self.norm.weight,
            self.norm.bias,
            y,
            cols,
            x.stride(0),
            self.norm.eps,
            BLOCK=block,
            num_warps=8 if block >= 2048 else 4,
        )
        return y
