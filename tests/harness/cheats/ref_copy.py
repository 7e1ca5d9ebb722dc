"""Reference: a copy of the input (an aliasing output would have the right values)."""

import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x.clone()


def get_inputs():
    return [torch.randn(29, 11)]


def get_init_inputs():
    return []
