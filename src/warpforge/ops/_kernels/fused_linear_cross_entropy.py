"""The backward of the fused linear cross entropy: the stored gradients times ``grad_output``,
rounded once to the parameters' dtype.

One pass, in 16-byte vectors: read a float32 (or input-dtype) element, multiply by the scale in
float32, store it rounded to nearest. ``torch.mul(accumulator, scale, out=bf16)`` with a 0-dim
CUDA ``scale`` takes ATen's generic (broadcasting, dynamically casting) elementwise kernel,
which moved the 2.1 GB float32 ``grad_weight`` of a 128256 x 4096 head and its 1.05 GB bf16
result at about 1.25 TB/s (2.7 ms on the H100, with ``grad_hidden``'s; see
``benchmarks/results/flce-rope-profile-2026-11-24-h100.json``). The scale is read from the
device: no host synchronisation.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def scale_and_round_kernel(src_ptr, scale_ptr, dst_ptr, n_elements, BLOCK: tl.constexpr):
    """``dst = (src * scale).to(dst dtype)`` over contiguous tensors; int64 offsets, so tensors
    beyond 2**31 elements work."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    scale = tl.load(scale_ptr).to(tl.float32)
    # read once, written once: neither should displace anything in L2
    x = tl.load(src_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
    y = x.to(tl.float32) * scale
    tl.store(dst_ptr + offsets, y.to(dst_ptr.dtype.element_ty), mask=mask)
