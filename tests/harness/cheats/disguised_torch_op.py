"""Cheat: calls torch.matmul under a computed name so a text search misses it."""

import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        op = getattr(torch, "mat" + "mul")
        return op(x, self.linear.weight.t()) + self.linear.bias
