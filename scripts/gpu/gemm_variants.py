"""Experiment: the blueprint's pointer-based tile loop against TMA (host tensor descriptor)
formulations of the same bf16 GEMM, plain and persistent, on the suite's GEMM shapes.

Usage (on the GPU): python3 scripts/gpu/gemm_variants.py OUT.json
"""

from __future__ import annotations

import itertools
import json
import sys

import torch
import triton
import triton.language as tl
from gemm_smoke import median_event_us  # this script's folder is on sys.path


@triton.jit
def _grouped_tile(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """(row block, column block) of ``tile`` in GROUP_M order (as the blueprint kernels)."""
    group_size = GROUP_M * num_n
    first_m = (tile // group_size) * GROUP_M
    rows_in_group = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (tile % group_size) % rows_in_group, (tile % group_size) // rows_in_group


@triton.jit
def _pointer_tiles(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _grouped_tile(pid, num_m, num_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m % M)[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] + (offs_n % N)[None, :] * K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_K)):
        acc += tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16), mask=mask)


@triton.jit
def _tma_tile(
    a_desc, b_desc, c_desc, pid_m, pid_n, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """One C tile through tensor descriptors: the K loop, then the bf16 store."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


@triton.jit
def _tma_tiles(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _grouped_tile(pid, num_m, num_n, GROUP_M)
    _tma_tile(a_desc, b_desc, c_desc, pid_m, pid_n, K, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def _tma_persistent(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_PROGRAMS: tl.constexpr,
):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    for tile in range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS):
        pid_m, pid_n = _grouped_tile(tile, num_m, num_n, GROUP_M)
        _tma_tile(a_desc, b_desc, c_desc, pid_m, pid_n, K, BLOCK_M, BLOCK_N, BLOCK_K)


def _measure(mnk: tuple[int, int, int], config: tuple[int, ...], sms: int) -> dict:
    """Every variant on one shape and config: correctness against cuBLAS, then event timing."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    (m, n, k), (bm, bn, bk, warps, stages) = mnk, config
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    want = a @ b.t()
    row: dict = {"mnk": [m, n, k], "config": [bm, bn, bk, warps, stages]}
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    programs = min(sms, grid[0])
    options = dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages
    )
    variants = {"pointer": lambda: _pointer_tiles[grid](a, b, c, m, n, k, **options)}
    try:
        ad = TensorDescriptor.from_tensor(a, [bm, bk])
        bd = TensorDescriptor.from_tensor(b, [bn, bk])
        cd = TensorDescriptor.from_tensor(c, [bm, bn])
        variants["tma"] = lambda: _tma_tiles[grid](ad, bd, cd, m, n, k, **options)
        variants["tma_persistent"] = lambda: _tma_persistent[(programs,)](
            ad, bd, cd, m, n, k, NUM_PROGRAMS=programs, **options
        )
    except Exception as error:
        row["tma_error"] = f"{type(error).__name__}: {error}"[:500]
    for name, fn in variants.items():
        try:
            c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = float((c.float() - want.float()).abs().max())
            us = median_event_us(fn, iters=15)
            row[name] = {"us": us, "tflops": 2 * m * n * k / us / 1e6, "max_err": err}
        except Exception as error:
            row[name] = {"error": f"{type(error).__name__}: {error}"[:500]}
    return row


def main(out: str) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = [
        (128, 256, 64, 8, 3),
        (128, 256, 64, 8, 4),
        (128, 128, 64, 8, 4),
        (128, 128, 128, 8, 3),
        (256, 128, 64, 8, 3),
        (128, 256, 128, 8, 2),
    ]
    results = []
    for mnk, config in itertools.product(
        ((8192, 8192, 2048), (8192, 2048, 8192), (8192, 4096, 4096)), configs
    ):
        results.append(_measure(mnk, config, sms))
        print(json.dumps(results[-1]), flush=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
