"""Cheat: calls the nn.Linear module (a cuBLAS/ATen matmul) instead of a kernel."""

import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)
