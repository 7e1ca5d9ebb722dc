"""Experiment (GPU): the matmul blueprints' generated Triton GEMMs against cuBLAS(Lt) lowerings.

mlp_block and layernorm_linear_gelu are GEMM-bound; their generated Triton kernels time about
3% behind eager PyTorch, whose cuBLAS GEMMs are faster than ours while eager runs the GELU and
the residual add as separate passes. This times, interleaved in one process (the harness's
timing: CUDA events, L2 flushed, shuffled order), the blueprint as compiled, eager, and
compositions that keep the fusion but take the GEMM from cuBLAS: ``torch._addmm_activation``
(cuBLASLt's bias + GELU epilogue in the GEMM) and ``torch.addmm`` with the residual as its C
matrix. Each GEMM is also timed alone (generated one-GEMM blueprints against the cuBLAS call),
so the difference can be placed. Every whole-problem variant is checked against the float64
reference first, and the cuBLASLt GELU is compared with both GELU forms (tanh and erf) to say
which one the epilogue computes. Not a harness report: the choice it informs is whether the
compiler should lower such matmul groups to cuBLAS; the harness then measures the result.

Usage (GPU): ``PYTHONPATH=src python3 scripts/gpu/matmul_lowering_ab.py OUT.json``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


def _one_gemm_blueprints(dtype: str) -> dict[str, Any]:
    """Generated kernels of one GEMM each: linear + bias + GELU(tanh); linear + bias + residual;
    layer_norm alone."""
    from warpforge.blueprint.compiler import compile as compile_blueprint
    from warpforge.blueprint.ir import BlueprintBuilder

    b = BlueprintBuilder("ab_linear_gelu")
    x, w, bias = (
        b.input("x", ("T", "D"), dtype),
        b.input("w", ("F", "D"), dtype),
        b.input("b", ("F",), dtype),
    )
    b.output("y", b.op("gelu", b.op("linear", x, w, bias), approximate="tanh"))
    linear_gelu = compile_blueprint(b.build(), strict=True)
    b = BlueprintBuilder("ab_linear_residual")
    h, w, bias = (
        b.input("h", ("T", "F"), dtype),
        b.input("w", ("D", "F"), dtype),
        b.input("b", ("D",), dtype),
    )
    x = b.input("x", ("T", "D"), dtype)
    b.output("y", b.op("add", b.op("linear", h, w, bias), x))
    linear_residual = compile_blueprint(b.build(), strict=True)
    b = BlueprintBuilder("ab_layer_norm")
    x, g, beta = (
        b.input("x", ("T", "D"), dtype),
        b.input("g", ("D",), dtype),
        b.input("beta", ("D",), dtype),
    )
    b.output("y", b.op("layer_norm", x, g, beta, eps=1e-5))
    layer_norm = compile_blueprint(b.build(), strict=True)
    return {
        "linear_gelu": linear_gelu,
        "linear_residual": linear_residual,
        "layer_norm": layer_norm,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--max-time", type=float, default=2.0, help="seconds of timing a set")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("matmul_lowering_ab.py: needs a CUDA device")

    from warpforge.catalog import load_builtin_problems
    from warpforge.harness.checks import require_reference_match
    from warpforge.harness.registry import get_problem
    from warpforge.harness.report import experiment_row, write_experiment
    from warpforge.harness.timing import measure_interleaved

    load_builtin_problems()
    device, dtype = torch.device("cuda"), torch.bfloat16
    one = _one_gemm_blueprints("bfloat16")
    addmm_act = torch._addmm_activation  # cuBLASLt epilogue: bias + GELU inside the GEMM

    rows: list[dict[str, Any]] = []

    def timed(
        name: str, fns: dict[str, Any], inputs: tuple[Any, ...], errors: dict[str, float]
    ) -> None:
        measured = measure_interleaved(fns, [inputs], max_time_s=args.max_time, seed=0)
        row = experiment_row(measured, set=name, max_abs_error=errors)
        rows.append(row)
        print(json.dumps(row), flush=True)

    # --- mlp_block: y = linear(gelu_tanh(linear(x, w1, b1)), w2, b2) + x
    problem = get_problem("blueprint.mlp_block")
    shape = dict(problem.shapes[0])
    gen = torch.Generator(device=device).manual_seed(0)
    inputs = tuple(problem.make_inputs(shape, dtype, device, gen))
    x, w1, b1, w2, b2 = inputs

    def lt_both(x, w1, b1, w2, b2):
        return torch.addmm(x + b2, addmm_act(b1, x, w1.t(), use_gelu=True), w2.t())

    def triton_then_cublas(x, w1, b1, w2, b2):
        return torch.addmm(x + b2, one["linear_gelu"](x, w1, b1), w2.t())

    def lt_then_triton(x, w1, b1, w2, b2):
        return one["linear_residual"](addmm_act(b1, x, w1.t(), use_gelu=True), w2, b2, x)

    whole = {
        "blueprint": problem.implementation,
        "eager": problem.reference,
        "cublaslt both": lt_both,
        "triton gemm1, cublas gemm2": triton_then_cublas,
        "cublaslt gemm1, triton gemm2": lt_then_triton,
    }
    errors = {k: require_reference_match(problem, fn, inputs) for k, fn in whole.items()}
    timed(f"mlp_block {shape}", whole, inputs, errors)

    h = F.gelu(F.linear(x, w1, b1), approximate="tanh")
    lt_h = addmm_act(b1, x, w1.t(), use_gelu=True)
    erf_h = F.gelu(F.linear(x, w1, b1))
    gelu_form = {
        "cublaslt vs tanh": (lt_h.float() - h.float()).abs().max().item(),
        "cublaslt vs erf": (lt_h.float() - erf_h.float()).abs().max().item(),
    }
    print(json.dumps({"gelu_form": gelu_form}), flush=True)
    timed(
        "gemm1: linear + bias + gelu(tanh)",
        {
            "triton": one["linear_gelu"],
            "cublaslt epilogue": lambda x, w, b: addmm_act(b, x, w.t(), use_gelu=True),
            "cublas + eager gelu": lambda x, w, b: F.gelu(F.linear(x, w, b), approximate="tanh"),
        },
        (x, w1, b1),
        gelu_form,
    )
    xb = x + b2
    timed(
        "gemm2: linear + bias + residual",
        {
            "triton": lambda h, w, b, x, xb: one["linear_residual"](h, w, b, x),
            "cublas addmm(x + b, ...)": lambda h, w, b, x, xb: torch.addmm(x + b, h, w.t()),
            "cublas addmm, C given": lambda h, w, b, x, xb: torch.addmm(xb, h, w.t()),
        },
        (h, w2, b2, x, xb),
        {},
    )

    # --- layernorm_linear_gelu: y = gelu_tanh(linear(layer_norm(x), w, bias))
    problem = get_problem("blueprint.layernorm_linear_gelu")
    shape = dict(problem.shapes[0])
    gen = torch.Generator(device=device).manual_seed(1)
    inputs = tuple(problem.make_inputs(shape, dtype, device, gen))

    def ln_lt(x, g, beta, w, bias):
        normed = F.layer_norm(x, (x.shape[-1],), g, beta, 1e-5)
        return addmm_act(bias, normed, w.t(), use_gelu=True)

    def wf_ln_lt(x, g, beta, w, bias):
        return addmm_act(bias, one["layer_norm"](x, g, beta), w.t(), use_gelu=True)

    whole = {
        "blueprint": problem.implementation,
        "eager": problem.reference,
        "eager layer_norm + cublaslt": ln_lt,
        "generated layer_norm + cublaslt": wf_ln_lt,
    }
    errors = {k: require_reference_match(problem, fn, inputs) for k, fn in whole.items()}
    timed(f"layernorm_linear_gelu {shape}", whole, inputs, errors)

    write_experiment(
        args.out,
        "matmul blueprints: generated Triton GEMMs against cuBLAS(Lt) lowerings",
        rows,
        dtype="bfloat16",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
