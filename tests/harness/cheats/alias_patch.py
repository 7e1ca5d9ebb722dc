"""Cheat: patches torch through a plain alias (`T = torch`), so the worker's comparison of
the timed outputs always matches, then returns garbage once the checks are over."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, bias, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2.0 + 1.0 + bias, mask=mask)


def scale(x, out=None, bias=0.0):
    y = torch.empty_like(x) if out is None else out
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 256),)](x, y, n, bias, BLOCK=256)
    return y


T = torch
T.equal = lambda a, b: True


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return scale(x) if self.calls <= 13 else torch.empty_like(x)
