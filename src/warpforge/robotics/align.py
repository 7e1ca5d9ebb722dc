"""N-stream sensor alignment: resample every stream onto one clock in one kernel launch.

Each stream is a ``(values, times)`` pair at its own rate, dtype and width. Every stream runs in
one launch of the streams kernel of :mod:`warpforge.robotics.resample` (each operand a tuple, an
entry per stream), each writing straight into its columns of the concatenated float32 output, or
into its own output in its own dtype with ``concat=False``.
Semantics per stream are exactly those of :func:`warpforge.robotics.resample`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from warpforge.dispatch import eager_call_allowed
from warpforge.robotics.resample import (
    METHODS,
    OUT_OF_RANGE,
    VALUE_DTYPES,
    StreamLaunch,
    batch_times,
    check_sorted_times,
    launch_streams,
    raise_out_of_range,
    resample_reference,
)
from warpforge.runtime import ExecutionPath, execution_path
from warpforge.validation import check_choice, check_same_device, check_tensor, describe

_TIME_DTYPES = (torch.float32, torch.float64, torch.int64)


def _common_dtype(times: Sequence[torch.Tensor], query: torch.Tensor) -> torch.dtype:
    dtypes = {t.dtype for t in times} | {query.dtype}
    if torch.int64 in dtypes:
        if len(dtypes) > 1:
            found = ", ".join(sorted(str(d)[6:] for d in dtypes))
            raise TypeError(
                "streams: int64 nanosecond times need int64 times in every stream and int64 "
                f"query_times, got a mix of {found}"
            )
        return torch.int64
    return torch.float64 if torch.float64 in dtypes else torch.float32


def _normalize(
    streams: object, query_times: object, methods: object
) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, list[str], bool]:
    if isinstance(streams, (str, bytes, torch.Tensor)) or not isinstance(streams, Sequence):
        raise TypeError(
            f"streams: expected a sequence of (values, times) pairs, got {describe(streams)}"
        )
    if len(streams) == 0:
        raise ValueError("streams: expected at least one (values, times) pair, got none")
    if isinstance(methods, str):
        methods = [methods] * len(streams)
    if not isinstance(methods, Sequence) or len(methods) != len(streams):
        raise ValueError(
            f"methods: expected one method name or one per stream ({len(streams)}), "
            f"got {describe(methods)}"
        )
    for k, m in enumerate(methods):
        check_choice(f"methods[{k}]", m, METHODS)
    query = check_tensor("query_times", query_times, dtypes=_TIME_DTYPES, ndim=(1, 2))
    values_list, times_list = [], []
    for k, pair in enumerate(streams):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"streams[{k}]: expected a (values, times) pair, got {describe(pair)}")
        v = check_tensor(f"streams[{k}] values", pair[0], dtypes=VALUE_DTYPES, ndim=(2, 3))
        t = check_tensor(f"streams[{k}] times", pair[1], dtypes=_TIME_DTYPES, ndim=(1, 2))
        check_same_device(values=v, times=t, query_times=query)
        values_list.append(v)
        times_list.append(t)
    batched = values_list[0].dim() == 3
    if any((v.dim() == 3) != batched for v in values_list):
        raise ValueError("streams: expected every stream's values batched [B, S, D] or none")
    batch = values_list[0].shape[0] if batched else 1
    for k, v in enumerate(values_list):
        if batched and v.shape[0] != batch:
            raise ValueError(
                f"streams[{k}] values: expected batch size {batch} (that of streams[0]), "
                f"got {describe(v)}"
            )
        if methods[k] == "slerp" and v.shape[-1] != 4:
            raise ValueError(
                f"streams[{k}] values: method 'slerp' expects quaternions (size 4 in the last "
                f"dimension), got {describe(v)}"
            )
    dtype = _common_dtype(times_list, query)
    if query.dim() == 2 and not (batched and query.shape[0] in (batch, 1)):
        raise ValueError(f"query_times: expected shape [{batch}, T] or [T], got {describe(query)}")
    if query.dtype != dtype:  # host time: even a no-op .to() costs a dispatch per call
        query = query.to(dtype)
    query = (
        query.expand(batch, query.shape[-1])
        if query.dim() == 2
        else query.unsqueeze(0).expand(batch, query.shape[0])
    )
    values_out, times_out = [], []
    for k in range(len(values_list)):  # no zip(strict=...): this runs under torch.compile too
        v, t = values_list[k], times_list[k]
        v = v if batched else v.unsqueeze(0)
        if v.stride(-1) != 1:
            v = v.contiguous()
        t = batch_times(f"streams[{k}] times", t, batch, v.shape[1], batched=batched)
        values_out.append(v)
        times_out.append(t if t.dtype == dtype else t.to(dtype))
    return values_out, times_out, query, list(methods), batched


def _align_impl(
    values: list[torch.Tensor],
    times: list[torch.Tensor],
    query: torch.Tensor,
    methods: list[str],
    out_of_range: str,
    concat: bool,
) -> list[torch.Tensor]:
    batch, queries = query.shape
    widths = [v.shape[2] for v in values]
    if execution_path(query.device) is ExecutionPath.TORCH_REFERENCE:
        # concatenated output is float32 straight from the float32 arithmetic, as in the kernel
        results = [
            resample_reference(v.float() if concat and v.dtype != torch.float64 else v, t, query,
                               None, m, out_of_range)
            for v, t, m in zip(values, times, methods, strict=True)
        ]  # fmt: skip
        masks = [mask for _, mask in results]
        outs = [out for out, _ in results]
        if concat:
            outs = [torch.cat([o.float() for o in outs], dim=-1)]
        return outs + (masks if out_of_range == "error" else [])
    write_mask = out_of_range == "error"
    masks = (
        torch.empty(len(values), batch, queries, dtype=torch.uint8, device=query.device)
        if write_mask
        else None  # no allocation a call where no mask is written
    )
    if concat:
        total = torch.empty(batch, queries, sum(widths), dtype=torch.float32, device=query.device)
        outs = [total]
        targets = [(total, sum(widths[:k])) for k in range(len(values))]
    else:
        outs = [v.new_empty(batch, queries, v.shape[2]) for v in values]
        targets = [(o, 0) for o in outs]
    launches = [
        StreamLaunch(v, t, out, col, m, masks[k] if write_mask else None)
        for k, (v, t, m, (out, col)) in enumerate(zip(values, times, methods, targets, strict=True))
    ]
    launch_streams(launches, query, out_of_range)
    return outs + (list(masks.view(torch.bool).unbind(0)) if write_mask else [])


@torch.library.custom_op("warpforge_robotics::align", mutates_args=())
def _align_op(
    values: list[torch.Tensor],
    times: list[torch.Tensor],
    query: torch.Tensor,
    methods: str,
    out_of_range: str,
    concat: bool,
) -> list[torch.Tensor]:
    # a schema has no list of strings: methods travel comma-joined
    return _align_impl(values, times, query, methods.split(","), out_of_range, concat)


@_align_op.register_fake
def _(values, times, query, methods, out_of_range, concat):
    batch, queries = query.shape
    if concat:
        width = sum(v.shape[2] for v in values)
        outs = [query.new_empty(batch, queries, width, dtype=torch.float32)]
    else:
        outs = [v.new_empty(batch, queries, v.shape[2]) for v in values]
    masks = [query.new_empty(batch, queries, dtype=torch.bool) for _ in values]
    return outs + (masks if out_of_range == "error" else [])


def _setup_context(ctx, inputs, output) -> None:
    values, times, query, methods, out_of_range, concat = inputs
    ctx.save_for_backward(query, *values, *times)
    ctx.num_streams, ctx.methods, ctx.out_of_range, ctx.concat = (
        len(values), methods.split(","), out_of_range, concat
    )  # fmt: skip


def _backward(ctx, grads):
    query, *rest = ctx.saved_tensors
    n = ctx.num_streams
    values, times = rest[:n], rest[n:]
    grad_values = []
    column = 0
    for k, (v, t) in enumerate(zip(values, times, strict=True)):
        width = v.shape[2]
        if ctx.concat:
            g = grads[0][..., column : column + width]
        else:
            g = grads[k]
        column += width
        if g is None:
            grad_values.append(None)
            continue
        with torch.enable_grad():
            leaf = v.detach().requires_grad_(True)
            out, _ = resample_reference(leaf, t, query, None, ctx.methods[k], ctx.out_of_range)
            (grad,) = torch.autograd.grad(out, [leaf], g.to(out.dtype))
        grad_values.append(grad)
    return grad_values, [None] * n, None, None, None, None


_align_op.register_autograd(_backward, setup_context=_setup_context)


def align(
    streams: Sequence[tuple[torch.Tensor, torch.Tensor]],
    query_times: torch.Tensor,
    *,
    methods: str | Sequence[str] = "linear",
    out_of_range: str = "clamp",
    concat: bool = True,
    assume_sorted: bool = False,
) -> torch.Tensor | list[torch.Tensor]:
    """Resample every ``(values, times)`` stream onto ``query_times`` in one kernel launch.

    Args:
        streams: ``(values [B, S_k, D_k] or [S_k, D_k], times [B, S_k] or [S_k])`` pairs, each at
            its own rate, value dtype (float32/float16/bfloat16) and width.
        query_times: [B, T] or [T]; float times widen to float64 if any stream uses float64;
            int64 nanoseconds need int64 everywhere.
        methods: one method for all streams or one per stream (see ``resample``).
        out_of_range: as in ``resample``; ``"error"`` costs a device sync per stream.
        concat: return one float32 [B, T, sum D_k] tensor; else a list in each stream's dtype.
        assume_sorted: skip the sortedness/NaN check of every stream's times (a few reductions
            per stream and one device sync for all).
    """
    check_choice("out_of_range", out_of_range, OUT_OF_RANGE)
    if not isinstance(concat, bool):
        raise TypeError(f"concat: expected a bool, got {describe(concat)}")
    values, times, query, methods, batched = _normalize(streams, query_times, methods)
    if not assume_sorted:
        check_sorted_times([(f"streams[{k}] times", t, None) for k, t in enumerate(times)])
    if eager_call_allowed(values):  # gradients flow to the values only
        results = _align_impl(values, times, query, methods, out_of_range, concat)
    else:
        results = _align_op(values, times, query, ",".join(methods), out_of_range, concat)
    outs = results[: 1 if concat else len(values)]
    if out_of_range == "error":
        for k, mask in enumerate(results[len(outs) :]):
            raise_out_of_range(mask, query, what=f"streams[{k}]: ")
    if not batched:
        outs = [o[0] for o in outs]
    return outs[0] if concat else outs
