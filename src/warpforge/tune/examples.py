"""A small real Triton kernel registered as a tunable, so ``warpforge tune row_sum`` works as-is.

``row_sum(x)[m] = sum_n x[m, n]`` for a 2-D tensor. It is memory-bound: each program sums
``ROWS`` rows, walking the columns in chunks of ``BLOCK_N`` with an fp32 accumulator. The best
config depends on the shape in the way real norms and reductions do: short rows want many rows per
program, long rows want wide chunks and more warps, so it exercises the tuner honestly.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import triton
import triton.language as tl

from warpforge.tune.space import (
    ConfigSpace,
    at_most,
    next_power_of_2,
    register_budget,
    relation,
)
from warpforge.tune.tunable import Shape, TunableKernel, dtype_name, register_tunable, source_hash


@triton.jit
def _row_sum_kernel(
    x_ptr,
    out_ptr,
    M,
    N,
    stride_m,
    stride_n,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    row_mask = rows < M
    # 64-bit row offsets: M * stride_m can exceed 2**31 for large inputs.
    row_offsets = rows.to(tl.int64)[:, None] * stride_m
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols[None, :] < N)
        x = tl.load(x_ptr + row_offsets + cols[None, :] * stride_n, mask=mask, other=0.0)
        acc += x.to(tl.float32)
    total = tl.sum(acc, axis=1)
    tl.store(out_ptr + rows, total.to(out_ptr.dtype.element_ty), mask=row_mask)


def _features(shape: Shape, dtype: torch.dtype) -> dict[str, object]:
    return {"M": int(shape["M"]), "N": int(shape["N"]), "dtype": dtype_name(dtype)}


def _make_inputs(
    shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor]:
    x = torch.randn(
        (int(shape["M"]), int(shape["N"])), generator=generator, dtype=torch.float32, device="cpu"
    )
    return (x.to(device=device, dtype=dtype),)


def row_sum(config: Mapping[str, object], x: torch.Tensor) -> torch.Tensor:
    """Sum each row of the 2-D tensor ``x`` with one launch config."""
    if x.dim() != 2:
        raise ValueError(f"x: expected a 2-D tensor, got shape {tuple(x.shape)}")
    m, n = x.shape
    # NaN poison: a row the kernel fails to write shows up in the correctness check.
    out = torch.full((m,), float("nan"), dtype=x.dtype, device=x.device)
    rows = int(config["ROWS"])  # type: ignore[call-overload]
    grid = (triton.cdiv(m, rows),)
    _row_sum_kernel[grid](
        x,
        out,
        m,
        n,
        x.stride(0),
        x.stride(1),
        BLOCK_N=int(config["BLOCK_N"]),  # type: ignore[call-overload]
        ROWS=rows,
        num_warps=int(config["num_warps"]),  # type: ignore[call-overload]
        num_stages=int(config["num_stages"]),  # type: ignore[call-overload]
    )
    return out


def _reference(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=1)


def _default_config(features: Mapping[str, object]) -> dict[str, object]:
    n = int(features["N"])  # type: ignore[call-overload]
    block = min(max(next_power_of_2(n), 64), 1024)
    # A warp per 256 columns, and a pipelined loop only when one chunk does not cover the row.
    return {
        "BLOCK_N": block,
        "ROWS": 1,
        "num_warps": max(1, min(8, block // 256)),
        "num_stages": 2 if n > block else 1,
    }


def _elements_per_thread(config: Mapping[str, object], _features: Mapping[str, object]) -> int:
    threads = 32 * int(config["num_warps"])  # type: ignore[call-overload]
    return int(config["ROWS"]) * int(config["BLOCK_N"]) // threads  # type: ignore[call-overload]


def _threads_have_work(config: Mapping[str, object], _features: Mapping[str, object]) -> str | None:
    tile = int(config["ROWS"]) * int(config["BLOCK_N"])  # type: ignore[call-overload]
    threads = 32 * int(config["num_warps"])  # type: ignore[call-overload]
    if tile < threads:
        return f"a {tile}-element tile leaves some of the {threads} threads idle"
    return None


def _stages_need_a_loop(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    n, block = int(features["N"]), int(config["BLOCK_N"])  # type: ignore[call-overload]
    if int(config["num_stages"]) > 1 and block >= n:  # type: ignore[call-overload]
        return f"num_stages={config['num_stages']} pipelines nothing: BLOCK_N={block} covers N={n}"
    return None


ROW_SUM_SPACE = ConfigSpace(
    {
        "BLOCK_N": (64, 128, 256, 512, 1024, 2048, 4096),
        "ROWS": (1, 2, 4, 8),
        "num_warps": (1, 2, 4, 8),
        "num_stages": (1, 2),
    },
    constraints=(
        at_most("BLOCK_N", lambda c, f: max(64, next_power_of_2(int(f["N"]))), "N rounded up"),  # type: ignore[call-overload]
        at_most("ROWS", lambda c, f: next_power_of_2(int(f["M"])), "M rounded up"),  # type: ignore[call-overload]
        relation("idle_threads", _threads_have_work),
        relation("pipelining", _stages_need_a_loop),
        # fp32 accumulator tile held in registers, plus ~32 for addressing.
        register_budget(lambda c, f: _elements_per_thread(c, f) + 32),
    ),
)

ROW_SUM = register_tunable(
    TunableKernel(
        name="row_sum",
        space=ROW_SUM_SPACE,
        source_hash=source_hash(_row_sum_kernel, row_sum),
        features=_features,
        make_inputs=_make_inputs,
        run=row_sum,
        reference=_reference,
        default_config=_default_config,
        shapes=({"M": 4096, "N": 4096}, {"M": 16384, "N": 1024}, {"M": 1024, "N": 16384}),
        cpu_shapes=({"M": 7, "N": 37}, {"M": 16, "N": 200}),
        sweep=tuple(
            {"M": m, "N": n}
            for m in (1024, 4096, 16384)
            for n in (256, 512, 1024, 2048, 4096, 8192, 16384)
        ),
        dtypes=(torch.float32, torch.float16, torch.bfloat16),
        # fp32 rows of up to 16384 unit-normal values: a config that accumulates 64-wide chunks
        # sequentially carries ~1e-4 of rounding error where the row sum is near zero, while
        # torch's cascade sum carries ~1e-6, so the default 1e-5 floor rejected correct configs
        # on the H100; a wrong config is off by O(1) and still fails
        atol={torch.float32: 5e-4, torch.float16: 1e-3, torch.bfloat16: 8e-3},
        description="sum of each row of a 2-D tensor (example tunable)",
    ),
    replace=True,
)
