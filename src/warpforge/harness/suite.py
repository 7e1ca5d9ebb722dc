"""A directory of KernelBench pairs: verify and time each, then fast_p and the geomean speedup.

Pairs are found by either convention:

* ``DIR/NAME.py`` (reference) beside ``DIR/NAME_new.py`` (candidate);
* ``DIR/ref/NAME.py`` beside ``DIR/cand/NAME.py``.

``fast_p`` is the fraction of *all* pairs whose candidate passed verification and is more than
``p`` times faster than the reference (so ``fast_0`` is the fraction correct). The geometric-mean
speedup is taken over the correct pairs. Under ``torchrun`` the pairs are sharded over the ranks
(rank r takes pairs r, r + world, ...), each rank runs its shard on its own GPU, and rank 0
gathers the rows (``all_gather_object``) and writes the one report.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Pair:
    name: str
    reference: Path
    candidate: Path


def discover_pairs(directory: str | Path) -> list[Pair]:
    """Every (reference, candidate) pair in ``directory``, sorted by name."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"directory: expected a directory of KernelBench pairs, got {str(root)!r}")
    pairs: dict[str, Pair] = {}
    for cand in sorted(root.glob("*_new.py")):
        name = cand.name.removesuffix("_new.py")
        ref = root / f"{name}.py"
        if ref.is_file():
            pairs[name] = Pair(name, ref, cand)
    if (root / "ref").is_dir() and (root / "cand").is_dir():
        for ref in sorted((root / "ref").glob("*.py")):
            cand = root / "cand" / ref.name
            if cand.is_file():
                pairs[ref.stem] = Pair(ref.stem, ref, cand)
    if not pairs:
        raise ValueError(
            f"directory: no pairs in {str(root)!r}; expected NAME.py with NAME_new.py, "
            "or ref/NAME.py with cand/NAME.py"
        )
    return [pairs[k] for k in sorted(pairs)]


def reference_speedup(row: Mapping[str, Any]) -> float | None:
    """The candidate's speedup over the reference model for a correct row, else None."""
    if row.get("status") != "ok":
        return None
    sp = row.get("speedup") or {}
    vs = sp.get("vs", {}).get("reference")
    if vs is not None:
        return float(vs["value"])
    best = sp.get("vs_best")
    return float(best["value"]) if best else None


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """fast_p for p in FAST_P and the geometric-mean speedup of the correct rows."""
    total = len(rows)
    correct = [r for r in rows if r.get("status") == "ok"]
    speedups = [s for s in (reference_speedup(r) for r in correct) if s is not None and s > 0]
    fast = {}
    for p in FAST_P:
        if p == 0.0:
            hits = len(correct)
        else:
            hits = sum(1 for s in speedups if s > p)
        fast[f"fast_{p:g}"] = hits / total if total else 0.0
    geomean = statistics.geometric_mean(speedups) if speedups else None
    return {
        "pairs": total,
        "correct": len(correct),
        "timed": len(speedups),
        **fast,
        "geomean_speedup": geomean,
    }


@dataclass(frozen=True)
class Shard:
    rank: int
    world: int

    def take(self, items: Sequence[Any]) -> list[Any]:
        return list(items[self.rank :: self.world])


def distributed_shard() -> Shard:
    """This process's shard: from torch.distributed when launched by torchrun, else the whole."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return Shard(0, 1)
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            if local_rank >= torch.cuda.device_count():
                raise RuntimeError(
                    f"torchrun started local rank {local_rank}, but only "
                    f"{torch.cuda.device_count()} GPU(s) are visible: use --nproc-per-node <= "
                    f"{torch.cuda.device_count()} (one process per GPU)"
                )
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend=backend)
    return Shard(dist.get_rank(), dist.get_world_size())


def gather_rows(rows: list[dict[str, Any]], shard: Shard) -> list[dict[str, Any]] | None:
    """All ranks' rows on every rank (None on ranks other than 0); identity without torchrun."""
    if shard.world == 1:
        return rows
    import torch.distributed as dist

    gathered: list[Any] = [None] * shard.world
    dist.all_gather_object(gathered, rows)
    # tear down before exiting: a rank leaving with a live gloo/NCCL group aborts (SIGABRT)
    dist.barrier()
    dist.destroy_process_group()
    if shard.rank != 0:
        return None
    merged = [row for part in gathered for row in (part or [])]
    return sorted(merged, key=lambda r: r["problem"])


def run_suite(
    pairs: Sequence[Pair],
    run_pair: Callable[[Pair], dict[str, Any]],
    *,
    on_done: Callable[[Pair, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``run_pair`` on each pair (load errors become rejected rows) and collect the rows."""
    from warpforge.harness.kernelbench import LoadError

    rows = []
    for pair in pairs:
        try:
            row = run_pair(pair)
        except LoadError as exc:
            row = {
                "problem": pair.name,
                "shape": None,
                "dtype": "",
                "status": "rejected",
                "verification": {
                    "passed": False,
                    "findings": [{"reason": "load-error", "message": str(exc)}],
                },
                "times": {},
                "findings": [],
                "speedup": None,
            }
        rows.append(row)
        if on_done is not None:
            on_done(pair, row)
    return rows
