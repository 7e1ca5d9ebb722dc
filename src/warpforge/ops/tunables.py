"""The op kernels as ``warpforge.tune`` tunables, and the launch-config lookup the ops call.

Each tunable kernel family picks its launch parameters in one function of its op module
(``_fwd_launch_config`` / ``_bwd_launch_config`` / ``_launch_config``). That function is
``functools.lru_cache``-d per (shape, dtype, device) and, on a miss, asks :func:`tuned_config`:
``warpforge.tune.config_for(name, features, default=<the hand-picked heuristic>)``, i.e. the shipped
JSON or the performance database when they know the problem (exactly or by nearest neighbour),
else the heuristic. A broken database, a malformed shipped entry or a config the kernel's space
rejects never fails an op: the heuristic is used and the reason is logged.

Registered here (``warpforge tune NAME`` tunes them): ``rms_norm.fwd``, ``rms_norm.bwd``,
``add_rms_norm.fwd``/``.bwd`` (RMSNorm fused with the residual add), ``layer_norm.fwd``,
``layer_norm.bwd``, ``softmax.fwd``, ``softmax.bwd`` and ``cross_entropy.fwd``. The
registry imports this module when a name is looked up (``warpforge.tune.tunable._PROVIDERS``);
it imports Triton, so ``import warpforge.ops`` never loads it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping

import torch

from warpforge.ops._row_problems import SWEEP
from warpforge.ops._rows import RowLaunchConfig, next_power_of_2, row_launch_shape
from warpforge.tune.space import ConfigSpace, at_most, register_budget, relation
from warpforge.tune.transfer import row_tile_transfer
from warpforge.tune.tunable import (
    Shape,
    TunableKernel,
    dtype_name,
    register_tunable,
    source_hash,
)

_POWERS_OF_2 = tuple(1 << i for i in range(15))  # 1 .. 16384
_WARPS = (1, 2, 4, 8, 16, 32)
_CHUNK_BLOCKS_MIN = 1024
"""Narrowest chunk the chunked (long-row) kernels are tuned with: narrower ones only add loop
iterations."""

ROW_KEYS = ("BLOCK_N", "ROWS", "num_warps")
"""Parameters of a row-wise kernel's tunable config (see :class:`RowLaunchConfig`)."""


# --------------------------------------------------------------------------- the lookup


def tuned_config(
    kernel: str,
    features: Mapping[str, object],
    default: Mapping[str, object],
    device: torch.device | str,
) -> dict[str, object]:
    """``config_for(kernel, features, default)``, checked against the kernel's space; the
    ``default`` when the lookup fails or returns a config the space rejects."""
    from warpforge.tune.lookup import checked_config_for

    return checked_config_for(kernel, features, default, device=device)


def row_features(M: int, N: int, dtype: torch.dtype) -> dict[str, object]:
    return {"M": int(M), "N": int(N), "dtype": dtype_name(dtype)}


def row_config_dict(config: RowLaunchConfig) -> dict[str, object]:
    return {
        "BLOCK_N": config.block_n,
        "ROWS": config.rows_per_program,
        "num_warps": config.num_warps,
    }


def tuned_row_launch(
    kernel: str,
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    heuristic: RowLaunchConfig,
    *,
    reread_operands: int,
    resident_warps: int | None = None,
) -> RowLaunchConfig:
    """The launch of row-wise ``kernel``: tuned when known, else ``heuristic``."""
    launch, _ = _tuned_row(kernel, M, N, dtype, device, heuristic, {}, reread_operands,
                           resident_warps)  # fmt: skip
    return launch


NORM_BWD_KNOBS: dict[str, object] = {"RELOAD": False, "PROGRAMS_PER_SM": 0}
"""The norm backward's knobs beyond :data:`ROW_KEYS` (``warpforge.ops.norm.BwdKnobs``), at the
values that leave the launch to the heuristics."""


def tuned_norm_bwd_launch(
    kernel: str,
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    heuristic: RowLaunchConfig,
    *,
    resident_warps: int,
) -> tuple[RowLaunchConfig, dict[str, object]]:
    """The norm backward's launch (tuned when known, else ``heuristic``) and its knobs."""
    return _tuned_row(kernel, M, N, dtype, device, heuristic, NORM_BWD_KNOBS, 2, resident_warps)


def _tuned_row(
    kernel: str,
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    heuristic: RowLaunchConfig,
    knobs: Mapping[str, object],
    reread_operands: int,
    resident_warps: int | None,
) -> tuple[RowLaunchConfig, dict[str, object]]:
    """The tuned row launch and the tuned values of ``knobs`` (their defaults when untuned)."""
    default = {**row_config_dict(heuristic), **knobs}
    chosen = tuned_config(kernel, row_features(M, N, dtype), default, device)
    tuned_knobs = {key: chosen[key] for key in knobs}
    if all(chosen[key] == default[key] for key in ROW_KEYS):
        return heuristic, tuned_knobs
    launch = row_launch_from_config(
        chosen, M, N, dtype, device, reread_operands=reread_operands, resident_warps=resident_warps
    )
    return launch, tuned_knobs


def row_launch_from_config(
    config: Mapping[str, object],
    M: int,
    N: int,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    reread_operands: int,
    resident_warps: int | None = None,
) -> RowLaunchConfig:
    return row_launch_shape(
        M,
        N,
        dtype,
        device,
        block_n=int(config["BLOCK_N"]),  # type: ignore[call-overload]
        rows_per_program=int(config["ROWS"]),  # type: ignore[call-overload]
        num_warps=int(config["num_warps"]),  # type: ignore[call-overload]
        reread_operands=reread_operands,
        resident_warps=resident_warps,
    )


# --------------------------------------------------------------------------- config spaces


def _int(mapping: Mapping[str, object], key: str) -> int:
    return int(mapping[key])  # type: ignore[call-overload]


def _row_block_fits(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    block, rows, n = _int(config, "BLOCK_N"), _int(config, "ROWS"), _int(features, "N")
    if block >= n:
        if block != next_power_of_2(n):
            return f"BLOCK_N={block} covers N={n} with a wider block than its power of 2"
        return None
    if rows != 1:
        return f"the chunked kernel (BLOCK_N={block} < N={n}) takes one row per program"
    if block < _CHUNK_BLOCKS_MIN:
        return f"chunks narrower than {_CHUNK_BLOCKS_MIN} only add loop iterations"
    return None


def _threads_have_work(config: Mapping[str, object], _features: Mapping[str, object]) -> str | None:
    tile = _int(config, "BLOCK_N") * _int(config, "ROWS")
    threads = 32 * _int(config, "num_warps")
    if tile < threads and threads > 32:
        return f"a {tile}-element tile leaves some of the {threads} threads idle"
    return None


def row_space(registers_per_element: int) -> ConfigSpace:
    """Launch configs of a row-wise kernel whose tile costs ``registers_per_element``
    registers per element held by a thread (forward ~4, backward ~8: x, dy and partials)."""

    def registers(config: Mapping[str, object], _features: Mapping[str, object]) -> int:
        tile = _int(config, "BLOCK_N") * _int(config, "ROWS")
        per_thread = math.ceil(tile / (32 * _int(config, "num_warps")))
        return registers_per_element * per_thread + 32  # + addressing and statistics

    return ConfigSpace(
        {"BLOCK_N": _POWERS_OF_2, "ROWS": _POWERS_OF_2[:7], "num_warps": _WARPS},
        constraints=(
            relation("row_block", _row_block_fits),
            at_most("ROWS", lambda c, f: next_power_of_2(_int(f, "M")), "M rounded up"),
            relation("idle_threads", _threads_have_work),
            register_budget(registers),
        ),
    )


def _whole_row_knobs(config: Mapping[str, object], features: Mapping[str, object]) -> str | None:
    if _int(config, "BLOCK_N") >= _int(features, "N"):
        return None
    if config["RELOAD"] or config["PROGRAMS_PER_SM"]:
        return "RELOAD and PROGRAMS_PER_SM apply to whole rows (BLOCK_N >= N) only"
    return None


def _programs_fit(config: Mapping[str, object], _features: Mapping[str, object]) -> str | None:
    warps = _int(config, "PROGRAMS_PER_SM") * _int(config, "num_warps")
    if warps > _MAX_WARPS_PER_SM:
        return f"{warps} warps per SM exceed the {_MAX_WARPS_PER_SM} an SM holds"
    return None


_MAX_WARPS_PER_SM = 64


def norm_backward_space() -> ConfigSpace:
    """The norm backward's launch configs: the row tile and :data:`NORM_BWD_KNOBS`. The register
    estimate is 6 a held element, not :data:`BACKWARD_ROW_SPACE`'s 8: LayerNorm's 16K-column
    rows at 32 elements a thread (16 warps) compile to 128 registers and a few dozen spilled
    words (ptxas, sm_90) and measured fastest there on the H100 (benchmarks/norm_launch_sweep.py)."""
    rows = row_space(registers_per_element=6)
    return ConfigSpace(
        {**rows.parameters, "RELOAD": (False, True), "PROGRAMS_PER_SM": (0, 1, 2, 3, 4)},
        constraints=(
            *rows.constraints,
            relation("whole_row_knobs", _whole_row_knobs),
            relation("programs_fit", _programs_fit),
        ),
    )


ROW_TRANSFER = row_tile_transfer()
"""A neighbour's row config for another row length: whole rows re-blocked, the tile kept."""


def _norm_backward_transfer(
    config: Mapping[str, object], source: Mapping[str, object], target: Mapping[str, object]
) -> dict[str, object]:
    """:data:`ROW_TRANSFER` keeping the knobs where they still apply: none for chunked rows,
    no more programs per SM than the (re-scaled) warps allow."""
    out = ROW_TRANSFER(config, source, target)
    if _int(out, "BLOCK_N") < _int(target, "N"):
        out.update(NORM_BWD_KNOBS)
    else:
        fit = _MAX_WARPS_PER_SM // _int(out, "num_warps")
        out["PROGRAMS_PER_SM"] = min(_int(out, "PROGRAMS_PER_SM"), fit)
    return out


FORWARD_ROW_SPACE = row_space(registers_per_element=4)
BACKWARD_ROW_SPACE = row_space(registers_per_element=8)
NORM_BACKWARD_SPACE = norm_backward_space()


def _cross_entropy_block_fits(
    config: Mapping[str, object], features: Mapping[str, object]
) -> str | None:
    block, vocab = _int(config, "BLOCK"), _int(features, "V")
    if block > max(16, next_power_of_2(vocab)):
        return f"BLOCK={block} is wider than V={vocab} rounded up"
    return None


CROSS_ENTROPY_SPACE = ConfigSpace(
    {"BLOCK": _POWERS_OF_2[4:], "num_warps": _WARPS[:5]},
    constraints=(
        relation("block", _cross_entropy_block_fits),
        relation(
            "idle_threads",
            lambda c, f: (
                f"a {c['BLOCK']}-element chunk leaves some of the {32 * _int(c, 'num_warps')} "
                "threads idle"
                if _int(c, "BLOCK") < 32 * _int(c, "num_warps") and _int(c, "num_warps") > 1
                else None
            ),
        ),
        register_budget(
            lambda c, f: 4 * math.ceil(_int(c, "BLOCK") / (32 * _int(c, "num_warps"))) + 32
        ),
    ),
)


# --------------------------------------------------------------------------- tunables


_ROW_SHAPES = ({"M": 16384, "N": 4096}, {"M": 32768, "N": 1024}, {"M": 4096, "N": 16384})
_ROW_CPU_SHAPES = ({"M": 5, "N": 37}, {"M": 3, "N": 130})
_ROW_SWEEP = SWEEP  # the benchmark sweep of the row-wise ops
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_BACKWARD_TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _row_features(shape: Shape, dtype: torch.dtype) -> dict[str, object]:
    return row_features(shape["M"], shape["N"], dtype)


def _randn(generator: torch.Generator, dtype: torch.dtype, device: torch.device, *size: int):
    return torch.randn(*size, generator=generator, dtype=torch.float32).to(device, dtype)


def _row_statistics(x: torch.Tensor, center: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, rstd) in fp32 as the forward kernel saves them, computed with PyTorch so that a
    backward trial times the backward alone."""
    xf = x.float()
    mean = xf.mean(dim=-1)
    centered = xf - mean[:, None] if center else xf
    rstd = torch.rsqrt(centered.square().mean(dim=-1) + _eps(center))
    return mean if center else rstd, rstd


def _norm_inputs(center: bool, backward: bool, residual: bool):
    def make(shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator):
        M, N = int(shape["M"]), int(shape["N"])
        x = _randn(generator, dtype, device, M, N)
        weight = _randn(generator, dtype, device, N)
        if not backward:
            if residual:
                return (x, _randn(generator, dtype, device, M, N), weight)
            bias = _randn(generator, dtype, device, N)
            return (x, weight, bias) if center else (x, weight)
        dy = _randn(generator, dtype, device, M, N)
        dh = _randn(generator, dtype, device, M, N) if residual else dy
        mean, rstd = _row_statistics(x, center)
        return (dy, dh, x, weight, mean, rstd)

    return make


def _norm_reference(center: bool):
    def normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
        xf = x.float() if x.dtype != torch.float64 else x
        if center:
            xf = xf - xf.mean(dim=-1, keepdim=True)
        return xf * torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)

    return normalize


def _eps(center: bool) -> float:
    return 1e-5 if center else 1e-6


def _norm_forward_run(center: bool, residual: bool):
    def run(config: Mapping[str, object], x, *operands):
        from warpforge.ops import norm

        launch = row_launch_from_config(config, *x.shape, x.dtype, x.device, reread_operands=1)
        if residual:
            res, weight = operands
            y, h, *_ = norm._norm_forward(x, weight, None, res, _eps(False), 0.0, False, launch)
            return y, h
        weight, bias = (*operands, None)[:2]
        y, *_ = norm._norm_forward(x, weight, bias, None, _eps(center), 0.0, center, launch=launch)
        return y

    return run


def _norm_forward_reference(center: bool, residual: bool):
    normalize = _norm_reference(center)

    def reference(x, *operands):
        if residual:
            res, weight = operands
            x = x + res  # rounded to the input dtype, as the op's h output is
        else:
            weight, bias = (*operands, None)[:2]
        out = normalize(x, _eps(center)) * weight.to(
            torch.promote_types(weight.dtype, torch.float32)
        )
        if not residual and bias is not None:
            out = out + bias
        return (out.to(x.dtype), x) if residual else out.to(x.dtype)

    return reference


def _norm_backward_run(center: bool, residual: bool):
    def run(config: Mapping[str, object], dy, dh, x, weight, mean, rstd):
        from warpforge.ops import norm

        M, N = x.shape
        launch = row_launch_from_config(
            config, M, N, x.dtype, x.device, reread_operands=2, resident_warps=32
        )
        knobs = norm.BwdKnobs(bool(config["RELOAD"]), _int(config, "PROGRAMS_PER_SM"))
        # LayerNorm as models use it, with a bias: its gradient is a second partial row a
        # program keeps, which changes the register budget (and so the best launch)
        dx, dw, db = norm._norm_backward(
            dy, x, weight, mean if center else None, rstd, dh if residual else None, 0.0, center,
            True, center, launch=launch, knobs=knobs,
        )  # fmt: skip
        return (dx, dw, db) if center else (dx, dw)

    return run


def _norm_backward_reference(center: bool, residual: bool):
    normalize = _norm_reference(center)

    def reference(dy, dh, x, weight, _mean, _rstd):
        leaf = x.detach().requires_grad_()
        w = weight.detach().requires_grad_()
        with torch.enable_grad():
            y = normalize(leaf, _eps(center)) * w
            dx, dw = torch.autograd.grad(y, (leaf, w), dy.to(y.dtype))
        if residual:  # h also feeds the residual stream: its gradient adds to dx
            dx = dx + dh.to(dx.dtype)
        if center:  # the bias gradient: the column sums of dy
            db = dy.to(torch.promote_types(dy.dtype, torch.float32)).sum(dim=0)
            return dx.to(x.dtype), dw.to(weight.dtype), db.to(weight.dtype)
        return dx.to(x.dtype), dw.to(weight.dtype)

    return reference


def _norm_tunable(name: str, center: bool, backward: bool, residual: bool = False) -> TunableKernel:
    from warpforge.ops import norm
    from warpforge.ops._kernels import norm as kernels

    if backward:
        source = source_hash(
            kernels.norm_bwd_rows_kernel, kernels.norm_bwd_chunked_kernel, norm._norm_backward
        )
        run = _norm_backward_run(center, residual)
        reference = _norm_backward_reference(center, residual)
        default = norm.bwd_launch_heuristic
    else:
        source = source_hash(
            kernels.norm_fwd_rows_kernel, kernels.norm_fwd_chunked_kernel, norm._norm_forward
        )
        run = _norm_forward_run(center, residual)
        reference = _norm_forward_reference(center, residual)
        default = norm.fwd_launch_heuristic
    tolerance = _BACKWARD_TOLERANCE if backward else None
    family = name.split(".")[0].replace("_", " ")
    knobs = NORM_BWD_KNOBS if backward else {}
    return TunableKernel(
        name=name,
        space=NORM_BACKWARD_SPACE if backward else FORWARD_ROW_SPACE,
        source_hash=source,
        features=_row_features,
        make_inputs=_norm_inputs(center, backward, residual),
        run=run,
        reference=reference,
        default_config=lambda f: {
            **row_config_dict(default(_int(f, "M"), _int(f, "N"), _dtype(f), _default_device())),
            **knobs,
        },
        shapes=_ROW_SHAPES,
        cpu_shapes=_ROW_CPU_SHAPES,
        sweep=_ROW_SWEEP,
        transfer=_norm_backward_transfer if backward else ROW_TRANSFER,
        dtypes=_DTYPES,
        description=f"warpforge.ops {family} {'backward' if backward else 'forward'} kernel",
        bypassed=None if backward else _norm_forward_bypass(name),
        **({"atol": tolerance, "rtol": tolerance} if tolerance else {}),
    )


def _norm_forward_bypass(name: str) -> Callable[[Mapping[str, int], torch.dtype], str | None]:
    """:attr:`TunableKernel.bypassed` of the norm forward ``name``: packed rows of the lengths
    its tables list (``NORM_FWD_TILE_LAUNCHES``, then ``norm_fwd_wide_launch``'s) run their
    kernels, not the tuned tiled one."""

    def bypassed(shape: Mapping[str, int], dtype: torch.dtype) -> str | None:
        from warpforge.ops import norm

        N, size = shape["N"], dtype.itemsize
        if (size, name, N) in norm.NORM_FWD_TILE_LAUNCHES:
            return f"norm_fwd_tile_kernel (NORM_FWD_TILE_LAUNCHES) at {N} columns"
        if norm.norm_fwd_wide_launch(N, size, name) is not None:
            return f"a one-row-a-program kernel (norm_fwd_wide_launch) at {N} columns"
        return None

    return bypassed


def _dtype(features: Mapping[str, object]) -> torch.dtype:
    return getattr(torch, str(features["dtype"]))


def _default_device() -> torch.device:
    from warpforge.runtime import default_device

    return default_device()


def _softmax_inputs(backward: bool):
    def make(shape: Shape, dtype: torch.dtype, device: torch.device, generator: torch.Generator):
        M, N = int(shape["M"]), int(shape["N"])
        x = _randn(generator, dtype, device, M, N)
        if not backward:
            return (x,)
        # the outputs the two backwards receive: softmax's probabilities, log-softmax's logs
        dy = _randn(generator, dtype, device, M, N)
        return (
            dy,
            torch.softmax(x.float(), -1).to(dtype),
            torch.log_softmax(x.float(), -1).to(dtype),
        )

    return make


def _softmax_reference(backward: bool):
    def forward(x):
        return torch.softmax(x.float() if x.dtype != torch.float64 else x, -1).to(x.dtype)

    def gradients(dy, y, log_y):
        """dx of softmax (from its output y) and of log-softmax (from its output log_y)."""
        compute = torch.promote_types(y.dtype, torch.float32)
        dyf, yf, log_yf = dy.to(compute), y.to(compute), log_y.to(compute)
        total = dyf.sum(dim=-1, keepdim=True)
        return (
            (yf * (dyf - (dyf * yf).sum(dim=-1, keepdim=True))).to(y.dtype),
            (dyf - log_yf.exp() * total).to(y.dtype),
        )

    return gradients if backward else forward


def _softmax_tunable(backward: bool) -> TunableKernel:
    """``softmax.fwd`` or ``softmax.bwd``: the row and chunked kernels. Log-softmax takes the
    same launch, so a backward trial times both (softmax's then log-softmax's) and a config wins
    on their sum: a launch tuned on softmax's alone cost the float32 log-softmax backward 5% at
    16384 x 4096 on the H200 (``benchmarks/results/session25-h200-2026-11-29``). The backward's
    two operands a row (dy, y) are read again by the chunked kernel."""
    from warpforge.ops import softmax_ops
    from warpforge.ops._kernels import softmax as kernels

    operands = 2 if backward else 1

    def run(config: Mapping[str, object], *inputs):
        launch = row_launch_from_config(
            config, *inputs[0].shape, inputs[0].dtype, inputs[0].device, reread_operands=operands
        )
        if backward:
            dy, y, log_y = inputs
            return (
                softmax_ops.softmax_backward(dy, y, False, launch=launch),
                softmax_ops.softmax_backward(dy, log_y, True, launch=launch),
            )
        return softmax_ops.softmax_forward(*inputs, False, launch=launch)

    if backward:
        source = (kernels.softmax_bwd_rows_kernel, kernels.softmax_bwd_chunked_kernel,
                  softmax_ops.softmax_backward)  # fmt: skip
        heuristic = softmax_ops.bwd_launch_heuristic
    else:
        source = (kernels.softmax_fwd_rows_kernel, kernels.softmax_fwd_chunked_kernel,
                  softmax_ops.softmax_forward)  # fmt: skip
        heuristic = softmax_ops.fwd_launch_heuristic
    direction = "backward" if backward else "forward"
    return TunableKernel(
        name="softmax.bwd" if backward else "softmax.fwd",
        space=BACKWARD_ROW_SPACE if backward else FORWARD_ROW_SPACE,
        source_hash=source_hash(*source),
        features=_row_features,
        make_inputs=_softmax_inputs(backward),
        run=run,
        reference=_softmax_reference(backward),
        default_config=lambda f: row_config_dict(
            heuristic(_int(f, "M"), _int(f, "N"), _dtype(f), _default_device())
        ),
        shapes=_ROW_SHAPES,
        cpu_shapes=_ROW_CPU_SHAPES,
        sweep=_ROW_SWEEP,
        transfer=ROW_TRANSFER,
        dtypes=_DTYPES,
        description=f"warpforge.ops softmax {direction} kernel",
        **({"atol": _BACKWARD_TOLERANCE, "rtol": _BACKWARD_TOLERANCE} if backward else {}),
    )


def _cross_entropy_tunable() -> TunableKernel:
    from warpforge.ops._kernels import cross_entropy as kernels

    # by path: ``warpforge.ops.cross_entropy`` as an attribute is the function
    cross_entropy = importlib.import_module("warpforge.ops.cross_entropy")

    def make_inputs(shape: Shape, dtype, device, generator):
        M, V = int(shape["M"]), int(shape["V"])
        logits = _randn(generator, dtype, device, M, V)
        target = torch.randint(0, V, (M,), generator=generator).to(device)
        return logits, target

    def run(config: Mapping[str, object], logits, target):
        block, warps = _int(config, "BLOCK"), _int(config, "num_warps")
        loss, _ = cross_entropy.row_losses(logits, target, -100, 0.0, 0.0, launch=(block, warps))
        return loss

    def reference(logits, target):
        x = logits.float() if logits.dtype != torch.float64 else logits
        return torch.logsumexp(x, -1) - x.gather(1, target[:, None])[:, 0]

    def default(features: Mapping[str, object]) -> dict[str, object]:
        block, warps = cross_entropy.launch_heuristic(
            _int(features, "V"), _dtype(features).itemsize
        )
        return {"BLOCK": block, "num_warps": warps}

    return TunableKernel(
        name="cross_entropy.fwd",
        space=CROSS_ENTROPY_SPACE,
        source_hash=source_hash(kernels.cross_entropy_fwd_kernel, cross_entropy.row_losses),
        features=lambda s, dt: {"M": int(s["M"]), "V": int(s["V"]), "dtype": dtype_name(dt)},
        make_inputs=make_inputs,
        run=run,
        reference=reference,
        default_config=default,
        shapes=({"M": 16384, "V": 32000}, {"M": 8192, "V": 128256}, {"M": 4096, "V": 262144}),
        cpu_shapes=({"M": 3, "V": 37}, {"M": 2, "V": 300}),
        sweep=tuple({"M": m, "V": v} for m in (4096, 16384) for v in (32000, 128256, 262144)),
        dtypes=_DTYPES,
        atol={torch.float32: 1e-4, torch.float16: 1e-3, torch.bfloat16: 1e-2},
        rtol={torch.float32: 1e-4, torch.float16: 1e-3, torch.bfloat16: 1e-2},
        description="warpforge.ops cross-entropy forward kernel (loss only)",
    )


for _tunable in (
    _norm_tunable("rms_norm.fwd", center=False, backward=False),
    _norm_tunable("rms_norm.bwd", center=False, backward=True),
    _norm_tunable("add_rms_norm.fwd", center=False, backward=False, residual=True),
    _norm_tunable("add_rms_norm.bwd", center=False, backward=True, residual=True),
    _norm_tunable("layer_norm.fwd", center=True, backward=False),
    _norm_tunable("layer_norm.bwd", center=True, backward=True),
    _softmax_tunable(backward=False),
    _softmax_tunable(backward=True),
    _cross_entropy_tunable(),
):
    register_tunable(_tunable, replace=True)
