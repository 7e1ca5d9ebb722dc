"""Verification and timing of kernels against PyTorch references. Knows nothing of warpforge.ops."""

from warpforge.harness.problem import BaselineUnavailable, Problem, Tolerance
from warpforge.harness.registry import get_problem, register_problem, registered_problems

__all__ = [
    "BaselineUnavailable",
    "Problem",
    "Tolerance",
    "get_problem",
    "register_problem",
    "registered_problems",
]
