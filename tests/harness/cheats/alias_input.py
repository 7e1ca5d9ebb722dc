"""Cheat: returns the input itself for a copy problem (right values, shared memory)."""

import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
