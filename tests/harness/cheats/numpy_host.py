"""Cheat: no Triton and no PyTorch operator: the work is done by NumPy on the host, through
NumPy views of the tensors."""

import numpy as np
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        np.multiply(x.cpu().numpy(), 2.0, out=y.numpy())
        y.numpy()[...] += 1.0
        return y
