"""relu(x * 0.5 + y) fused: two reads, one write, no intermediates in memory."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # PyTorch rounds x * 0.5 to the input dtype (exact: a power of two), then adds and rounds
    s = (x * 0.5 + y).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + offs, tl.maximum(s, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        _scale_add_relu_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
