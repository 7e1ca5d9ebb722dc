"""Reference: y = 2x + 1 elementwise (the gallery's main problem)."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(33, 17)]


def get_init_inputs():
    return []
