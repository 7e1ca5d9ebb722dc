"""LayerNorm over the last dimension with weight and bias (KernelBench-style reference)."""

import torch

# Size convention: GPU sizes when CUDA is present, small ones for CPU verification under
# Triton's interpreter (bf16 is unreliable there, so the CPU runs float32).
GPU = torch.cuda.is_available()
DTYPE = torch.bfloat16 if GPU else torch.float32
ROWS, COLS = (4096, 4096) if GPU else (11, 40)


class Model(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():  # non-trivial parameters, identical in Model and ModelNew
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        # computed at the parameters' precision (fp32, or fp64 for the reference), output in x's dtype
        return self.norm(x.to(self.norm.weight.dtype)).to(x.dtype)


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=DTYPE)]


def get_init_inputs():
    return [COLS]


def bytes_moved(x):
    return 2 * x.numel() * x.element_size() + 2 * x.shape[-1] * 4


def flops(x):
    # mean, centre, square, sum, scale, weight, bias
    return 8.0 * x.numel()
