"""A stand-in for a Triton kernel in tests that check which kernel an op launches, and how."""

from __future__ import annotations


class LaunchSpy:
    """Records each launch's grid (``grids``) and keyword arguments with the grid under
    ``"grid"`` (``launches``), then launches the real kernel."""

    def __init__(self, kernel) -> None:
        self.kernel = kernel
        # what ``warpforge.tune.source_hash`` reads of a Triton kernel: a tunable whose hash is
        # first taken while a spy stands in hashes the kernel's source, not the spy's repr
        self.fn = getattr(kernel, "fn", kernel)
        self.grids: list[object] = []
        self.launches: list[dict[str, object]] = []

    def __getitem__(self, grid):
        self.grids.append(grid)

        def launch(*args, **kwargs):
            self.launches.append(dict(kwargs, grid=grid))
            return self.kernel[grid](*args, **kwargs)

        return launch
