"""Triton kernels for RMSNorm and LayerNorm over the last dimension of a (M, N) row view.

One kernel family serves both norms: ``CENTER`` subtracts the row mean (LayerNorm), otherwise the
row is only scaled by its reciprocal root mean square (RMSNorm). Statistics are always fp32.

* ``*_rows_kernel``: a row fits one block, so each program keeps a [ROWS, BLOCK_N] tile in
  registers and touches memory once (several rows per program keep small-N launches busy).
* ``*_chunked_kernel``: a row is longer than one block. The statistics pass walks the row
  forwards and the output pass walks it backwards, so the chunks read last (still in L2) are the
  first ones re-read; first-pass loads ask L2 to keep their lines (``evict_last``) and the
  final pass lets them go (``evict_first``).
* ``partial_sum_kernel``: backward programs write per-program partial weight/bias gradients
  ``[num_programs, N]`` in fp32; this kernel sums them (both in one launch) in a fixed order
  (deterministic, no atomics).
* ``layer_norm_bwd_split_kernel``: LayerNorm backward with a wide row split over several
  programs that meet through a per-row counter (``warpforge.ops._split_rows``), so each keeps
  only its column slice of the row and of the dweight/dbias partials in registers.
* ``layer_norm_bwd_lag_kernel``: the same split, with dx written a few rows late from an L2
  re-read, so no program ever waits for a row's other programs while they work on it.
* ``layer_norm_bwd_held_kernel``: the lagged split at lag 1 with fewer instructions an element
  and, optionally, the next row prefetched a whole iteration ahead.
* ``layer_norm_bwd_pairs_kernel``: the held kernel's re-read launch for 2-byte rows read as
  int32 words of two columns (the 2-byte default where rows have such views).

Row offsets are computed in int64 so operands larger than 2**31 elements address correctly
(the pairs kernel: in int32 unless its caller finds an operand that large).
"""

from __future__ import annotations

import triton
import triton.language as tl

# the name the tuned kernels' source (hashed into their shipped configs) calls it by
from warpforge.ops._kernels.reductions import sum_pair as _sum_pair
from warpforge.ops._kernels.split_rows import (
    UNPUBLISHED,
    arrive,
    pack_pair,
    split_place,
    unpack_pair,
    wait_for_row,
)


@triton.jit
def norm_fwd_rows_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
    stride_x,
    stride_r,
    stride_y,
    stride_h,
    M,
    N,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]

    x = tl.load(X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(R + rows[:, None] * stride_r + cols[None, :], mask=mask, other=0.0)
        # h is rounded to the input dtype before it is normalised, exactly as an eager
        # ``h = x + residual`` followed by the norm; backward re-reads this stored h.
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
        tl.store(H + rows[:, None] * stride_h + cols[None, :], x, mask=mask)
    x = x.to(tl.float32)

    if CENTER:
        mean = tl.sum(x, axis=1) / N
        x = tl.where(mask, x - mean[:, None], 0.0)
        tl.store(MEAN + rows, mean, mask=row_mask)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    tl.store(RSTD + rows, rstd, mask=row_mask)

    y = x * rstd[:, None]
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = y * (offset + w)[None, :]
    if HAS_BIAS:
        b = tl.load(B + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = y + b[None, :]
    tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _tile_load(ptr, offs, rows, M, EVEN_ROWS: tl.constexpr):
    if EVEN_ROWS:
        return tl.load(ptr + offs)
    return tl.load(ptr + offs, mask=(rows < M)[:, None], other=0.0)


@triton.jit
def _tile_store(ptr, offs, value, rows, M, EVEN_ROWS: tl.constexpr):
    if EVEN_ROWS:
        tl.store(ptr + offs, value)
    else:
        tl.store(ptr + offs, value, mask=(rows < M)[:, None])


@triton.jit
def _stats_store(ptr, value, rows, M, EVEN_ROWS: tl.constexpr):
    if EVEN_ROWS:
        tl.store(ptr + rows, value)
    else:
        tl.store(ptr + rows, value, mask=rows < M)


@triton.jit
def norm_fwd_tile_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
    M,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    N: tl.constexpr,
    ROWS: tl.constexpr,
    EVEN_ROWS: tl.constexpr,
    EARLY_W: tl.constexpr = False,
):
    """``norm_fwd_rows_kernel`` compiled for rows of exactly N columns (a power of 2), packed
    (row stride N) with every offset within 32 bits: no column mask, no row mask where ROWS
    divides M (``EVEN_ROWS``), 32-bit offsets: 17-33% fewer SASS instructions than the row
    kernel at 256 columns on the same launch (Inductor's kernel there is compiled the same way).
    ``EARLY_W`` loads the weight and bias beside x, before the row reductions, so their L2
    latency overlaps x's."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    x = _tile_load(X, offs, rows, M, EVEN_ROWS)
    if EARLY_W:
        if HAS_WEIGHT:
            w = tl.load(W + cols)
        if HAS_BIAS:
            b = tl.load(B + cols)
    if HAS_RESIDUAL:
        r = _tile_load(R, offs, rows, M, EVEN_ROWS)
        # rounded to the input dtype before it is normalised, as norm_fwd_rows_kernel does
        x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
        _tile_store(H, offs, x, rows, M, EVEN_ROWS)
    x = x.to(tl.float32)
    if CENTER:
        mean = tl.sum(x, axis=1) / N
        x = x - mean[:, None]
        _stats_store(MEAN, mean, rows, M, EVEN_ROWS)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / N + eps)
    _stats_store(RSTD, rstd, rows, M, EVEN_ROWS)
    y = x * rstd[:, None]
    if HAS_WEIGHT:
        if not EARLY_W:
            w = tl.load(W + cols)
        y = y * (offset + w.to(tl.float32))[None, :]
    if HAS_BIAS:
        if not EARLY_W:
            b = tl.load(B + cols)
        y = y + b.to(tl.float32)[None, :]
    _tile_store(Y, offs, y.to(Y.dtype.element_ty), rows, M, EVEN_ROWS)


@triton.jit
def norm_fwd_chunked_kernel(
    X,
    R,
    W,
    B,
    Y,
    H,
    MEAN,
    RSTD,
    stride_x,
    stride_r,
    stride_y,
    stride_h,
    M,
    N,
    eps,
    offset,
    CENTER: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Persistent over rows (grid sized so the rows in flight stay in L2)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    num_chunks = tl.cdiv(N, BLOCK_N)
    for i in range(0, tl.cdiv(M - pid, num_programs)):
        row = pid.to(tl.int64) + i * num_programs
        x_row = X + row * stride_x
        h_row = H + row * stride_h

        # Pass 1 (forwards): the row sum (LayerNorm) or sum of squares (RMSNorm); writes h.
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for chunk in range(0, num_chunks):
            c = chunk * BLOCK_N + cols
            m = c < N
            x = tl.load(x_row + c, mask=m, other=0.0, eviction_policy="evict_last")
            if HAS_RESIDUAL:
                r = tl.load(
                    R + row * stride_r + c, mask=m, other=0.0, eviction_policy="evict_first"
                )
                x = (x.to(tl.float32) + r.to(tl.float32)).to(x.dtype)
                tl.store(h_row + c, x, mask=m)
            x = x.to(tl.float32)
            if CENTER:
                acc += x
            else:
                acc += x * x
        if HAS_RESIDUAL:
            tl.debug_barrier()  # later passes re-read h written by other threads of this program
            src_row = h_row
        else:
            src_row = x_row

        if CENTER:
            mean = tl.sum(acc, axis=0) / N
            # A separate pass for the centred sum of squares avoids E[x^2] - mean^2 cancellation.
            acc = tl.zeros([BLOCK_N], dtype=tl.float32)
            for chunk in range(0, num_chunks):
                c = chunk * BLOCK_N + cols
                m = c < N
                x = tl.load(src_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(
                    tl.float32
                )
                x = tl.where(m, x - mean, 0.0)
                acc += x * x
            tl.store(MEAN + row, mean)
        else:
            mean = 0.0
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
        tl.store(RSTD + row, rstd)

        # Pass 2 (backwards): normalise and write y.
        y_row = Y + row * stride_y
        for chunk in range(0, num_chunks):
            c = (num_chunks - 1 - chunk) * BLOCK_N + cols
            m = c < N
            x = tl.load(src_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(
                tl.float32
            )
            y = (x - mean) * rstd
            if HAS_WEIGHT:
                w = tl.load(W + c, mask=m, other=0.0).to(tl.float32)
                y = y * (offset + w)
            if HAS_BIAS:
                y = y + tl.load(B + c, mask=m, other=0.0).to(tl.float32)
            tl.store(y_row + c, y.to(Y.dtype.element_ty), mask=m)


@triton.jit
def _load_tile(
    X, DY, tile, stride_x, stride_dy, M, cols, col_mask, ROWS: tl.constexpr, KEEP: tl.constexpr
):
    """(x, dy) of row tile ``tile`` in their storage dtype; rows past M read nothing. ``KEEP``
    asks the cache to hold the lines for a re-read (see RELOAD below)."""
    rows = (tile * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    mask = (rows < M)[:, None] & col_mask[None, :]
    x_ptrs = X + rows[:, None] * stride_x + cols[None, :]
    dy_ptrs = DY + rows[:, None] * stride_dy + cols[None, :]
    if KEEP:
        x = tl.load(x_ptrs, mask=mask, other=0.0, eviction_policy="evict_last")
        dy = tl.load(dy_ptrs, mask=mask, other=0.0, eviction_policy="evict_last")
    else:
        x = tl.load(x_ptrs, mask=mask, other=0.0)
        dy = tl.load(dy_ptrs, mask=mask, other=0.0)
    return x, dy


@triton.jit
def _reload_tile(X, DY, rows, stride_x, stride_dy, cols, mask):
    """The second read of a tile that ``_load_tile(KEEP=True)`` read (served by the cache): a
    different eviction policy, so the compiler cannot merge it into the first load and keep
    those values live instead."""
    x = tl.load(
        X + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
        eviction_policy="evict_first",
    )  # fmt: skip
    dy = tl.load(
        DY + rows[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0,
        eviction_policy="evict_first",
    )  # fmt: skip
    return x, dy


@triton.jit
def _add_partials(
    dw_acc, db_acc, dw_row, db_row, dy, xhat, col_mask,
    WEIGHT_GRAD: tl.constexpr, BIAS_GRAD: tl.constexpr, PARTIALS_IN_MEMORY: tl.constexpr,
):  # fmt: skip
    """One tile's dweight (dy * xhat) and dbias (dy) added to the program's partials: the
    register accumulators (returned), or its own rows of the partial buffers."""
    if PARTIALS_IN_MEMORY:
        if WEIGHT_GRAD:
            dw_part = tl.load(dw_row, mask=col_mask, other=0.0)
            tl.store(dw_row, dw_part + tl.sum(dy * xhat, axis=0), mask=col_mask)
        if BIAS_GRAD:
            db_part = tl.load(db_row, mask=col_mask, other=0.0)
            tl.store(db_row, db_part + tl.sum(dy, axis=0), mask=col_mask)
    else:
        if WEIGHT_GRAD:
            dw_acc += dy * xhat
        if BIAS_GRAD:
            db_acc += dy
    return dw_acc, db_acc


@triton.jit
def norm_bwd_rows_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DH,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    stride_dy,
    stride_x,
    stride_dh,
    stride_dx,
    M,
    N,
    offset,
    CENTER: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    HAS_DH: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PARTIALS_IN_MEMORY: tl.constexpr,
    PREFETCH: tl.constexpr,
    RELOAD: tl.constexpr,
):
    """dx = rstd * (w*dy - xhat * mean(w*dy*xhat) [- mean(w*dy)]); persistent over row tiles.

    With PREFETCH (small tiles, where a persistent program would otherwise wait for each
    tile's loads with nothing else in flight) the next tile's x and dy are loaded while the
    current one is processed.

    The program's partial weight/bias gradients live in registers across its tiles, or, with
    PARTIALS_IN_MEMORY (wide rows, where two more register-resident rows would spill), in its
    own rows of the zero-initialised partial buffers, updated tile by tile (L2-resident: each
    program only ever touches its own row, with the same threads, so there are no races).

    With RELOAD the tile's x and dy are not kept across the row reductions: the first pass
    accumulates the partials and the two row sums, and dx is computed from a second read of
    the tile, which the first read asked the cache to keep (no extra DRAM traffic). Across the
    reductions' barriers only the partials are live, so LayerNorm's two register-resident
    partial rows fit beside a 16K-column row without spilling.
    """
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw_row = DW_PARTIAL + pid.to(tl.int64) * N + cols
    db_row = DB_PARTIAL + pid.to(tl.int64) * N + cols
    dw_acc = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)

    num_tiles = tl.cdiv(M, ROWS)
    if PREFETCH:
        x_next, dy_next = _load_tile(
            X, DY, pid, stride_x, stride_dy, M, cols, col_mask, ROWS, RELOAD
        )
    for tile in range(pid, num_tiles, num_programs):
        rows = (tile * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        if PREFETCH:
            # this tile was loaded during the previous one; start loading the next (masked off
            # past the end), so a program's loads overlap its own arithmetic and stores
            x, dy = x_next, dy_next
            x_next, dy_next = _load_tile(
                X, DY, tile + num_programs, stride_x, stride_dy, M, cols, col_mask, ROWS, RELOAD
            )
        else:
            x, dy = _load_tile(X, DY, tile, stride_x, stride_dy, M, cols, col_mask, ROWS, RELOAD)
        x = x.to(tl.float32)
        dy = dy.to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
        if CENTER:
            mean = tl.load(MEAN + rows, mask=row_mask, other=0.0)
            xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
        else:
            xhat = x * rstd[:, None]
        if not RELOAD:
            # accumulate the parameter gradients first so dy is dead across the row reduction
            dw_acc, db_acc = _add_partials(
                dw_acc, db_acc, dw_row, db_row, dy, xhat, col_mask,
                WEIGHT_GRAD, BIAS_GRAD, PARTIALS_IN_MEMORY,
            )  # fmt: skip
        if HAS_WEIGHT:
            # re-read per tile (an L1 hit) rather than pinning BLOCK_N registers for the loop
            scale = offset + tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
            wdy = dy * scale[None, :]
        else:
            wdy = dy
        if CENTER:
            c1, c2 = _sum_pair(xhat * wdy, wdy, 1)
            c1 = c1 / N
            c2 = c2 / N
        else:
            c1 = tl.sum(xhat * wdy, axis=1) / N
        if RELOAD:
            x, dy = _reload_tile(X, DY, rows, stride_x, stride_dy, cols, mask)
            x = x.to(tl.float32)
            if CENTER:
                xhat = tl.where(mask, (x - mean[:, None]) * rstd[:, None], 0.0)
            else:
                xhat = x * rstd[:, None]
            if HAS_WEIGHT:
                # read again too (an L1 hit), so the scale is not live across the reductions
                w = tl.load(W + cols, mask=col_mask, other=0.0, eviction_policy="evict_first")
                wdy = dy.to(tl.float32) * (offset + w.to(tl.float32))[None, :]
            else:
                wdy = dy.to(tl.float32)
            dw_acc, db_acc = _add_partials(
                dw_acc, db_acc, dw_row, db_row, dy.to(tl.float32), xhat, col_mask,
                WEIGHT_GRAD, BIAS_GRAD, PARTIALS_IN_MEMORY,
            )  # fmt: skip
        if CENTER:
            dx = (wdy - xhat * c1[:, None] - c2[:, None]) * rstd[:, None]
        else:
            dx = (wdy - xhat * c1[:, None]) * rstd[:, None]
        if HAS_DH:
            dh = tl.load(DH + rows[:, None] * stride_dh + cols[None, :], mask=mask, other=0.0)
            dx += dh.to(tl.float32)
        tl.store(
            DX + rows[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask
        )

    if not PARTIALS_IN_MEMORY:
        if WEIGHT_GRAD:
            tl.store(dw_row, tl.sum(dw_acc, axis=0), mask=col_mask)
        if BIAS_GRAD:
            tl.store(db_row, tl.sum(db_acc, axis=0), mask=col_mask)


@triton.jit
def norm_bwd_chunked_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DH,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    stride_dy,
    stride_x,
    stride_dh,
    stride_dx,
    M,
    N,
    offset,
    CENTER: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    HAS_DH: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Long rows: per row, pass 1 sums the projections, pass 2 (backwards) writes dx.

    Partial weight/bias gradients accumulate in this program's own row of the fp32 partial
    buffers (zero-initialised by the caller), so no two programs ever touch the same address.
    """
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    num_chunks = tl.cdiv(N, BLOCK_N)
    dw_row = DW_PARTIAL + pid.to(tl.int64) * N
    db_row = DB_PARTIAL + pid.to(tl.int64) * N

    for i in range(0, tl.cdiv(M - pid, num_programs)):
        row = pid.to(tl.int64) + i * num_programs
        x_row = X + row * stride_x
        dy_row = DY + row * stride_dy
        rstd = tl.load(RSTD + row)
        if CENTER:
            mean = tl.load(MEAN + row)
        else:
            mean = 0.0
        acc1 = tl.zeros([BLOCK_N], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK_N], dtype=tl.float32)
        for chunk in range(0, num_chunks):
            c = chunk * BLOCK_N + cols
            m = c < N
            x = tl.load(x_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
            dy = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
            xhat = tl.where(m, (x - mean) * rstd, 0.0)
            if HAS_WEIGHT:
                dy = dy * (offset + tl.load(W + c, mask=m, other=0.0).to(tl.float32))
            acc1 += xhat * dy
            acc2 += dy
        if CENTER:
            c1, c2 = _sum_pair(acc1, acc2, 0)
            c1 = c1 / N
            c2 = c2 / N
        else:  # RMSNorm has no second sum (acc2 then goes unused and is never computed)
            c1 = tl.sum(acc1, axis=0) / N
            c2 = 0.0
        for chunk in range(0, num_chunks):
            c = (num_chunks - 1 - chunk) * BLOCK_N + cols
            m = c < N
            x = tl.load(x_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
            dy = tl.load(dy_row + c, mask=m, other=0.0, eviction_policy="evict_first").to(
                tl.float32
            )
            xhat = tl.where(m, (x - mean) * rstd, 0.0)
            if HAS_WEIGHT:
                wdy = dy * (offset + tl.load(W + c, mask=m, other=0.0).to(tl.float32))
            else:
                wdy = dy
            if CENTER:
                dx = (wdy - xhat * c1 - c2) * rstd
            else:
                dx = (wdy - xhat * c1) * rstd
            if HAS_DH:
                dx += tl.load(DH + row * stride_dh + c, mask=m, other=0.0).to(tl.float32)
            tl.store(DX + row * stride_dx + c, dx.to(DX.dtype.element_ty), mask=m)
            if WEIGHT_GRAD:
                tl.store(dw_row + c, tl.load(dw_row + c, mask=m, other=0.0) + dy * xhat, mask=m)
            if BIAS_GRAD:
                tl.store(db_row + c, tl.load(db_row + c, mask=m, other=0.0) + dy, mask=m)


@triton.jit
def _sum_partials(PARTIAL, OUT, num_partials, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_P, BLOCK_N], dtype=tl.float32)
    for start in range(0, num_partials, BLOCK_P):
        p = (start + tl.arange(0, BLOCK_P)).to(tl.int64)
        mask = (p < num_partials)[:, None] & col_mask[None, :]
        acc += tl.load(PARTIAL + p[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=col_mask)


@triton.jit
def partial_sum_kernel(
    DW_PARTIAL,
    DW,
    DB_PARTIAL,
    DB,
    num_partials,
    N,
    BLOCK_P: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """DW[n] = sum_p DW_PARTIAL[p, n] (grid axis 1 = 0) and DB likewise (axis 1 = 1): both in
    one launch, each column block summed in a fixed order (the same bits on every run)."""
    if tl.program_id(1) == 0:
        _sum_partials(DW_PARTIAL, DW, num_partials, N, BLOCK_P, BLOCK_N)
    else:
        _sum_partials(DB_PARTIAL, DB, num_partials, N, BLOCK_P, BLOCK_N)


@triton.jit
def _split_terms(x, dy, W, MEAN, RSTD, row, cols, mask, HAS_WEIGHT: tl.constexpr):
    """(xhat, w * dy, rstd) in fp32 of one row's chunk, from x and dy in their storage dtype."""
    mean = tl.load(MEAN + row)
    rstd = tl.load(RSTD + row)
    xhat = tl.where(mask, (x.to(tl.float32) - mean) * rstd, 0.0)
    if HAS_WEIGHT:
        # re-read per row (an L1 hit) rather than pinning BLOCK_N registers for the loop
        wdy = dy.to(tl.float32) * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        wdy = dy.to(tl.float32)
    return xhat, wdy, rstd


@triton.jit
def _publish_sums(partial, chunk, xhat, wdy, CHUNKS_POW2: tl.constexpr):
    """This chunk's ``sum(xhat * w * dy)`` and ``sum(w * dy)`` at ``partial + chunk`` and
    ``partial + CHUNKS_POW2 + chunk``."""
    s1, s2 = _sum_pair(xhat * wdy, wdy, 0)
    tl.store(partial + chunk, s1)
    tl.store(partial + CHUNKS_POW2 + chunk, s2)


@triton.jit
def _write_dx(DX, row, stride_dx, cols, mask, partial, parts, chunks, N, xhat, wdy, rstd,
              CHUNKS_POW2: tl.constexpr):  # fmt: skip
    """dx of one row's chunk from the row's sums (every chunk's, read from L2 with .cg: never a
    stale L1 line of another program's store)."""
    c1 = tl.load(partial + parts, mask=parts < chunks, other=0.0, cache_modifier=".cg")
    c2 = tl.load(
        partial + CHUNKS_POW2 + parts, mask=parts < chunks, other=0.0, cache_modifier=".cg"
    )
    c1 = tl.sum(c1, axis=0) / N
    c2 = tl.sum(c2, axis=0) / N
    dx = (wdy - xhat * c1 - c2) * rstd
    tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_bwd_split_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    PARTIALS,
    ARRIVALS,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    STAGE: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """LayerNorm backward with each row split over ``cdiv(N, BLOCK_N)`` programs (wide rows).

    Program ``pid`` owns column chunk ``pid % chunks`` of rows ``slot, slot + slots, ...``
    (``slot = pid // chunks``), as ``softmax_fwd_split_kernel`` does. It holds its chunk of x
    and dy in registers, publishes the chunk's two sums (``sum(xhat * w * dy)``,
    ``sum(w * dy)``) in ``PARTIALS[row]``, and writes its chunk of dx once every chunk of the
    row has arrived. Its dweight/dbias partials cover only its chunk, so they stay in registers
    beside the chunk where a whole 16K-column row's two partial rows would spill; they are
    written to row ``slot`` of ``DW_PARTIAL``/``DB_PARTIAL`` (``[slots, N]``), summed by
    ``partial_sum_kernel``.

    STAGE 0 (GPU): one launch meeting through ``ARRIVALS[row]`` (see
    ``warpforge.ops._split_rows``). STAGE 1 / 2: the sums only / dx and the partials from a
    second read (two launches, for the interpreter). PREFETCH loads the next row's chunk after
    publishing this row's sums, before the wait.
    """
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    parts = tl.arange(0, CHUNKS_POW2)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = slot.to(tl.int64)
    if PREFETCH:
        x_next = tl.load(X + first * stride_x + cols, mask=mask, other=0.0)
        dy_next = tl.load(DY + first * stride_dy + cols, mask=mask, other=0.0)
    for i in range(0, tl.cdiv(M - slot, slots)):
        row = first + i * slots
        partial = PARTIALS + row * (2 * CHUNKS_POW2)
        if PREFETCH:
            x, dy = x_next, dy_next
        else:
            x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0)
            dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0.0)
        xhat, wdy, rstd = _split_terms(x, dy, W, MEAN, RSTD, row, cols, mask, HAS_WEIGHT)
        dy = dy.to(tl.float32)
        if STAGE != 2:
            _publish_sums(partial, chunk, xhat, wdy, CHUNKS_POW2)
        if STAGE == 0:
            arrived = arrive(ARRIVALS, row)
        if PREFETCH:  # after the release (whose fence would wait for it), before the wait
            upcoming = row + slots
            next_end = tl.where(upcoming < M, N, 0)  # nothing past the last row
            x_next = tl.load(X + upcoming * stride_x + cols, mask=cols < next_end, other=0.0)
            dy_next = tl.load(DY + upcoming * stride_dy + cols, mask=cols < next_end, other=0.0)
        if STAGE != 1:
            # the parameter gradients while the other chunks of the row arrive
            if WEIGHT_GRAD:
                dw_acc += dy * xhat
            if BIAS_GRAD:
                db_acc += dy
        if STAGE == 0:
            wait_for_row(ARRIVALS, row, chunks, arrived)
        if STAGE != 1:
            _write_dx(DX, row, stride_dx, cols, mask, partial, parts, chunks, N, xhat, wdy, rstd,
                      CHUNKS_POW2)  # fmt: skip
    if STAGE != 1:
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + slot.to(tl.int64) * N + cols, dw_acc, mask=mask)
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + slot.to(tl.int64) * N + cols, db_acc, mask=mask)


@triton.jit
def _load_chunk(ptr, mask, KEEP: tl.constexpr):
    """One chunk of x or dy; ``KEEP`` asks L2 to hold it for the lagged re-read."""
    if KEEP:
        return tl.load(ptr, mask=mask, other=0.0, eviction_policy="evict_last")
    return tl.load(ptr, mask=mask, other=0.0)


@triton.jit
def layer_norm_bwd_lag_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    SUMS,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    LAG: tl.constexpr,
    STAGE: tl.constexpr,
):
    """LayerNorm backward with each row split over ``cdiv(N, BLOCK_N)`` programs, as
    ``layer_norm_bwd_split_kernel`` (program ``pid`` owns column chunk ``pid % chunks`` of row
    groups ``slot, slot + slots, ...`` with ``slot = pid // chunks``; a group is ``ROWS``
    consecutive rows; ``[slots, N]`` dweight/dbias partials), without waiting for a row's other
    programs while they work on it.

    dweight and dbias need only the forward's mean and rstd, so a program accumulates them, and
    publishes its chunk's two sums of each row, as soon as it has read a group (phase A). dx
    needs every chunk's sums: with ``LAG`` > 0 it is written ``LAG`` groups later (phase B),
    from a second read of x and dy that the first asked L2 to keep (slots x (LAG + 1) groups
    in flight: 8 MB at 4096 x 16384 bf16, one row a group), by when the other programs have
    long published them; with ``LAG`` = 0 right after phase A from the registers, waiting as
    the split kernel does.

    No counter and no fence: each chunk writes a row's two sums as one 8-byte word into
    ``SUMS[row, chunk]`` (int64, filled with ``UNPUBLISHED`` by the caller) and phase B polls
    the row's words (volatile loads) until none is unpublished: the word is its own flag. Like
    the split kernel this terminates only when all programs of a row are resident at once.
    STAGE 1 / 2 (the interpreter): phase A over all groups, then phase B from a second read.
    """
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    parts = tl.arange(0, CHUNKS_POW2)
    in_group = tl.arange(0, ROWS)
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    first = slot.to(tl.int64)
    groups_here = tl.cdiv(tl.cdiv(M, ROWS) - slot, slots)
    if STAGE == 0:
        iterations = groups_here + LAG
    else:
        iterations = groups_here
    for i in range(0, iterations):
        # phase A: group i of this slot (rows past the last are masked off: the lag's tail)
        rows_a = (first + i * slots) * ROWS + in_group
        valid_a = rows_a < M
        mask_a = valid_a[:, None] & mask[None, :]
        if STAGE != 2:
            x_a = _load_chunk(X + rows_a[:, None] * stride_x + cols[None, :], mask_a, LAG > 0)
            dy_a = _load_chunk(DY + rows_a[:, None] * stride_dy + cols[None, :], mask_a, LAG > 0)
        # phase B: group i - LAG (STAGE 2: group i), re-read while phase A computes
        if STAGE == 2:
            i_b = i
        else:
            i_b = i - LAG
        rows_b = (first + i_b * slots) * ROWS + in_group  # negative before the first group
        valid_b = (rows_b >= 0) & (rows_b < M)
        mask_b = valid_b[:, None] & mask[None, :]
        words = SUMS + rows_b[:, None] * CHUNKS_POW2 + parts[None, :]
        words_mask = valid_b[:, None] & (parts < chunks)[None, :]
        if STAGE == 2 or (STAGE == 0 and LAG > 0):
            x_b = tl.load(X + rows_b[:, None] * stride_x + cols[None, :], mask=mask_b, other=0.0,
                          eviction_policy="evict_first")  # fmt: skip
            dy_b = tl.load(DY + rows_b[:, None] * stride_dy + cols[None, :], mask=mask_b,
                           other=0.0, eviction_policy="evict_first")  # fmt: skip
            packed = tl.load(words, mask=words_mask, other=0, volatile=True)
        if STAGE != 2:
            # masked-off rows read any row's statistics (row 0): nothing of theirs is stored
            mean_a = tl.load(MEAN + tl.where(valid_a, rows_a, 0))
            rstd_a = tl.load(RSTD + tl.where(valid_a, rows_a, 0))
            xhat_a = tl.where(mask_a, (x_a.to(tl.float32) - mean_a[:, None]) * rstd_a[:, None], 0.0)
            dy_a = dy_a.to(tl.float32)
            if HAS_WEIGHT:
                w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
                wdy_a = dy_a * w[None, :]
            else:
                wdy_a = dy_a
            s1, s2 = _sum_pair(xhat_a * wdy_a, wdy_a, 1)
            word = SUMS + rows_a * CHUNKS_POW2 + chunk
            if STAGE == 0:
                tl.atomic_xchg(word, pack_pair(s1, s2), mask=valid_a, sem="relaxed")
            else:
                tl.store(word, pack_pair(s1, s2), mask=valid_a)
            if WEIGHT_GRAD:
                dw_acc += tl.sum(dy_a * xhat_a, axis=0)
            if BIAS_GRAD:
                db_acc += tl.sum(dy_a, axis=0)
        if STAGE != 1:
            if STAGE == 0 and LAG == 0:
                packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            while tl.max(tl.max((packed == UNPUBLISHED).to(tl.int32), axis=1), axis=0) > 0:
                packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            if STAGE == 0 and ROWS > 1:
                # The words spread over several warps, each holding copies it loaded itself,
                # and the exit test reduces one copy of each across warps: a warp's own copy
                # may predate the publication that test saw (the H100 wrote NaN rows so), so
                # read them once more. One row of at most 32 words (the callers' limit) sits
                # in every warp's lanes and each warp decides on its own copy (warp-local).
                tl.debug_barrier()
                packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            sums_1, sums_2 = unpack_pair(packed)  # masked-off words read as +0.0
            c1, c2 = tl.sum(sums_1, axis=1) / N, tl.sum(sums_2, axis=1) / N
            if STAGE == 0 and LAG == 0:
                xhat_b, wdy_b, rstd_b = xhat_a, wdy_a, rstd_a
            else:
                mean_b = tl.load(MEAN + tl.where(valid_b, rows_b, 0))
                rstd_b = tl.load(RSTD + tl.where(valid_b, rows_b, 0))
                xhat_b = tl.where(
                    mask_b, (x_b.to(tl.float32) - mean_b[:, None]) * rstd_b[:, None], 0.0
                )
                if HAS_WEIGHT:
                    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
                    wdy_b = dy_b.to(tl.float32) * w[None, :]
                else:
                    wdy_b = dy_b.to(tl.float32)
            dx = (wdy_b - xhat_b * c1[:, None] - c2[:, None]) * rstd_b[:, None]
            tl.store(DX + rows_b[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty),
                     mask=mask_b)  # fmt: skip
    if STAGE != 2:
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + slot.to(tl.int64) * N + cols, dw_acc, mask=mask)
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + slot.to(tl.int64) * N + cols, db_acc, mask=mask)


@triton.jit
def _held_rows(slot, i, slots, M, ROWS: tl.constexpr):
    """Rows of group ``i`` of ``slot`` (int64) and which exist (groups before the first or past
    the last have none: the pipeline's head and tail)."""
    rows = (slot.to(tl.int64) + i * slots) * ROWS + tl.arange(0, ROWS)
    return rows, (i >= 0) & (rows < M)


@triton.jit
def _held_group(X, DY, MEAN, RSTD, rows, valid, cols, mask, stride_x, stride_dy,
                KEEP: tl.constexpr, LAST: tl.constexpr):  # fmt: skip
    """(x, dy) of a group's chunk in their storage dtype and the rows' (mean, rstd), both zero
    for rows that do not exist (so their xhat is 0 without a per-element select). ``KEEP``: a
    first read that is read again (L2 keeps its lines); ``LAST``: that second read."""
    tile = valid[:, None] & mask[None, :]
    x_ptrs = X + rows[:, None] * stride_x + cols[None, :]
    dy_ptrs = DY + rows[:, None] * stride_dy + cols[None, :]
    if KEEP:
        x = tl.load(x_ptrs, mask=tile, other=0.0, eviction_policy="evict_last")
        dy = tl.load(dy_ptrs, mask=tile, other=0.0, eviction_policy="evict_last")
    elif LAST:
        x = tl.load(x_ptrs, mask=tile, other=0.0, eviction_policy="evict_first")
        dy = tl.load(dy_ptrs, mask=tile, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptrs, mask=tile, other=0.0)
        dy = tl.load(dy_ptrs, mask=tile, other=0.0)
    mean = tl.load(MEAN + rows, mask=valid, other=0.0)
    rstd = tl.load(RSTD + rows, mask=valid, other=0.0)
    return x, dy, mean, rstd


@triton.jit
def _held_terms(x, dy, W, cols, mean, rstd, mask, HAS_WEIGHT: tl.constexpr,
                EVEN_N: tl.constexpr):  # fmt: skip
    """(xhat, dy, w * dy) in fp32 of a group's chunk. Rows that do not exist come with x, dy,
    mean and rstd all zero, so everything is 0 there; only a ragged last chunk (not EVEN_N)
    needs a select for the columns past the row's end."""
    xhat = (x.to(tl.float32) - mean[:, None]) * rstd[:, None]
    if not EVEN_N:
        xhat = tl.where(mask[None, :], xhat, 0.0)
    dy = dy.to(tl.float32)
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        return xhat, dy, dy * w[None, :]
    return xhat, dy, dy


@triton.jit
def _held_dx(xhat, wdy, rstd, c1, c2):
    """dx = rstd * (w*dy - xhat * c1 - c2) as two FMAs an element, the row factors
    ``rstd * c1`` and ``rstd * c2`` taken out (explicit FMAs: contraction would instead fold
    ``rstd * c2`` into every element's FMA and keep a third operation)."""
    a = -(c1 * rstd)
    b = -(c2 * rstd)
    return tl.fma(xhat, a[:, None], tl.fma(wdy, rstd[:, None], b[:, None]))


@triton.jit
def layer_norm_bwd_held_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    SUMS,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    ROWS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    HOLD: tl.constexpr,
    PREFETCH: tl.constexpr,
    EVEN_N: tl.constexpr,
    STAGE: tl.constexpr,
):
    """``layer_norm_bwd_lag_kernel`` with lag 1 and fewer instructions an element (same
    placement: program ``pid`` owns column chunk ``pid % chunks`` of the row groups ``slot,
    slot + slots, ...``; the same flag words ``SUMS`` and ``[slots, N]`` partials).

    Iteration i publishes group i's sums (phase A) and writes dx of group i - 1 (phase B), as
    the lagged kernel does. In bfloat16 that kernel is bound by issuing instructions, not by
    memory (sm_90: ~56 an element a thread, bf16 unpacking and phase B's recomputation of xhat
    and w * dy among them), so here:

    * HOLD: phase A's fp32 xhat and w * dy stay in registers until phase B (ptxas holds the
      loaded values unpacked to fp32 anyway), which then costs two FMAs an element and no
      re-read; without HOLD, phase B re-reads x and dy from L2 *after* phase A and recomputes.
    * PREFETCH: group i + 1 is loaded at the top of iteration i, so a program has a group's
      DRAM loads in flight the whole iteration rather than only until their first use.
    * EVEN_N (N a multiple of BLOCK_N): no per-column mask; rows that do not exist (the
      pipeline's head and tail) are zeroed through their statistics, not per element.

    Phase B's flag words are loaded at the top of the iteration and, like the lagged kernel,
    polled after phase A (by when the row's other programs have long published them).
    STAGE 1 / 2 (the interpreter): phase A over all groups, then phase B from a second read.
    """
    chunks, chunk, slot, slots, cols, mask = split_place(N, BLOCK_N)
    if EVEN_N:
        mask = tl.full([BLOCK_N], 1, tl.int1)
    parts = tl.arange(0, CHUNKS_POW2)
    inv_n = 1.0 / N
    dw_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    db_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    groups_here = tl.cdiv(tl.cdiv(M, ROWS) - slot, slots)
    if STAGE == 0:
        if PREFETCH:
            rows_c, valid_c = _held_rows(slot, 0, slots, M, ROWS)
            x_c, dy_c, mean_c, rstd_c = _held_group(X, DY, MEAN, RSTD, rows_c, valid_c, cols,
                                                    mask, stride_x, stride_dy, not HOLD, False)  # fmt: skip
        else:
            x_c = tl.zeros([ROWS, BLOCK_N], dtype=X.dtype.element_ty)
            dy_c = tl.zeros([ROWS, BLOCK_N], dtype=DY.dtype.element_ty)
            mean_c = tl.zeros([ROWS], dtype=tl.float32)
            rstd_c = tl.zeros([ROWS], dtype=tl.float32)
        xhat_p = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)  # group -1: never stored
        wdy_p = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
        # fresh values, not mean_c / rstd_c: a name first bound to another loop-carried value
        # and then assigned that value in the body is not carried by Triton's frontend (it
        # sees no change), so phase B would keep group 0's statistics (GPU only; the
        # interpreter runs the Python as written)
        mean_p = tl.zeros([ROWS], dtype=tl.float32)
        rstd_p = tl.zeros([ROWS], dtype=tl.float32)
        for i in range(0, groups_here + 1):
            rows_a, valid_a = _held_rows(slot, i, slots, M, ROWS)
            rows_b, valid_b = _held_rows(slot, i - 1, slots, M, ROWS)
            if PREFETCH:
                rows_n, valid_n = _held_rows(slot, i + 1, slots, M, ROWS)
                x_n, dy_n, mean_n, rstd_n = _held_group(X, DY, MEAN, RSTD, rows_n, valid_n,
                                                        cols, mask, stride_x, stride_dy,
                                                        not HOLD, False)  # fmt: skip
            else:
                x_c, dy_c, mean_c, rstd_c = _held_group(X, DY, MEAN, RSTD, rows_a, valid_a,
                                                        cols, mask, stride_x, stride_dy,
                                                        not HOLD, False)  # fmt: skip
            words = SUMS + rows_b[:, None] * CHUNKS_POW2 + parts[None, :]
            words_mask = valid_b[:, None] & (parts < chunks)[None, :]
            packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            # phase A: group i
            xhat, dy, wdy = _held_terms(x_c, dy_c, W, cols, mean_c, rstd_c, mask, HAS_WEIGHT,
                                        EVEN_N)  # fmt: skip
            s1, s2 = _sum_pair(xhat * wdy, wdy, 1)
            tl.atomic_xchg(SUMS + rows_a * CHUNKS_POW2 + chunk, pack_pair(s1, s2), mask=valid_a,
                           sem="relaxed")  # fmt: skip
            if WEIGHT_GRAD:
                dw_acc += tl.sum(dy * xhat, axis=0)
            if BIAS_GRAD:
                db_acc += tl.sum(dy, axis=0)
            # phase B: group i - 1
            if not HOLD:
                x_b, dy_b, _, _ = _held_group(X, DY, MEAN, RSTD, rows_b, valid_b, cols, mask,
                                              stride_x, stride_dy, False, True)  # fmt: skip
            while tl.max(tl.max((packed == UNPUBLISHED).to(tl.int32), axis=1), axis=0) > 0:
                packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            if ROWS > 1:
                # as in the lagged kernel: a group's words spread over warps, and a warp's own
                # copy may predate the publication the cross-warp exit test saw
                tl.debug_barrier()
                packed = tl.load(words, mask=words_mask, other=0, volatile=True)
            sums_1, sums_2 = unpack_pair(packed)  # masked-off words read as +0.0
            c1, c2 = tl.sum(sums_1, axis=1) * inv_n, tl.sum(sums_2, axis=1) * inv_n
            if HOLD:
                dx = _held_dx(xhat_p, wdy_p, rstd_p, c1, c2)
            else:
                # from x - mean: rstd * (w*dy - xhat * c1 - c2) with xhat's rstd folded into
                # the row factor (columns past the row's end are not stored, so no select)
                _, _, wdy_b = _held_terms(x_b, dy_b, W, cols, mean_p, rstd_p, mask, HAS_WEIGHT,
                                          True)  # fmt: skip
                dx = _held_dx(x_b.to(tl.float32) - mean_p[:, None], wdy_b, rstd_p, c1 * rstd_p,
                              c2)  # fmt: skip
            tl.store(DX + rows_b[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty),
                     mask=valid_b[:, None] & mask[None, :])  # fmt: skip
            if HOLD:
                xhat_p, wdy_p = xhat, wdy
            mean_p, rstd_p = mean_c, rstd_c
            if PREFETCH:
                x_c, dy_c, mean_c, rstd_c = x_n, dy_n, mean_n, rstd_n
    else:
        for i in range(0, groups_here):
            rows, valid = _held_rows(slot, i, slots, M, ROWS)
            x, dy, mean, rstd = _held_group(X, DY, MEAN, RSTD, rows, valid, cols, mask,
                                            stride_x, stride_dy, False, False)  # fmt: skip
            xhat, dy, wdy = _held_terms(x, dy, W, cols, mean, rstd, mask, HAS_WEIGHT, EVEN_N)
            if STAGE == 1:
                s1, s2 = _sum_pair(xhat * wdy, wdy, 1)
                tl.store(SUMS + rows * CHUNKS_POW2 + chunk, pack_pair(s1, s2), mask=valid)
                if WEIGHT_GRAD:
                    dw_acc += tl.sum(dy * xhat, axis=0)
                if BIAS_GRAD:
                    db_acc += tl.sum(dy, axis=0)
            else:
                words = SUMS + rows[:, None] * CHUNKS_POW2 + parts[None, :]
                packed = tl.load(words, mask=valid[:, None] & (parts < chunks)[None, :], other=0)
                sums_1, sums_2 = unpack_pair(packed)
                c1, c2 = tl.sum(sums_1, axis=1) * inv_n, tl.sum(sums_2, axis=1) * inv_n
                dx = _held_dx(xhat, wdy, rstd, c1, c2)
                tl.store(DX + rows[:, None] * stride_dx + cols[None, :],
                         dx.to(DX.dtype.element_ty), mask=valid[:, None] & mask[None, :])  # fmt: skip
    if STAGE != 2:
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + slot.to(tl.int64) * N + cols, dw_acc, mask=mask)
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + slot.to(tl.int64) * N + cols, db_acc, mask=mask)


@triton.jit
def _pair_floats(words, BF16: tl.constexpr):
    """fp32 values of the even and odd columns of int32 words that each hold two 16-bit values
    (little-endian: the even column in the low half). bfloat16 is the top half of a float32,
    so each half costs one integer instruction (a shift, a mask) where the compiler's own
    conversion of a bfloat16 pair costs three."""
    if BF16:
        lo = (words << 16).to(tl.float32, bitcast=True)
        hi = (words & -65536).to(tl.float32, bitcast=True)
    else:
        lo = words.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        hi = (words >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _pairs_group(X, DY, MEAN, RSTD, row, cols, mask, stride_x, stride_dy, LAST: tl.constexpr,
                 KEEP: tl.constexpr = False):  # fmt: skip
    """(x, dy) words of an existing row's chunk (columns past its end read 0) and the row's
    (mean, rstd). ``LAST``: a second read, which L2 may let go first; ``KEEP``: a first read
    whose lines should stay (evict-last) for the second."""
    if KEEP:
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0, eviction_policy="evict_last")
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0,
                     eviction_policy="evict_last")  # fmt: skip
    elif LAST:
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0, eviction_policy="evict_first")
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0,
                     eviction_policy="evict_first")  # fmt: skip
    else:
        x = tl.load(X + row * stride_x + cols, mask=mask, other=0)
        dy = tl.load(DY + row * stride_dy + cols, mask=mask, other=0)
    return x, dy, tl.load(MEAN + row), tl.load(RSTD + row)


@triton.jit
def _pairs_weight(W, cols, mask, HAS_WEIGHT: tl.constexpr, BF16: tl.constexpr):
    """The chunk's weight as (even, odd) fp32 columns (ones without a weight)."""
    if HAS_WEIGHT:
        return _pair_floats(tl.load(W + cols, mask=mask, other=0), BF16)
    one = tl.full(cols.shape, 1.0, tl.float32)
    return one, one


@triton.jit
def layer_norm_bwd_pairs_kernel(
    DY,
    X,
    W,
    MEAN,
    RSTD,
    DX,
    DW_PARTIAL,
    DB_PARTIAL,
    SUMS,
    stride_dy,
    stride_x,
    stride_dx,
    M,
    N,
    HAS_WEIGHT: tl.constexpr,
    WEIGHT_GRAD: tl.constexpr,
    BIAS_GRAD: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CHUNKS_POW2: tl.constexpr,
    BF16: tl.constexpr,
    HOLD_W: tl.constexpr,
    HOLD_X: tl.constexpr,
    UNROLL: tl.constexpr,
    EVEN_N: tl.constexpr,
    WIDE: tl.constexpr,
    EVICT_FIRST: tl.constexpr,
    STAGE: tl.constexpr,
    LAG: tl.constexpr = 1,
    L2_AHEAD: tl.constexpr = 0,
    FULL_WORDS: tl.constexpr = False,
    KEEP_ROWS: tl.constexpr = False,
):
    """``layer_norm_bwd_held_kernel``'s re-read launch with prefetch, one row a group, for
    2-byte rows read and written as int32 words of two columns (``X``, ``DY``, ``W``: int32
    views, strides in words; ``DX`` in its own dtype, stride in elements; ``N`` and
    ``BLOCK_N`` in columns; ``N`` even).

    The held kernel's bfloat16 launch is bound by issuing instructions (~48 an element a thread
    on sm_90, of which a third unpacks 16-bit values and forms 64-bit row addresses), so here a
    program works on the even and the odd columns of its chunk as two fp32 tensors: unpacking
    a bfloat16 is one integer instruction (:func:`_pair_floats`), xhat one FMA, dx two FMAs
    and a multiply from x (the row's mean folded into the row factors), the two packed back by
    ``tl.interleave``. ``HOLD_W``: the weight unpacked once, before the loop (8 more registers
    a thread at 512 columns of 2 warps), instead of at every use. ``WIDE``: 64-bit row offsets
    (the caller's test: some operand's ``M * stride`` reaches 2**31); else int32. ``EVEN_N``
    (N a multiple of BLOCK_N): no column masks. No load is masked by row (a masked load zeroes
    its registers first, two instructions a vector): see the loop. ``EVICT_FIRST``: the
    re-read asks L2 to let its lines go. ``HOLD_X``: phase B takes row i - 1's x and dy words
    held in registers since phase A (8 more registers a thread at 512 columns of 2 warps)
    instead of re-reading them, so no load but the flag words lies on its path. ``UNROLL``
    (1 or 3): pipeline steps an iteration of the one-launch loop. ``LAG`` (1 or 2; 2 needs
    HOLD_X off): phase B writes dx of row i - LAG, so a program waits only for words its
    row's other programs published LAG steps ago (more slack for a slow one), re-reading that
    row's x, dy and statistics. ``L2_AHEAD`` (GPU only: inline PTX; 0: off): each step also
    asks L2 for row i + 1 + L2_AHEAD's x and dy lines (``prefetch.global.L2``, no registers), so
    more of the row stream is in flight than the one row held in registers. ``FULL_WORDS``
    (``chunks == CHUNKS_POW2``): the row's words are polled with no per-word mask, which lets
    each lane read its two words in one 16-byte load (a mask by ``chunks``, a run-time value,
    splits it into two 8-byte loads that fetch every sector of the row's words twice).
    ``KEEP_ROWS``: the first read of x and dy asks L1 and L2 to keep their lines (evict-last)
    for phase B's re-read (ncu: the re-read mostly misses L1 without it).

    Program ``pid`` owns column chunk ``pid % chunks`` of rows ``slot, slot + slots, ...``
    (``slot = pid // chunks``). Iteration i loads row i + 1's chunk (the prefetch), publishes
    row i's two sums into its flag word of ``SUMS`` (phase A, dweight/dbias accumulated) and
    writes dx of row i - 1 from a re-read of x and dy once every chunk of that row has
    published (phase B), as the held kernel does. STAGE 1 / 2 (the interpreter): phase A over
    all rows, then phase B.
    """
    chunks, chunk, slot, slots, cols_x, mask_x = split_place(N, BLOCK_N)
    HALF: tl.constexpr = BLOCK_N // 2
    cols = chunk * HALF + tl.arange(0, HALF)  # word columns
    mask = cols < N // 2
    if EVEN_N:
        mask = tl.full([HALF], 1, tl.int1)
        mask_x = tl.full([BLOCK_N], 1, tl.int1)
    parts = tl.arange(0, CHUNKS_POW2)
    inv_n = 1.0 / N
    chunks_w = chunks  # the words polled: all CHUNKS_POW2 of them (unmasked) with FULL_WORDS
    if FULL_WORDS:
        chunks_w = CHUNKS_POW2
    cols_w0 = chunk * HALF  # the chunk's first and last word (L2_AHEAD)
    cols_w1 = tl.minimum(cols_w0 + HALF, N // 2) - 1
    dw_lo = tl.zeros([HALF], dtype=tl.float32)
    dw_hi = tl.zeros([HALF], dtype=tl.float32)
    db_lo = tl.zeros([HALF], dtype=tl.float32)
    db_hi = tl.zeros([HALF], dtype=tl.float32)
    if WIDE:
        first = slot.to(tl.int64)
    else:
        first = slot
    rows_here = tl.cdiv(M - slot, slots)
    if HOLD_W:
        w_lo, w_hi = _pairs_weight(W, cols, mask, HAS_WEIGHT, BF16)
    if STAGE == 0:
        # every slot has a row (the caller's plans); rows are not masked (see _pairs_step)
        x_c, dy_c, mean_c, rstd_c = _pairs_group(X, DY, MEAN, RSTD, first, cols, mask,
                                                 stride_x, stride_dy, False, KEEP_ROWS)  # fmt: skip
        # fresh zeros, not mean_c / rstd_c (see layer_norm_bwd_held_kernel: a name bound to
        # another loop-carried value and then assigned it in the body is not carried)
        mean_p = tl.zeros([], dtype=tl.float32)
        rstd_p = tl.zeros([], dtype=tl.float32)
        x_p = tl.zeros([HALF], dtype=tl.int32)
        dy_p = tl.zeros([HALF], dtype=tl.int32)
        if not HOLD_W:  # loaded at each use
            w_lo, w_hi = 0.0, 0.0
        # UNROLL 3: three steps an iteration, row i - 1's, i's and i + 1's registers (held,
        # current, prefetched) trading roles every step and back in place after three, so no
        # register is copied (a one-step loop moves 16-24 a step); then the 0-2 steps left.
        steps = rows_here + LAG
        unrolled = 0
        if UNROLL == 3:
            unrolled = steps - steps % 3
        for i in range(0, unrolled, 3):
            x_n, dy_n, mean_n, rstd_n, dw_lo, dw_hi, db_lo, db_hi = _pairs_step(
                i, first, slots, M, rows_here, X, DY, W, MEAN, RSTD, DX, SUMS, cols, cols_x,
                mask, mask_x, parts, chunks_w, chunk, stride_x, stride_dy, stride_dx, inv_n, w_lo,
                w_hi, x_p, dy_p, mean_p, rstd_p, x_c, dy_c, mean_c, rstd_c, dw_lo, dw_hi, db_lo,
                db_hi, HAS_WEIGHT, WEIGHT_GRAD, BIAS_GRAD, CHUNKS_POW2, BF16, HOLD_W, HOLD_X,
                EVICT_FIRST, cols_w0, cols_w1, LAG, L2_AHEAD, KEEP_ROWS,
            )  # fmt: skip
            x_p, dy_p, mean_p, rstd_p, dw_lo, dw_hi, db_lo, db_hi = _pairs_step(
                i + 1, first, slots, M, rows_here, X, DY, W, MEAN, RSTD, DX, SUMS, cols, cols_x,
                mask, mask_x, parts, chunks_w, chunk, stride_x, stride_dy, stride_dx, inv_n, w_lo,
                w_hi, x_c, dy_c, mean_c, rstd_c, x_n, dy_n, mean_n, rstd_n, dw_lo, dw_hi, db_lo,
                db_hi, HAS_WEIGHT, WEIGHT_GRAD, BIAS_GRAD, CHUNKS_POW2, BF16, HOLD_W, HOLD_X,
                EVICT_FIRST, cols_w0, cols_w1, LAG, L2_AHEAD, KEEP_ROWS,
            )  # fmt: skip
            x_c, dy_c, mean_c, rstd_c, dw_lo, dw_hi, db_lo, db_hi = _pairs_step(
                i + 2, first, slots, M, rows_here, X, DY, W, MEAN, RSTD, DX, SUMS, cols, cols_x,
                mask, mask_x, parts, chunks_w, chunk, stride_x, stride_dy, stride_dx, inv_n, w_lo,
                w_hi, x_n, dy_n, mean_n, rstd_n, x_p, dy_p, mean_p, rstd_p, dw_lo, dw_hi, db_lo,
                db_hi, HAS_WEIGHT, WEIGHT_GRAD, BIAS_GRAD, CHUNKS_POW2, BF16, HOLD_W, HOLD_X,
                EVICT_FIRST, cols_w0, cols_w1, LAG, L2_AHEAD, KEEP_ROWS,
            )  # fmt: skip
            # the held and current rows are now (x_p, x_c) again: row i + 2's and i + 3's
            x_p, dy_p, mean_p, rstd_p, x_c, dy_c, mean_c, rstd_c = (
                x_p, dy_p, mean_p, rstd_p, x_c, dy_c, mean_c, rstd_c)  # fmt: skip
        for i in range(unrolled, steps):
            x_n, dy_n, mean_n, rstd_n, dw_lo, dw_hi, db_lo, db_hi = _pairs_step(
                i, first, slots, M, rows_here, X, DY, W, MEAN, RSTD, DX, SUMS, cols, cols_x,
                mask, mask_x, parts, chunks_w, chunk, stride_x, stride_dy, stride_dx, inv_n, w_lo,
                w_hi, x_p, dy_p, mean_p, rstd_p, x_c, dy_c, mean_c, rstd_c, dw_lo, dw_hi, db_lo,
                db_hi, HAS_WEIGHT, WEIGHT_GRAD, BIAS_GRAD, CHUNKS_POW2, BF16, HOLD_W, HOLD_X,
                EVICT_FIRST, cols_w0, cols_w1, LAG, L2_AHEAD, KEEP_ROWS,
            )  # fmt: skip
            x_p, dy_p, mean_p, rstd_p = x_c, dy_c, mean_c, rstd_c
            x_c, dy_c, mean_c, rstd_c = x_n, dy_n, mean_n, rstd_n
    else:
        for i in range(0, rows_here):
            row = first + i * slots
            x_w, dy_w, mean, rstd = _pairs_group(X, DY, MEAN, RSTD, row, cols, mask, stride_x,
                                                 stride_dy, False)  # fmt: skip
            if not HOLD_W:
                w_lo, w_hi = _pairs_weight(W, cols, mask, HAS_WEIGHT, BF16)
            if STAGE == 1:
                s1, s2, dw_lo, dw_hi, db_lo, db_hi = _pairs_sums(
                    x_w, dy_w, w_lo, w_hi, mean, rstd, dw_lo, dw_hi, db_lo, db_hi,
                    WEIGHT_GRAD, BIAS_GRAD, BF16,
                )  # fmt: skip
                tl.store(SUMS + row * CHUNKS_POW2 + chunk, pack_pair(s1, s2))
            else:
                packed = tl.load(SUMS + row * CHUNKS_POW2 + parts, mask=parts < chunks, other=0)
                sums_1, sums_2 = unpack_pair(packed)
                c1, c2 = tl.sum(sums_1, axis=0) * inv_n, tl.sum(sums_2, axis=0) * inv_n
                dx_lo, dx_hi = _pairs_dx(x_w, dy_w, w_lo, w_hi, mean, rstd, c1, c2, BF16)
                dx = tl.interleave(dx_lo, dx_hi).to(DX.dtype.element_ty)
                tl.store(DX + row * stride_dx + cols_x, dx, mask=mask_x)
    if STAGE != 2:
        if WEIGHT_GRAD:
            tl.store(DW_PARTIAL + slot.to(tl.int64) * N + cols_x, tl.interleave(dw_lo, dw_hi),
                     mask=mask_x)  # fmt: skip
        if BIAS_GRAD:
            tl.store(DB_PARTIAL + slot.to(tl.int64) * N + cols_x, tl.interleave(db_lo, db_hi),
                     mask=mask_x)  # fmt: skip


@triton.jit
def _pairs_dx(x_w, dy_w, w_lo, w_hi, mean, rstd, c1, c2, BF16: tl.constexpr):
    """dx = rstd * (w*dy - xhat * c1 - c2) of a row's (even, odd) columns from x, with
    xhat = (x - mean) * rstd folded into two row factors: x * a + (w*dy * rstd + b), a
    multiply and two FMAs an element."""
    x_lo, x_hi = _pair_floats(x_w, BF16)
    dy_lo, dy_hi = _pair_floats(dy_w, BF16)
    a = -(c1 * rstd * rstd)
    b = (mean * c1 * rstd - c2) * rstd
    dx_lo = tl.fma(x_lo, a, tl.fma(dy_lo * w_lo, rstd, b))
    dx_hi = tl.fma(x_hi, a, tl.fma(dy_hi * w_hi, rstd, b))
    return dx_lo, dx_hi


@triton.jit
def _pairs_sums(x_w, dy_w, w_lo, w_hi, mean, rstd, dw_lo, dw_hi, db_lo, db_hi,
                WEIGHT_GRAD: tl.constexpr, BIAS_GRAD: tl.constexpr, BF16: tl.constexpr):  # fmt: skip
    """Phase A of a row's (even, odd) columns: its chunk's sums of xhat * w*dy and of w*dy,
    and the dweight / dbias partials with the row added (xhat = x * rstd - mean * rstd, one
    FMA). Columns past the row's end read x = dy = 0: their xhat is not 0, but everything it
    enters is multiplied by dy, so no select."""
    x_lo, x_hi = _pair_floats(x_w, BF16)
    dy_lo, dy_hi = _pair_floats(dy_w, BF16)
    shift = -mean * rstd
    xhat_lo = tl.fma(x_lo, rstd, shift)
    xhat_hi = tl.fma(x_hi, rstd, shift)
    wdy_lo = dy_lo * w_lo
    wdy_hi = dy_hi * w_hi
    s1, s2 = _sum_pair(tl.fma(xhat_lo, wdy_lo, xhat_hi * wdy_hi), wdy_lo + wdy_hi, 0)
    if WEIGHT_GRAD:
        dw_lo = tl.fma(dy_lo, xhat_lo, dw_lo)
        dw_hi = tl.fma(dy_hi, xhat_hi, dw_hi)
    if BIAS_GRAD:
        db_lo += dy_lo
        db_hi += dy_hi
    return s1, s2, dw_lo, dw_hi, db_lo, db_hi


@triton.jit
def _pairs_step(i, first, slots, M, rows_here, X, DY, W, MEAN, RSTD, DX, SUMS, cols, cols_x,
                mask, mask_x, parts, chunks, chunk, stride_x, stride_dy, stride_dx, inv_n, w_lo,
                w_hi, x_p, dy_p, mean_p, rstd_p, x_c, dy_c, mean_c, rstd_c, dw_lo, dw_hi, db_lo,
                db_hi, HAS_WEIGHT: tl.constexpr, WEIGHT_GRAD: tl.constexpr,
                BIAS_GRAD: tl.constexpr, CHUNKS_POW2: tl.constexpr, BF16: tl.constexpr,
                HOLD_W: tl.constexpr, HOLD_X: tl.constexpr, EVICT_FIRST: tl.constexpr,
                cols_w0, cols_w1, LAG: tl.constexpr, L2_AHEAD: tl.constexpr,
                KEEP_ROWS: tl.constexpr):  # fmt: skip
    """Step i of ``layer_norm_bwd_pairs_kernel``'s one-launch pipeline: row i + 1's chunk
    loaded (returned with its statistics, and the dweight / dbias partials), row i's sums
    published (phase A, from ``x_c``), dx of row i - LAG written (phase B, from ``x_p`` or a
    re-read). Rows are never masked (a masked load zeroes its registers first): row i + 1's
    prefetch past the last row re-reads the last row and row i - LAG's re-read before the
    first row reads the first, and neither is used (phase A runs only for rows that exist,
    phase B stores only those)."""
    row_a = first + i * slots
    row_b = row_a - LAG * slots
    row_n = tl.minimum(row_a + slots, M - 1)
    x_n, dy_n, mean_n, rstd_n = _pairs_group(X, DY, MEAN, RSTD, row_n, cols, mask, stride_x,
                                             stride_dy, False, KEEP_ROWS)  # fmt: skip
    if L2_AHEAD > 0:
        row_f = tl.minimum(row_a + (1 + L2_AHEAD) * slots, M - 1)
        _pairs_l2_prefetch(X + row_f * stride_x, DY + row_f * stride_dy, cols_w0, cols_w1,
                           (cols.shape[0] + 31) // 32)  # fmt: skip
    valid_b = i >= LAG
    words = SUMS + row_b * CHUNKS_POW2 + parts
    words_mask = tl.where(valid_b, parts < chunks, False)
    packed = tl.load(words, mask=words_mask, other=0, volatile=True)
    if i < rows_here:  # phase A: row i
        if HOLD_W:
            wa_lo, wa_hi = w_lo, w_hi
        else:
            wa_lo, wa_hi = _pairs_weight(W, cols, mask, HAS_WEIGHT, BF16)
        s1, s2, dw_lo, dw_hi, db_lo, db_hi = _pairs_sums(
            x_c, dy_c, wa_lo, wa_hi, mean_c, rstd_c, dw_lo, dw_hi, db_lo, db_hi, WEIGHT_GRAD,
            BIAS_GRAD, BF16,
        )  # fmt: skip
        tl.atomic_xchg(SUMS + row_a * CHUNKS_POW2 + chunk, pack_pair(s1, s2), sem="relaxed")
    # phase B: row i - 1, held since phase A (HOLD_X) or re-read (an L1 or L2 hit)
    mean_b, rstd_b = mean_p, rstd_p
    if HOLD_X:
        x_b, dy_b = x_p, dy_p
    elif LAG == 1:
        x_b, dy_b, _, _ = _pairs_group(X, DY, MEAN, RSTD, tl.maximum(row_b, 0), cols, mask,
                                       stride_x, stride_dy, EVICT_FIRST)  # fmt: skip
    else:  # row i - LAG's statistics are not among the carried rows: re-read with x and dy
        x_b, dy_b, mean_b, rstd_b = _pairs_group(X, DY, MEAN, RSTD, tl.maximum(row_b, 0), cols,
                                                 mask, stride_x, stride_dy, EVICT_FIRST)  # fmt: skip
    while tl.max((packed == UNPUBLISHED).to(tl.int32), axis=0) > 0:
        packed = tl.load(words, mask=words_mask, other=0, volatile=True)
    sums_1, sums_2 = unpack_pair(packed)  # masked-off words read as +0.0
    c1, c2 = tl.sum(sums_1, axis=0) * inv_n, tl.sum(sums_2, axis=0) * inv_n
    if HOLD_W:
        wb_lo, wb_hi = w_lo, w_hi
    else:
        wb_lo, wb_hi = _pairs_weight(W, cols, mask, HAS_WEIGHT, BF16)
    dx_lo, dx_hi = _pairs_dx(x_b, dy_b, wb_lo, wb_hi, mean_b, rstd_b, c1, c2, BF16)
    dx = tl.interleave(dx_lo, dx_hi).to(DX.dtype.element_ty)
    tl.store(DX + row_b * stride_dx + cols_x, dx, mask=tl.where(valid_b, mask_x, False))
    return x_n, dy_n, mean_n, rstd_n, dw_lo, dw_hi, db_lo, db_hi


@triton.jit
def _pairs_l2_prefetch(x_row, dy_row, first_word, last_word, LINES: tl.constexpr):
    """Ask L2 for the 128-byte lines of a row's chunk of x and dy words (``x_row``,
    ``dy_row``: the row's first word; the chunk's words ``first_word`` to ``last_word``, at most
    ``LINES`` lines): ``prefetch.global.L2``, no result and no register held. A hint: nothing
    waits for it, and no address past the chunk's last word is asked for."""
    at = tl.minimum(first_word + tl.arange(0, LINES) * 32, last_word)  # 32 words a line
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l",
                              [(x_row + at).to(tl.int64, bitcast=True)], dtype=tl.int32,
                              is_pure=False, pack=1)  # fmt: skip
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l",
                              [(dy_row + at).to(tl.int64, bitcast=True)], dtype=tl.int32,
                              is_pure=False, pack=1)  # fmt: skip
