"""A stand-in for a Triton kernel in tests that check which kernel an op launches."""

from __future__ import annotations


class LaunchSpy:
    """Records each launch grid, then launches the real kernel."""

    def __init__(self, kernel):
        self.kernel, self.grids = kernel, []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return self.kernel[grid]
