"""Broken: never returns."""

import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        while True:
            pass
