"""Carrying a config tuned for one problem to a nearby one, for the nearest-match lookup.

Some knobs are tied to the shape they were tuned on: a kernel that holds whole rows uses a block
equal to the row length rounded up to a power of two, so a neighbour's block is wrong for a row of
another length and its config would be rejected by the space. A :data:`Transfer` rewrites such a
config for the new problem, keeping what the tuning found (the tile's size, the elements per
thread); the lookup then checks the result against the space like any other config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from warpforge.tune.space import next_power_of_2

Transfer = Callable[[Mapping[str, object], Mapping[str, object], Mapping[str, object]], dict]
"""``transfer(config, source_features, target_features)`` -> the config for the target."""

MAX_WARPS = 32


def _int(mapping: Mapping[str, object], key: str) -> int:
    return int(mapping[key])  # type: ignore[call-overload]


def row_tile_transfer(
    *,
    block: str = "BLOCK_N",
    rows: str = "ROWS",
    warps: str = "num_warps",
    row_length: str = "N",
    row_count: str = "M",
    whole_rows: Callable[[Mapping[str, object]], bool] = lambda features: True,
    max_rows: int = 64,
) -> Transfer:
    """A transfer for row kernels with ``rows`` rows of ``block`` columns per program.

    A whole-row config takes the target's row rounded up as its block; rows per program scale so
    the tile keeps its size (at least one row, at most the target's rows), and warps scale with the
    tile so each thread keeps its share. A chunked config (block shorter than the row) keeps its
    chunk while the target's row is still longer than it. A tiled config (``whole_rows`` false for
    the features) keeps its block unless the target's row is narrower.
    """

    def transfer(
        config: Mapping[str, object], source: Mapping[str, object], target: Mapping[str, object]
    ) -> dict[str, object]:
        out = dict(config)
        old_block, old_rows = _int(config, block), _int(config, rows)
        n_source, n_target = _int(source, row_length), _int(target, row_length)
        rounded = next_power_of_2(n_target)
        if old_block < n_source and old_block < n_target:
            return out  # chunked before and after: the chunk carries over
        if whole_rows(target) or old_block > rounded:
            new_block = rounded if whole_rows(target) else max(16, rounded)
        else:
            return out
        tile = old_block * old_rows
        target_rows = next_power_of_2(_int(target, row_count))
        new_rows = max(1, min(tile // new_block, max_rows, target_rows))
        new_tile = new_block * new_rows
        threads_share = max(1, _int(config, warps) * new_tile // tile)  # elements per thread kept
        out.update(
            {
                block: new_block,
                rows: new_rows,
                warps: min(MAX_WARPS, next_power_of_2(threads_share)),
            }
        )
        return out

    return transfer


def matmul_tile_transfer(
    *,
    block_m: str = "BLOCK_M",
    block_n: str = "BLOCK_N",
    block_k: str = "BLOCK_K",
    stages: str = "num_stages",
    m: str = "M",
    n: str = "N",
    k: str = "K",
    max_whole_k: int = 128,
    min_stages: int = 2,
    max_stages: int = 5,
) -> Transfer:
    """A transfer for matmul tiles: a ``block_k`` that held the whole reduction follows ``K``.

    A tile tuned where one ``block_k`` step covered all of ``K`` (``K`` rounded up to a power of
    2, at least 16) covers the target's whole ``K`` too while that stays at most ``max_whole_k``:
    the kernel then loads each operand tile once, which is what the tuning chose. A ``block_k``
    wider than the target's ``K`` rounded up shrinks to it. When ``block_k`` changes, the
    pipeline keeps the ``K`` elements it holds in flight (``num_stages * block_k``, so its shared
    memory), clamped to ``[min_stages, max_stages]``. ``block_m``/``block_n`` wider than the
    target's ``M``/``N`` rounded up (at least 16) shrink to it; otherwise the tile carries over.
    """

    def rounded(size: int) -> int:
        return max(16, next_power_of_2(size))

    def transfer(
        config: Mapping[str, object], source: Mapping[str, object], target: Mapping[str, object]
    ) -> dict[str, object]:
        out = dict(config)
        old_k = _int(config, block_k)
        whole_k = rounded(_int(target, k))
        if old_k >= rounded(_int(source, k)) and whole_k <= max_whole_k:
            new_k = whole_k  # the reduction in one step, before and after
        else:
            new_k = min(old_k, whole_k)
        if new_k != old_k:
            in_flight = _int(config, stages) * old_k
            out[block_k] = new_k
            out[stages] = max(min_stages, min(max_stages, in_flight // new_k))
        for block, size in ((block_m, m), (block_n, n)):
            out[block] = min(_int(config, block), rounded(_int(target, size)))
        return out

    return transfer
