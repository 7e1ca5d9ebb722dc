"""Launch configs of generated blueprint kernels, read from ``warpforge.tune``.

Every generated kernel reads its launch config through :func:`launch_config`:
``warpforge.tune.config_for("blueprint.<blueprint name>.<kernel name>", features, default)``, once
per (kernel, sizes, device) per loaded program. The features identify the generated code
(``graph``: the blueprint's canonical hash, the generator's and the launchers' versions, so a
tuned config never reaches different code) and the sizes (``M``/``N`` rows and columns of a row group, ``B``/``M``/
``N``/``K`` and the operand dtype of a matmul); a row group also says whether it holds whole rows
(``whole_rows``). The default is the hand-written heuristic. A stored config is checked against
:data:`ROWS_SPACE` or :data:`MATMUL_SPACE` before use, so a bad shipped entry costs speed, never
correctness. The suite's kernels are registered as tunables by :mod:`warpforge.blueprint.tunables`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from warpforge.blueprint.codegen import (
    TEMPLATE_VERSIONS,
    FusionGroup,
    KernelSourceGenerator,
    Plan,
    template_of,
)
from warpforge.blueprint.ir import BlueprintIR
from warpforge.blueprint.registry import OperatorRegistry, broadcast_shapes
from warpforge.tune.space import (
    ConfigSpace,
    next_power_of_2,
    register_budget,
    relation,
    shared_memory_budget,
)
from warpforge.tune.transfer import Transfer, matmul_tile_transfer, row_tile_transfer

_MAX_GRID_Y = 65535
_POWERS_OF_2 = tuple(1 << i for i in range(16))  # 1 .. 32768

LAUNCH_VERSION = 1
"""Bumped when the launchers change what a config means; part of every suite tunable's hash."""


def _int(mapping: Mapping[str, object], key: str) -> int:
    return int(mapping[key])  # type: ignore[call-overload]


# ------------------------------------------------------------------------------ row groups


def _row_block(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    block_n, n = _int(config, "BLOCK_N"), _int(features, "N")
    if features["whole_rows"]:
        if block_n != next_power_of_2(n):
            return f"a whole-row kernel takes BLOCK_N = N={n} rounded up to a power of 2"
        return None
    if block_n > max(16, next_power_of_2(n)):
        return f"BLOCK_N={block_n} is wider than N={n} rounded up"
    if block_n < min(512, next_power_of_2(n)):
        return "column tiles narrower than 512 (or the row) only add programs"
    if math.ceil(n / block_n) > _MAX_GRID_Y:
        return f"{math.ceil(n / block_n)} column tiles exceed the CUDA grid's {_MAX_GRID_Y}"
    return None


def _row_tile(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    block_m, block_n, warps = (_int(config, k) for k in ("BLOCK_M", "BLOCK_N", "num_warps"))
    if block_m > next_power_of_2(_int(features, "M")):
        return f"BLOCK_M={block_m} exceeds M rounded up"
    tile = block_m * block_n
    if block_m > 1 and tile > 8192:
        return f"a {tile}-element tile of several rows (at most 8192)"
    threads = 32 * warps
    if tile < threads and warps > 1:
        return f"a {tile}-element tile leaves some of the {threads} threads idle"
    if not features["whole_rows"]:
        if tile < min(
            1024, next_power_of_2(_int(features, "M")) * next_power_of_2(_int(features, "N"))
        ):
            return f"a {tile}-element tile: pointwise programs that small only add launches"
        if not 8 * threads <= tile <= 32 * threads:
            return f"{tile / threads:g} elements per thread (8 to 32 keep loads 16-byte wide)"
    return None


ROWS_SPACE = ConfigSpace(
    {
        "BLOCK_M": _POWERS_OF_2[:8],
        "BLOCK_N": _POWERS_OF_2[4:],
        "num_warps": (1, 2, 4, 8, 16, 32),
    },
    constraints=(
        relation("row_block", _row_block),
        relation("tile", _row_tile),
        # a generated row kernel keeps a few fp32 values per element live (inputs, the chain)
        register_budget(
            lambda c, f: (
                4 * math.ceil(_int(c, "BLOCK_M") * _int(c, "BLOCK_N") / (32 * _int(c, "num_warps")))
                + 32
            )
        ),
    ),
)
"""Launch configs of a row group: rows per program, columns per program, warps."""


ROWS_TRANSFER = row_tile_transfer(
    rows="BLOCK_M", whole_rows=lambda features: bool(features["whole_rows"]), max_rows=128
)
"""A neighbour's row config for another row length: whole rows re-blocked, the tile kept."""


def rows_default(n_rows: int, n_cols: int, whole_rows: bool) -> dict[str, int]:
    """The untuned launch: whole rows (or 1024-column tiles), ~4K-element tiles, warps by size."""
    block_n = next_power_of_2(n_cols) if whole_rows else min(next_power_of_2(n_cols), 1024)
    block_m = max(1, min(4096 // block_n, next_power_of_2(n_rows)))
    tile = block_m * block_n
    warps = 4 if tile <= 2048 else 8 if tile <= 8192 else 16
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps}


# ------------------------------------------------------------------------------ matmul groups


def _matmul_shared_memory(config: Mapping[str, object], features: Mapping[str, object]) -> int:
    itemsize = 4 if features["dtype"] == "float32" else 2
    per_stage = (_int(config, "BLOCK_M") + _int(config, "BLOCK_N")) * _int(config, "BLOCK_K")
    return per_stage * itemsize * _int(config, "num_stages")


def _matmul_tiles(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    # Small tiles exist for small problems (and the interpreter); large problems take >= 64 (K: 32
    # for float32, 64 for 16-bit operands, whose K steps of 32 starve the tensor cores' pipeline).
    k_floor = 32 if features["dtype"] == "float32" else 64
    for block, size, floor in (
        ("BLOCK_M", "M", 64),
        ("BLOCK_N", "N", 64),
        ("BLOCK_K", "K", k_floor),
    ):
        tile, rounded = _int(config, block), max(16, next_power_of_2(_int(features, size)))
        if tile > rounded:
            return f"{block}={tile} exceeds {size} rounded up ({rounded})"
        if tile < min(floor, rounded):
            return f"{block}={tile} is below {min(floor, rounded)} for {size}={features[size]}"
    return None


def _accumulator_registers(config: Mapping[str, object], features: Mapping[str, object]) -> int:
    """Registers a thread needs, estimated: its share of the fp32 accumulator, plus 64."""
    threads = 32 * _int(config, "num_warps")
    return _int(config, "BLOCK_M") * _int(config, "BLOCK_N") // threads + 64


MATMUL_SPACE = ConfigSpace(
    {
        "BLOCK_M": (16, 32, 64, 128, 256),
        "BLOCK_N": (16, 32, 64, 128, 256),
        "BLOCK_K": (16, 32, 64, 128),
        "GROUP_M": (8,),
        "num_warps": (4, 8),
        "num_stages": (2, 3, 4, 5),
    },
    constraints=(
        relation("tiles", _matmul_tiles),
        shared_memory_budget(_matmul_shared_memory),
        register_budget(_accumulator_registers, limit=192),
    ),
)
"""Launch configs of a plain matmul group (the usual Hopper GEMM tiles; pruned by the
accumulator's registers and the pipeline's shared memory); one with row ops takes
:data:`MATMUL_ROWS_SPACE`."""


def _one_tile(config: Mapping[str, object], features: Mapping[str, object]) -> bool:
    return _int(config, "BLOCK_N") >= _int(features, "N")


def _matmul_rows_shared_memory(config: Mapping[str, object], features: Mapping[str, object]) -> int:
    # one tile with the whole K in one block has no loop to pipeline: one stage of operands
    if _one_tile(config, features) and _int(config, "BLOCK_K") >= _int(features, "K"):
        return _matmul_shared_memory({**config, "num_stages": 1}, features)
    return _matmul_shared_memory(config, features)


def _matmul_rows_tiles(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    if not _one_tile(config, features):
        if _int(config, "BLOCK_N") > 256:
            return "N tiles wider than 256 only as one tile spanning the row"
        if _int(config, "num_warps") > 8:
            return "16 warps only for one tile spanning the row"
        return _matmul_tiles(config, features)
    if _int(config, "BLOCK_N") != max(16, next_power_of_2(_int(features, "N"))):
        return f"one tile spanning the row takes BLOCK_N = N={features['N']} rounded up"
    if _int(config, "BLOCK_K") >= _int(features, "K") and _int(config, "num_stages") != 2:
        return "one tile with K in one block has no loop to pipeline (num_stages 2 stands for it)"
    threads, needed = 32 * _int(config, "num_warps"), _accumulator_registers(config, features)
    if needed > 65536 // threads:  # ptxas refused 64 x 1024 on 16 warps (session 20 call 7)
        return f"~{needed} registers a thread, {threads} threads get at most {65536 // threads}"
    # the row's statistics come from registers: rows per program may go below 64
    return _matmul_tiles({**config, "BLOCK_M": max(64, _int(config, "BLOCK_M"))}, features)


MATMUL_ROWS_SPACE = ConfigSpace(
    {
        **MATMUL_SPACE.parameters,
        "BLOCK_N": (*MATMUL_SPACE.parameters["BLOCK_N"], 512, 1024, 2048),  # type: ignore[misc]
        "num_warps": (4, 8, 16),
    },
    constraints=(
        relation("tiles", _matmul_rows_tiles),
        shared_memory_budget(_matmul_rows_shared_memory),
        register_budget(_accumulator_registers, limit=192),
    ),
)
"""Launch configs of a matmul group with streaming row ops: ``BLOCK_N`` is the width of the N
tiles each program walks (``GROUP_M`` is unused). Beside the :data:`MATMUL_SPACE` tiles, one tile
spanning the whole row (``BLOCK_N`` = N rounded up, up to 2048 columns, 16 warps allowed, fewer
than 64 rows a program): the kernel then computes each product once instead of twice."""

MATMUL_TRANSFER = matmul_tile_transfer(
    max_whole_k=max(MATMUL_SPACE.parameters["BLOCK_K"]),  # type: ignore[type-var]
    min_stages=min(MATMUL_SPACE.parameters["num_stages"]),  # type: ignore[type-var]
    max_stages=max(MATMUL_SPACE.parameters["num_stages"]),  # type: ignore[type-var]
)
"""A neighbour's matmul tile for other sizes: a K tile that held the whole reduction follows K."""


def matmul_default(
    features: Mapping[str, object], on_gpu: bool, row_passes: bool = False
) -> dict[str, int]:
    """The untuned launch: 128x256 tiles (128x128 or x64 for narrow N), 8 warps, 4 stages (3 for
    float32) on the GPU (a kernel with row passes: 64x64 tiles, 4 warps); small tiles under the
    interpreter (they keep numpy fast)."""
    if not on_gpu:
        return {
            "BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8,
            "num_warps": 4, "num_stages": 1,
        }  # fmt: skip
    block_k = 32 if features["dtype"] == "float32" else 64
    block_k = min(block_k, max(16, next_power_of_2(_int(features, "K"))))
    if row_passes:  # K in one block when it fits 128: the A tile is then loaded once
        single_k = max(16, next_power_of_2(_int(features, "K")))
        k_block = single_k if single_k <= 128 else block_k
        # rows of <= 64 columns are one tile; with K in one block there is no loop to pipeline
        no_loop = _int(features, "N") <= 64 and k_block >= _int(features, "K")
        return {
            "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": k_block,
            "GROUP_M": 8, "num_warps": 4, "num_stages": 2 if no_loop else 3,
        }  # fmt: skip
    n = _int(features, "N")
    return {  # the best measured tile of the suite's large GEMMs on the H100 (2026-11-22)
        "BLOCK_M": 128,
        "BLOCK_N": 256 if n >= 256 else 128 if n >= 128 else 64,
        "BLOCK_K": block_k,
        "GROUP_M": 8,
        "num_warps": 8,
        "num_stages": 3 if features["dtype"] == "float32" else 4,
    }


def matmul_sizes(
    op: str, a_shape: Sequence[int], b_shape: Sequence[int]
) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of ``matmul(a, b)`` or ``linear(a, b)`` (b is ``[N, K]``), as launched."""
    if op == "linear":
        a_shape = (math.prod(a_shape[:-1]), a_shape[-1])
        b_shape = (b_shape[1], b_shape[0])
    batch = broadcast_shapes([tuple(a_shape[:-2]), tuple(b_shape[:-2])])
    return math.prod(batch), int(a_shape[-2]), int(b_shape[-1]), int(a_shape[-1])


# ------------------------------------------------------------------------------ the lookup


def space_of(group: FusionGroup) -> tuple[ConfigSpace, Transfer]:
    """The launch configs ``group``'s kernel takes, and how a tuned one carries to other sizes."""
    if group.kind == "rows":
        return ROWS_SPACE, ROWS_TRANSFER
    return (MATMUL_ROWS_SPACE if group.has_row_op else MATMUL_SPACE), MATMUL_TRANSFER


def tunable_name(ir: BlueprintIR, group: FusionGroup) -> str:
    return f"blueprint.{ir.name}.{group.kernel_name}"


def graph_identity(
    ir: BlueprintIR, registry: OperatorRegistry | None = None, kind: str = "rows"
) -> str:
    """What a launch config of a ``kind`` group (a :func:`template_of` name) depends on: the
    graph (dtypes included), that kernel template's version and the launchers' (a bump of the
    template retires its tuned configs; a bump of the launchers retires every tuned config of the
    blueprint)."""
    return f"{ir.canonical_hash(registry)[:16]}/g{TEMPLATE_VERSIONS[kind]}/l{LAUNCH_VERSION}"


def _group_dtype(plan: Plan, group: FusionGroup) -> str:
    return plan.schemas[group.nodes[0].name].dtype


def group_features(
    graph: str, plan: Plan, group: FusionGroup, sizes: tuple[int, ...]
) -> dict[str, object]:
    """The database key of one launch of ``group`` of the blueprint ``graph`` (its
    :func:`graph_identity`): ``sizes`` is (rows, columns) for a row group, (batch, M, N, K) for a
    matmul."""
    if group.kind == "rows":
        n_rows, n_cols = sizes
        return {
            "graph": graph,
            "M": int(n_rows),
            "N": int(n_cols),
            "whole_rows": bool(group.has_row_op),
        }
    batch, m, n, k = sizes
    operand_dtype = plan.schemas[group.nodes[0].inputs[0]].dtype
    return {
        "graph": graph,
        "B": int(batch),
        "M": int(m),
        "N": int(n),
        "K": int(k),
        "dtype": operand_dtype,
    }


def launch_config(
    ir: BlueprintIR,
    plan: Plan,
    group: FusionGroup,
    sizes: tuple[int, ...],
    device: torch.device,
    registry: OperatorRegistry | None = None,
) -> dict[str, int]:
    """The config a generated kernel of ``plan`` launches with: tuned when known, else the
    heuristic. ``sizes`` as for :func:`group_features`; ``registry`` is the blueprint's operator
    registry (the default one when ``None``)."""
    from warpforge.tune.lookup import checked_config_for

    features = group_features(graph_identity(ir, registry, template_of(group)), plan, group, sizes)
    if group.kind == "rows":
        default = rows_default(sizes[0], sizes[1], group.has_row_op)
    else:
        on_gpu = torch.device(device).type == "cuda"
        default = matmul_default(features, on_gpu, group.has_row_op)
    space, transfer = space_of(group)
    chosen = checked_config_for(
        tunable_name(ir, group), features, default, space=space, transfer=transfer, device=device
    )
    return {k: int(v) for k, v in chosen.items()}  # type: ignore[call-overload]


_PLANS: dict[str, Plan] = {}


def plan_of(ir: BlueprintIR) -> Plan:
    """The fusion plan of ``ir`` (kept per graph: the tuner asks for it on every trial)."""
    key = ir.canonical_hash()
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = KernelSourceGenerator(ir).plan()
    return plan
