"""The problem registry: ops register problems here; ``warpforge bench`` runs them."""

from __future__ import annotations

from warpforge.harness.problem import Problem

_PROBLEMS: dict[str, Problem] = {}


def register_problem(problem: Problem) -> Problem:
    """Add ``problem``; a second registration under the same name must be the same object."""
    existing = _PROBLEMS.get(problem.name)
    if existing is not None and existing is not problem:
        raise ValueError(f"problem {problem.name!r} is already registered")
    _PROBLEMS[problem.name] = problem
    return problem


def get_problem(name: str) -> Problem:
    try:
        return _PROBLEMS[name]
    except KeyError:
        known = ", ".join(sorted(_PROBLEMS)) or "none"
        raise ValueError(f"problem: no problem named {name!r}; registered: {known}") from None


def registered_problems() -> list[Problem]:
    return [_PROBLEMS[name] for name in sorted(_PROBLEMS)]
