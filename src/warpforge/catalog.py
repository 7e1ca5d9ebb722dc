"""The built-in problems: importing each module below registers its problems with the harness.

This module sits above both ``harness`` and the op packages, so the harness never imports ops.
"""

from __future__ import annotations

import importlib

from warpforge.harness.problem import Problem
from warpforge.harness.registry import registered_problems

PROBLEM_MODULES: tuple[str, ...] = (
    "warpforge.ops.norm_problems",
    "warpforge.ops.softmax_problems",
    "warpforge.ops.loss_problems",
    "warpforge.ops.activation_problems",
    "warpforge.ops.rope_problems",
    "warpforge.robotics.problems",
    "warpforge.blueprint.problems",
)


def load_builtin_problems() -> list[Problem]:
    """Import every problem module and return all registered problems, sorted by name."""
    for module in PROBLEM_MODULES:
        importlib.import_module(module)
    return registered_problems()
