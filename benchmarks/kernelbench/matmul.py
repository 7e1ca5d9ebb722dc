"""Matrix multiply C = A @ B (KernelBench-style reference)."""

import torch

# Size convention: GPU sizes when CUDA is present, small ones for CPU verification under
# Triton's interpreter (bf16 is unreliable there, so the CPU runs float32).
GPU = torch.cuda.is_available()
DTYPE = torch.bfloat16 if GPU else torch.float32
M, N, K = (4096, 4096, 4096) if GPU else (40, 24, 36)


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(M, K, dtype=DTYPE), torch.randn(K, N, dtype=DTYPE)]


def get_init_inputs():
    return []


def flops(a, b):
    return 2.0 * a.shape[0] * a.shape[1] * b.shape[1]


def bytes_moved(a, b):
    return (a.numel() + b.numel() + a.shape[0] * b.shape[1]) * a.element_size()
