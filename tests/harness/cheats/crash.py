"""Broken: raises inside forward."""

import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("kernel exploded")
