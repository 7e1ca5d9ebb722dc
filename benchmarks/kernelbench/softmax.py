"""Row softmax (KernelBench-style reference)."""

import torch

# Size convention: GPU sizes when CUDA is present, small ones for CPU verification under
# Triton's interpreter (bf16 is unreliable there, so the CPU runs float32).
GPU = torch.cuda.is_available()
DTYPE = torch.bfloat16 if GPU else torch.float32
ROWS, COLS = (4096, 4096) if GPU else (13, 37)


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=DTYPE)]


def get_init_inputs():
    return []


def bytes_moved(x):
    return 2 * x.numel() * x.element_size()


def flops(x):
    # max, subtract, exp, sum, divide per element
    return 5.0 * x.numel()
