"""Matmul groups whose whole epilogue is a bias and an activation, run as one cuBLASLt GEMM.

cuBLASLt computes ``act(a @ b + bias)`` in one kernel (its ``GELU_BIAS``/``RELU_BIAS``
epilogues; PyTorch exposes them as ``torch._addmm_activation``, the op its own
``addmm``-with-activation fusion uses). For the 16-bit GEMMs of the benchmark suite that kernel
is faster than the generated Triton GEMM with the same epilogue: on the H200 a linear + bias +
GELU(tanh) of 8192 x 2048 by 2048 x 8192 took 372 µs against the generated kernel's 450
(``scripts/gpu/matmul_lowering_ab.py``, ``benchmarks/results/session22-h200-2026-11-29/
matmul-lowering-ab-call7.json``), so such groups are lowered to it on CUDA. Any other epilogue
(a residual add, a cast, several activations, a row op) keeps the generated kernel: cuBLASLt
cannot fuse it, and there the Triton GEMM measured at par with cuBLAS (361 against 356 µs for
linear + bias + residual, where cuBLAS needs a separate add as well).

Only on CUDA: on the CPU ``_addmm_activation`` applies the exact (erf) GELU whatever was asked,
where CUDA's epilogue and its fallback compute the tanh approximation, so a GELU group is lowered
only when it asks for ``approximate="tanh"`` and only on a CUDA device
(``tests/blueprint/test_cublas_epilogue.py`` checks the form on a GPU, in float32 where the two
GELUs differ by more than the GEMM's rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from warpforge.blueprint.codegen import FusionGroup, Plan

ENABLED = True
"""Lower matching matmul groups to cuBLASLt on CUDA; tests switch it off to run the Triton
kernel."""

DEVICE_TYPES = ("cuda",)
"""Devices the lowering runs on; ``_addmm_activation``'s GELU differs on the CPU (above)."""

_DTYPES = ("float16", "bfloat16")
"""The dtypes measured faster than the generated GEMM (float32 GEMMs are not lowered)."""


@dataclass(frozen=True)
class CublasEpilogue:
    """How a matmul group runs as one cuBLASLt call: ``activation(a @ b + bias)``."""

    bias: str
    """The value holding the 1-D bias (a linear's third input, or the added [N] vector)."""
    activation: str
    """``"gelu"`` (the tanh approximation) or ``"relu"``."""

    def run(self, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``activation(a @ b + bias)`` for 2-D ``a`` [M, K], ``b`` [K, N], ``bias`` [N]."""
        return torch._addmm_activation(bias, a, b, use_gelu=self.activation == "gelu")


def match(group: FusionGroup, plan: Plan) -> CublasEpilogue | None:
    """The lowering of ``group`` when its nodes are exactly a matmul or linear, a bias (the
    linear's own, or one ``add`` of an [N] vector), and a GELU(tanh) or ReLU producing the
    group's only output, all in one 16-bit dtype; otherwise None."""
    if group.kind != "matmul" or group.has_row_op or len(group.outputs) != 1:
        return None
    nodes = list(group.nodes)
    mm = last = nodes.pop(0)
    n = plan.schemas[mm.name].shape[-1]
    if mm.op == "linear" and len(mm.inputs) == 3:
        bias = mm.inputs[2]
    elif nodes and nodes[0].op == "add" and not nodes[0].attrs and mm.name in nodes[0].inputs:
        last = nodes.pop(0)
        others = [v for v in last.inputs if v != mm.name]
        if len(last.inputs) != 2 or len(others) != 1 or others[0] in group.produced:
            return None
        bias = others[0]
    else:
        return None
    if len(nodes) != 1 or tuple(nodes[0].inputs) != (last.name,):
        return None
    act = nodes[0]
    if act.op == "gelu" and act.attrs.get("approximate") == "tanh":
        activation = "gelu"
    elif act.op == "relu" and not act.attrs:
        activation = "relu"
    else:
        return None
    if group.outputs != [act.name]:
        return None
    values = [*mm.inputs[:2], bias, mm.name, act.name]
    dtypes = {plan.schemas[v].dtype for v in values}
    if len(dtypes) != 1 or dtypes.pop() not in _DTYPES:
        return None
    if tuple(plan.schemas[bias].shape) != (n,):
        return None
    return CublasEpilogue(bias, activation)
