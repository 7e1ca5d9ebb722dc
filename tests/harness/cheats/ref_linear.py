"""Reference: a linear layer (parameters must match between Model and ModelNew)."""

import torch


class Model(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16, 8]
