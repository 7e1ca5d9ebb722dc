"""Norm classes written as Hugging Face writes them (nothing imported from transformers), for the
tests of replace_modules and of a model patched with it."""

from __future__ import annotations

import torch
from torch import nn


class LlamaRMSNorm(nn.Module):
    """Llama's: float32 statistics, cast back to the input dtype, then scaled by the weight
    (``weight * x.to(input_dtype)``: a float32 weight promotes a bfloat16 input's output)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
