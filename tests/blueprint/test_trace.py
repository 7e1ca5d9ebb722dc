"""trace(): plain PyTorch functions to blueprints, and errors that list every unsupported op."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import warpforge
from warpforge.blueprint import UnsupportedOperationError, trace


def test_trace_maps_functions_methods_and_operators() -> None:
    def block(x: torch.Tensor, res: torch.Tensor, w: torch.Tensor, up: torch.Tensor) -> tuple:
        h = x + res
        scaled = F.silu(F.layer_norm(h, (h.shape[-1],), w)) * up
        return scaled.to(torch.float16), h.sum(dim=-1, keepdim=True), 1.0 - torch.sigmoid(h) / 2

    inputs = [torch.randn(3, 8), torch.randn(3, 8), torch.randn(8), torch.randn(3, 8)]
    ir = trace(block, inputs)
    assert [n.op for n in ir.nodes] == [
        "add",
        "layer_norm",
        "silu",
        "mul",
        "cast",
        "sum",
        "sigmoid",
        "div",
        "sub",
    ]
    assert ir.input_names == ("x", "res", "w", "up")
    assert [name for name, _ in ir.outputs] == ["out0", "out1", "out2"]
    sub = ir.nodes[-1]
    assert sub.attrs == {"scalar": 1.0, "reverse": True}
    got = warpforge.compile(ir, strict=True)(*inputs)
    for mine, ref in zip(got, block(*inputs), strict=True):
        assert mine.dtype == ref.dtype
        # a float16 output may round the other way where the float32 value sits at a rounding
        # boundary: one ulp of float16 (2**-10 relative)
        rtol = 2**-10 if ref.dtype == torch.float16 else 2e-5
        torch.testing.assert_close(mine, ref, atol=2e-5, rtol=rtol)


def test_trace_of_attention_scores() -> None:
    def scores(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s = q @ k.transpose(-2, -1) * 0.25
        return torch.softmax(torch.where(mask, s, float("-inf")), dim=-1)

    q, k = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    ir = trace(scores, [q, k, mask])
    assert [n.op for n in ir.nodes] == ["transpose", "matmul", "mul", "where", "softmax"]
    assert ir.nodes[3].attrs == {"other": "-inf"}
    torch.testing.assert_close(warpforge.compile(ir, strict=True)(q, k, mask), scores(q, k, mask))


def test_unsupported_ops_are_all_listed_with_their_source_line() -> None:
    def bad(x: torch.Tensor) -> torch.Tensor:
        y = torch.sort(x).values
        z = torch.cumsum(y, 0)
        return z + (x > 0)

    with pytest.raises(UnsupportedOperationError) as info:
        trace(bad, [torch.randn(4)])
    message = str(info.value)
    assert "3 unsupported operation(s)" in message
    for op, code in (
        ("torch.sort", "y = torch.sort(x).values"),
        ("torch.cumsum", "z = torch.cumsum(y, 0)"),
        ("operator.gt", "return z + (x > 0)"),
    ):
        assert op in message
        assert code in message
    assert "test_trace.py:" in message
    assert len(info.value.problems) == 3


def test_unsupported_arguments_are_explained() -> None:
    def global_sum(x: torch.Tensor) -> torch.Tensor:
        return x.sum()

    with pytest.raises(UnsupportedOperationError, match="a reduction over all dims"):
        trace(global_sum, [torch.randn(4, 4)])

    def first_dim(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=0)

    with pytest.raises(UnsupportedOperationError, match="only the last dimension"):
        trace(first_dim, [torch.randn(4, 4)])


def test_trace_validates_arguments() -> None:
    with pytest.raises(TypeError, match="fn: expected a callable"):
        trace(3, [torch.randn(2)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"example_inputs\[1\]: expected a torch.Tensor"):
        trace(lambda x, y: x + y, [torch.randn(2), 3.0])
    with pytest.raises(TypeError, match=r"takes 2 tensor argument\(s\), got 1"):
        trace(lambda x, y: x + y, [torch.randn(2)])
    with pytest.raises(TypeError, match="plain function"):
        trace(torch.nn.Linear(2, 2), [torch.randn(2)])


def test_rms_norm_default_eps_follows_torch() -> None:
    if not hasattr(F, "rms_norm"):
        pytest.skip("torch.nn.functional.rms_norm needs torch >= 2.4")

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],))

    x = torch.randn(3, 16) * 1e-4  # tiny values: the eps matters
    ir = trace(norm, [x])
    assert ir.nodes[0].attrs == {"eps": torch.finfo(torch.float32).eps}
    torch.testing.assert_close(warpforge.compile(ir, strict=True)(x), norm(x))
