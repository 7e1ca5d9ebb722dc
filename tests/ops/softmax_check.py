"""Elementwise checks of a softmax / log-softmax gradient against its float64 reference, shared
by the softmax tests (per-element allowances rather than one atol / rtol)."""

from __future__ import annotations

import torch


def wrong_elements(dx: torch.Tensor, want: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Where dx is off by more than allowed; a NaN (an unwritten or torn value) counts."""
    return ~((dx.double() - want).abs() <= allowed)


def assert_dx_close(dx: torch.Tensor, want: torch.Tensor, allowed: torch.Tensor) -> None:
    err = (dx.double() - want).abs()
    bad = wrong_elements(dx, want, allowed)
    assert not bad.any(), (
        f"{int(bad.sum())} of {dx.numel()} elements off by more than allowed; worst "
        f"{float(torch.nan_to_num(err - allowed, nan=float('inf')).max()):.3g} over at "
        f"{tuple(int(i) for i in torch.nonzero(bad)[0])}"
    )
