"""Plain float64 references for the robotics tests, written one query and one point at a time.

They share no code with warpforge: Python floats (float64) and ints, ``bisect`` and ``math``.
"""

from __future__ import annotations

import bisect
import math

import torch

NAN = float("nan")


def _lerp(a: list[float], b: list[float], w: float) -> list[float]:
    return [x + w * (y - x) for x, y in zip(a, b, strict=True)]


def _weight(q, ta, tb) -> float:
    # ints (nanoseconds): exact differences, one correctly rounded division
    return (q - ta) / (tb - ta)


def _slerp(a: list[float], b: list[float], w: float) -> list[float]:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if dot < 0:
        b, dot = [-y for y in b], -dot
    dot = min(dot, 1.0)
    if dot > 0.9995:
        out = _lerp(a, b, w)
    else:
        angle = math.acos(dot)
        ca = math.sin((1 - w) * angle) / math.sin(angle)
        cb = math.sin(w * angle) / math.sin(angle)
        out = [ca * x + cb * y for x, y in zip(a, b, strict=True)]
    norm = math.sqrt(sum(x * x for x in out))
    return [x / norm for x in out]


def resample_row(
    v: list[list[float]], t: list, q, method: str, policy: str
) -> tuple[list[float], bool]:
    """One query against one row: (output row, in range)."""
    n, width = len(t), len(v[0])
    if isinstance(q, float) and math.isnan(q):
        return [NAN] * width, False
    i = bisect.bisect_right(t, q) - 1
    if q < t[0] or q > t[n - 1]:
        if policy == "nan":
            return [NAN] * width, False
        below = q < t[0]
        if policy == "extrapolate" and method == "linear" and n > 1:
            a, b = (0, 1) if below else (n - 2, n - 1)
            if t[a] == t[b]:
                return list(v[0] if below else v[n - 1]), False
            return _lerp(v[a], v[b], _weight(q, t[a], t[b])), False
        return list(v[0] if below else v[n - 1]), False
    if i == n - 1:
        return list(v[n - 1]), True
    if method == "previous":
        return list(v[i]), True
    if method == "nearest":
        return list(v[i] if q - t[i] <= t[i + 1] - q else v[i + 1]), True
    w = _weight(q, t[i], t[i + 1])
    if method == "slerp":
        return _slerp(v[i], v[i + 1], w), True
    return _lerp(v[i], v[i + 1], w), True


def resample(
    values: torch.Tensor,
    times: torch.Tensor,
    query: torch.Tensor,
    method: str = "linear",
    policy: str = "clamp",
    lengths: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """values [B, S, D], times [B, S], query [B, T] -> (float64 [B, T, D], bool [B, T])."""
    batch, _, width = values.shape
    out = torch.empty(batch, query.shape[1], width, dtype=torch.float64)
    mask = torch.empty(batch, query.shape[1], dtype=torch.bool)
    for b in range(batch):
        n = values.shape[1] if lengths is None else lengths[b]
        v = values[b, :n].double().tolist()
        t = times[b, :n].tolist()
        for j, q in enumerate(query[b].tolist()):
            row, inside = resample_row(v, t, q, method, policy)
            out[b, j] = torch.tensor(row, dtype=torch.float64)
            mask[b, j] = inside
    return out, mask


def voxelize(
    points: torch.Tensor,
    features: torch.Tensor | None,
    grid_min: list[float],
    voxel_size: list[float],
    grid_size: list[int],
    reduce: str,
    batch_index: torch.Tensor | None = None,
    batch_size: int = 1,
) -> torch.Tensor:
    """A dict of voxel -> per-point contributions, then the reduction: [B, X, Y, Z(, C)]."""
    cells: dict[tuple[int, ...], list[list[float]]] = {}
    feats = features.double().tolist() if features is not None else None
    batches = batch_index.tolist() if batch_index is not None else [0] * points.shape[0]
    for k, p in enumerate(points.double().tolist()):
        index = []
        for axis in range(3):
            cell = (
                math.floor((p[axis] - grid_min[axis]) / voxel_size[axis])
                if not math.isnan(p[axis])
                else -1
            )
            index.append(cell)
        inside = all(0 <= c < s for c, s in zip(index, grid_size, strict=True))
        if not inside or not 0 <= batches[k] < batch_size:
            continue
        cells.setdefault((batches[k], *index), []).append(feats[k] if feats else [1.0])
    channels = features.shape[1] if features is not None else None
    shape = [batch_size, *grid_size] + ([channels] if reduce in ("sum", "mean", "max") else [])
    out = torch.zeros(shape, dtype=torch.float64)
    for key, rows in cells.items():
        if reduce == "occupancy":
            out[key] = 1
        elif reduce == "count":
            out[key] = len(rows)
        elif reduce == "sum":
            out[key] = torch.tensor([sum(c) for c in zip(*rows, strict=True)], dtype=torch.float64)
        elif reduce == "mean":
            out[key] = torch.tensor(
                [sum(c) / len(c) for c in zip(*rows, strict=True)], dtype=torch.float64
            )
        else:
            out[key] = torch.tensor([max(c) for c in zip(*rows, strict=True)], dtype=torch.float64)
    return out
