"""Choosing a config for an unseen problem from everything measured on its nearest tuned problems.

The single nearest neighbour's best config is a brittle answer: two neighbours can be equally far
with different bests, and a best that won by 1% on its own shape says little about the next one.
Each tuned problem holds the relative speed of every config tried on it (its best time / the
config's time), so the lookup asks the ``k`` nearest problems together:

1. every config each neighbour measured is carried to the target by the kernel's transfer and
   checked against the space there; it counts as *evidence* only if carrying it back gives the
   config that was measured (the round trip): a config the transfer had to change in kind (a
   chunked row made whole, a tile clipped to a smaller problem, a pipeline depth clamped) was
   measured as something else, so its speed says nothing about the carried one;
   Each problem's evidence is its fastest configs (:data:`EVIDENCE_MAX`, none slower than
   :data:`EVIDENCE_MIN_RELATIVE` of its best's speed);
2. a neighbour's weight is ``1 / distance`` (log2 sizes, :func:`warpforge.tune.lookup.feature_distance`);
   a config is a candidate when the neighbours that measured it hold at least half the total weight;
3. a config that failed (incorrect or an error) on any of the neighbours asked is never chosen;
4. the chosen config has the highest weighted geometric mean of its relative speeds over the
   neighbours that measured it (ties: the larger support, then the nearest neighbour's order).

No timing happens here: it only reads stored measurements. With one neighbour, or neighbours
that stored only their best (older shipped files), it picks the nearest neighbour's best, as the
plain nearest match does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from warpforge.tune.space import config_key

NEIGHBOURS = 3
"""How many of the nearest tuned problems are asked."""

MIN_SUPPORT = 0.5
"""Share of the neighbours' total weight that must have measured a candidate."""

EVIDENCE_MIN_RELATIVE = 0.8
EVIDENCE_MAX = 16
"""Per tuned problem, the evidence is its fastest configs: at most :data:`EVIDENCE_MAX`, none slower
than :data:`EVIDENCE_MIN_RELATIVE` of its best's speed (the contest is among the configs near the
top; the shipped file keeps the same ones, so a database and the shipped file answer alike)."""

_MIN_DISTANCE = 1e-6
_TIE = 1e-12


@dataclass(frozen=True)
class Neighbour:
    """A tuned problem near the target: its distance and what was measured on it."""

    distance: float
    measured: Sequence[tuple[Mapping[str, object], float]]
    """(config, relative speed: the problem's best time / this config's time, in (0, 1])."""
    failed: Sequence[Mapping[str, object]] = ()
    """Configs that were incorrect or errored on this problem."""


@dataclass(frozen=True)
class Choice:
    """The consensus config and why it won."""

    config: dict[str, object]
    score: float
    """Weighted geometric mean of its relative speeds on the neighbours that measured it."""
    support: float
    """Share of the neighbours' weight that measured it."""


Carry = Callable[[int, Mapping[str, object]], "dict[str, object] | None"]
"""``carry(i, config)``: neighbour ``i``'s config carried to the target and allowed there
(``None`` when it cannot be); ``carry_back(i, config)``: a target config carried to neighbour
``i``'s problem (``None`` when it cannot be)."""


def top_evidence(
    measured: Sequence[tuple[Mapping[str, object], float]],
) -> list[tuple[Mapping[str, object], float]]:
    """The fastest of ``measured`` (config, relative speed) pairs kept as evidence, fastest first."""
    ranked = sorted(measured, key=lambda item: -item[1])[:EVIDENCE_MAX]
    return [item for item in ranked if item[1] >= EVIDENCE_MIN_RELATIVE]


def consensus_config(
    neighbours: Sequence[Neighbour], carry: Carry, carry_back: Carry
) -> Choice | None:
    """The config the ``neighbours`` agree on for the target, or ``None`` when none of their
    measurements carries over faithfully (the caller then falls back to the nearest best)."""
    if not neighbours:
        return None
    weights = [1.0 / max(n.distance, _MIN_DISTANCE) for n in neighbours]
    total = sum(weights)
    # A config one neighbour saw fail (wrong results, a launch error) is never chosen, however
    # fast the others found it: its failure may well repeat on the target. Excluded as measured
    # and as carried to the target.
    excluded: set[str] = set()
    for i, neighbour in enumerate(neighbours):
        for failed in neighbour.failed:
            excluded.add(config_key(failed))
            carried = carry(i, failed)
            if carried is not None:
                excluded.add(config_key(carried))
    evidence: dict[str, dict[int, float]] = {}
    configs: dict[str, dict[str, object]] = {}
    for i, neighbour in enumerate(neighbours):
        ordered = sorted(neighbour.measured, key=lambda item: -item[1])
        for measured, relative in ordered:
            if not 0.0 < relative <= 1.0 + 1e-9:
                continue
            carried = carry(i, measured)
            if carried is None or carry_back(i, carried) != dict(measured):
                continue
            key = config_key(carried)
            if key in excluded or config_key(measured) in excluded:
                continue
            configs.setdefault(key, carried)
            seen = evidence.setdefault(key, {})
            seen[i] = max(seen.get(i, 0.0), min(relative, 1.0))
    best: Choice | None = None
    for key, by_neighbour in evidence.items():  # insertion order: nearest neighbour's first
        support = sum(weights[i] for i in by_neighbour) / total
        if support < MIN_SUPPORT - 1e-12:
            continue
        covered = sum(weights[i] for i in by_neighbour)
        score = math.exp(sum(weights[i] * math.log(r) for i, r in by_neighbour.items()) / covered)
        if (
            best is None
            or score > best.score + _TIE
            or (score >= best.score - _TIE and support > best.support + _TIE)
        ):
            best = Choice(dict(configs[key]), score, support)
    return best
