"""What a benchmark problem is: the contract between the harness and whoever registers problems.

A problem states the math (a PyTorch reference), how to draw inputs, the fewest FLOPs and bytes
the math needs (from the problem, never from a candidate), how close a result must be, and which
shapes to run. Ops, robotics and blueprint modules register problems here; the harness itself
knows nothing of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

Shape = Mapping[str, int]
"""Named sizes of one problem instance, e.g. ``{"M": 4096, "N": 8192}``."""

InputFactory = Callable[[Shape, torch.dtype, torch.device, torch.Generator], tuple[Any, ...]]
"""``make_inputs(shape, dtype, device, generator)`` -> positional arguments of the function."""

CostModel = Callable[[Shape, torch.dtype], float]
"""``flops(shape, dtype)`` or ``bytes_moved(shape, dtype)``: analytic, from the problem."""


@dataclass(frozen=True)
class Tolerance:
    """Absolute floor per dtype; the harness also allows 2x PyTorch's own error at that dtype.

    A candidate passes when ``max|out - ref64| <= max(atol[dtype] + rtol[dtype] * |ref64|,
    2 * max|torch_at_dtype - ref64|)`` elementwise, so computing in a lower precision than asked
    fails while matching PyTorch's own rounding passes.
    """

    atol: Mapping[torch.dtype, float] = field(
        default_factory=lambda: {
            torch.float64: 1e-10,
            torch.float32: 1e-5,
            torch.float16: 1e-3,
            torch.bfloat16: 8e-3,
        }
    )
    rtol: Mapping[torch.dtype, float] = field(
        default_factory=lambda: {
            torch.float64: 1e-10,
            torch.float32: 1e-5,
            torch.float16: 1e-3,
            torch.bfloat16: 8e-3,
        }
    )
    relative_floor: bool = False
    """How PyTorch's own error raises the bound. False: to 2x PyTorch's largest error anywhere
    in the output. True: in proportion, elementwise: with ``b = atol + rtol*|ref|``, the bound
    is ``max(b, min(2 * PyTorch's largest error, k * b))``, ``k`` twice PyTorch's largest ratio
    of error to ``b``. For outputs that mix magnitudes (a loss gradient of ~1 at the target and
    ~1/V elsewhere), where the plain floor would leave the small values unchecked."""
    repeat_atol: float = 0.0
    """Allowed difference between repeated calls on the same inputs (atomics); 0 = bitwise."""

    def for_dtype(self, dtype: torch.dtype) -> tuple[float, float]:
        return self.atol.get(dtype, 1e-5), self.rtol.get(dtype, 1e-5)


@dataclass(frozen=True)
class Problem:
    """One function to verify and time, with its reference, inputs, cost model and shapes."""

    name: str
    """Dotted name, family first: ``"rms_norm.fwd"``, ``"cross_entropy.bwd"``."""
    reference: Callable[..., Any]
    """Plain PyTorch. Called on float64 copies of the inputs for the ground truth, and on the
    inputs as given to measure PyTorch's own error at the candidate's dtype."""
    implementation: Callable[..., Any]
    """warpforge's candidate for this problem."""
    make_inputs: InputFactory
    flops: CostModel
    bytes_moved: CostModel
    shapes: Sequence[Shape]
    """Shapes timed on the GPU by the default suite."""
    cpu_shapes: Sequence[Shape]
    """Small shapes verified on the CPU (Triton interpreter) by the default suite."""
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16)
    baselines: Mapping[str, Callable[[], Callable[..., Any]]] = field(default_factory=dict)
    """name -> factory returning the callable (so torch.compile or Liger load lazily). A factory
    raises :class:`BaselineUnavailable` when its library is missing."""
    tolerance: Tolerance = field(default_factory=Tolerance)
    sweep: Sequence[Shape] = ()
    """Extra shapes for ``--sweep``."""
    float64_reference: bool = True
    """False for integer or index outputs, where the reference runs at the input dtype."""
    row_split: Callable[[Sequence[Any], slice], Sequence[Any]] | None = None
    """For row-independent problems: the inputs of the rows ``rows`` (every output's leading
    dimension is those rows, except the ``row_sums`` outputs). Lets the harness compute the
    float64 reference of a shape too large for device memory one block of rows at a time; None
    for problems whose outputs mix rows otherwise (a mean loss)."""
    row_sums: Sequence[int] = ()
    """Indices of outputs that are sums over the rows (a weight or bias gradient), not one row
    each: with ``row_split``, the reference of a block of rows gives that block's share of them,
    and the harness adds the shares of all blocks in float64 before comparing."""
    saved_rounding: Callable[[Sequence[Any], torch.dtype], Sequence[Any]] | None = None
    """For an op that stores an intermediate at the working dtype and computes from it (a
    backward from the saved forward output): the extra absolute error each output may carry
    when that intermediate is off by one unit in the last place at ``dtype``, elementwise
    (a float64 tensor shaped like the output, or None for none). Called with the float64
    inputs (a block of rows of them where the reference is computed in blocks); added to the
    bound of :class:`Tolerance`. Two correct implementations may round the intermediate to
    neighbouring values, and the op amplifies that difference by its derivative."""
    description: str = ""


def compile_baseline(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    """``torch.compile`` of a baseline for one row: Dynamo's caches reset, shapes static.

    One process times many shapes of a problem. With torch.compile's defaults the second shape
    recompiles the same code with dynamic shapes (kernels a user compiling for one shape never
    gets, slower on some rows), and past Dynamo's recompile limit the function runs eager: either
    way a weaker baseline than the one claimed. ``options`` go to ``torch.compile`` (a mode)."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False, **options)


class BaselineUnavailable(RuntimeError):
    """A baseline's library is not installed here; the report records why it was skipped."""
