"""silu(a) * b (SwiGLU gate), a fused elementwise chain (KernelBench-style reference)."""

import torch

# Size convention: GPU sizes when CUDA is present, small ones for CPU verification under
# Triton's interpreter (bf16 is unreliable there, so the CPU runs float32).
GPU = torch.cuda.is_available()
DTYPE = torch.bfloat16 if GPU else torch.float32
ROWS, COLS = (4096, 4096) if GPU else (17, 29)


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.nn.functional.silu(a) * b


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=DTYPE), torch.randn(ROWS, COLS, dtype=DTYPE)]


def get_init_inputs():
    return []


def bytes_moved(*inputs):
    first = inputs[0]
    return (sum(t.numel() for t in inputs) + first.numel()) * first.element_size()


def flops(a, b):
    # negate, exp, add, divide, multiply
    return 5.0 * a.numel()
