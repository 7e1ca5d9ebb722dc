"""Generated backward: reverse-mode differentiation of a blueprint into another blueprint.

When every node's operator has a gradient rule (``OperatorSpec.grad``), :func:`backward_blueprint`
writes a backward graph whose inputs are the forward inputs followed by one gradient per forward
output, and whose outputs are the gradients of the float forward inputs. It recomputes the
forward values it needs (so nothing but the inputs is saved) and compiles to fused kernels like
any blueprint. Otherwise the compiler differentiates the PyTorch reference with autograd.
"""

from __future__ import annotations

from warpforge.blueprint.ir import BlueprintBuilder, BlueprintIR, Value
from warpforge.blueprint.registry import GradientNotAvailable, OperatorRegistry


def has_gradient_rules(ir: BlueprintIR, registry: OperatorRegistry) -> bool:
    return all(registry.get(node.op).grad is not None for node in ir.nodes)


def backward_blueprint(
    ir: BlueprintIR, registry: OperatorRegistry
) -> tuple[BlueprintIR, tuple[str, ...]] | None:
    """(backward IR, names of the forward inputs its outputs differentiate), or None.

    None when an operator lacks a gradient rule or no float input receives a gradient.
    """
    if not has_gradient_rules(ir, registry):
        return None
    schemas = ir.infer(registry)
    b = BlueprintBuilder(f"{ir.name}_backward", version=ir.version)
    values: dict[str, Value] = {}
    for name, schema in ir.inputs:
        values[name] = b.input(name, schema.shape, schema.dtype)
    for _index, (_, value) in enumerate(ir.outputs):
        schema = schemas[value]
        if not schema.is_float:
            return None
    grads_in = [
        b.input(f"grad_out_{i}", schemas[value].shape, schemas[value].dtype)
        for i, (_, value) in enumerate(ir.outputs)
    ]
    order = ir.topological_order()
    for node in order:
        values[node.name] = b.op(node.op, *(values[v] for v in node.inputs), **node.attrs)
    adjoint: dict[str, Value] = {}

    def accumulate(name: str, grad: Value) -> None:
        adjoint[name] = b.op("add", adjoint[name], grad) if name in adjoint else grad

    for (_, value), grad in zip(ir.outputs, grads_in, strict=True):
        accumulate(value, grad)
    for node in reversed(order):
        if node.name not in adjoint:
            continue
        spec = registry.get(node.op)
        try:
            grads = spec.grad(  # type: ignore[misc]
                b,
                [values[v] for v in node.inputs],
                values[node.name],
                adjoint[node.name],
                node.attrs,
            )
        except GradientNotAvailable:
            return None
        out_shape = schemas[node.name].shape
        for source, grad in zip(node.inputs, grads, strict=True):
            if grad is None or not schemas[source].is_float:
                continue
            if tuple(schemas[source].shape) != tuple(out_shape):
                # Undo broadcasting: sum over the dims this input was expanded along.
                grad = b.op("sum_to", grad, shape=list(schemas[source].shape))
            accumulate(source, grad)
    differentiated = tuple(
        name for name, schema in ir.inputs if schema.is_float and name in adjoint
    )
    if not differentiated:
        return None
    for name in differentiated:
        b.output(f"grad_{name}", adjoint[name])
    return b.build(), differentiated
