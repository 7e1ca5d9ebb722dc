"""Splitting a tuning run over processes with torch.distributed (``torchrun -m warpforge tune``).

Each rank tunes on its own GPU (``cuda:LOCAL_RANK``; the CPU with the gloo backend when there is
no GPU) and writes its trials straight into the one shared database; rank 0 prints the summary
after a barrier, reading the results of every rank back from that database. The work is split by
:func:`plan_work`: whole problems when there are at least as many problems as ranks, otherwise
each problem's configs (exhaustive) or independent random starts (budgeted).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Rank:
    """This process's place in the run (``world_size == 1`` when not distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def device(self) -> torch.device:
        return (
            torch.device("cuda", self.local_rank)
            if torch.cuda.is_available()
            else torch.device("cpu")
        )


def init_from_environment() -> Rank:
    """Join the process group torchrun set up (``WORLD_SIZE`` > 1); a single rank otherwise."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Rank()
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
            dist.init_process_group(backend="nccl")
        else:
            dist.init_process_group(backend="gloo")
    return Rank(rank, world_size, local_rank)


def barrier(rank: Rank) -> None:
    if rank.distributed:
        import torch.distributed as dist

        if torch.cuda.is_available():
            dist.barrier(device_ids=[rank.local_rank])
        else:
            dist.barrier()


def finish(rank: Rank) -> None:
    if rank.distributed:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def shard(items: Sequence[T], rank: Rank) -> list[T]:
    """Round-robin share of ``items`` for ``rank`` (neighbouring items go to different ranks)."""
    return list(items[rank.rank :: rank.world_size])


@dataclass(frozen=True)
class WorkPlan:
    """What one rank does: which problems, and whether it takes a share of each problem's configs."""

    problems: list[int]
    """Indices of the problems this rank works on."""
    config_shard: bool
    """True when every rank works on every problem, each on ``configs[rank::world_size]`` (or,
    for a budgeted search, from its own random seed)."""


def plan_work(problem_count: int, rank: Rank) -> WorkPlan:
    if problem_count >= rank.world_size:
        return WorkPlan(shard(range(problem_count), rank), config_shard=False)
    return WorkPlan(list(range(problem_count)), config_shard=rank.distributed)
