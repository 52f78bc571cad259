"""ORT's Level-1 adapter for one ONNX node: node metadata to the spec's estimator inputs.

`read_node` checks what ONNX Runtime checks when it loads the node (domain, attribute types,
required inputs) and raises `BadModel` naming the node; it then reads input 0's element type, the
attributes and one positional shape hint per input: MISSING (empty name or past the end), NO_SHAPE
(present, shape unknown) or a tuple of dimensions with -1 where a dimension stays unknown. Each
shapeless input and unknown dimension is also described in `unresolved`, which makes the node's
estimate unavailable with those reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

from ..spec.hints import MISSING, NO_SHAPE, Hint, input_names
from ..spec.problem import Op
from .errors import BadModel
from .graph import Site

MS_DOMAIN = "com.microsoft"
ATTENTION_OPS = {"PackedAttention": Op.PA, "PackedMultiHeadAttention": Op.PMHA}
_A = onnx.AttributeProto
# The attributes ORT's schemas declare for each operator, with their types.
ATTRIBUTE_TYPES = {
    Op.PA: {"num_heads": _A.INT, "qkv_hidden_sizes": _A.INTS, "scale": _A.FLOAT},
    Op.PMHA: {"num_heads": _A.INT, "mask_filter_value": _A.FLOAT, "scale": _A.FLOAT},
}
REQUIRED_INPUTS = {Op.PA: (0, 1, 2, 3, 4), Op.PMHA: (0, 4, 5)}


@dataclass(frozen=True)
class NodeInputs:
    """What the adapter reads from one attention node."""

    op: Op
    element_type: str | None  # ONNX name of input 0's element type ("float16"), None when unknown
    attributes: dict[str, Any]
    hints: tuple[Hint, ...]
    unresolved: tuple[str, ...]


def is_attention(site: Site) -> bool:
    """Return whether the node is a PackedAttention or PackedMultiHeadAttention, in any domain."""
    return site.node.op_type in ATTENTION_OPS


def _attributes(site: Site, op: Op) -> dict[str, Any]:
    expected = ATTRIBUTE_TYPES[op]
    out: dict[str, Any] = {}
    for attr in site.node.attribute:
        if attr.name not in expected:
            raise BadModel(f"{site.where}: unknown attribute {attr.name!r}; {op.onnx_name} has {sorted(expected)}")
        if attr.type != expected[attr.name]:
            raise BadModel(
                f"{site.where}: attribute {attr.name} has type {_A.AttributeType.Name(attr.type)}, "
                f"expected {_A.AttributeType.Name(expected[attr.name])}"
            )
        value = onnx.helper.get_attribute_value(attr)
        out[attr.name] = list(value) if attr.type == _A.INTS else value
    return out


def _check_inputs(site: Site, op: Op) -> None:
    names = input_names(op)
    inputs = list(site.node.input)
    if len(inputs) > len(names):
        raise BadModel(f"{site.where}: {len(inputs)} inputs; {op.onnx_name} takes at most {len(names)}")
    for index in REQUIRED_INPUTS[op]:
        if index >= len(inputs) or not inputs[index]:
            raise BadModel(f"{site.where}: required input {index} ({names[index]}) is missing")


def element_type_name(t: onnx.TypeProto | None) -> str | None:
    """Return the ONNX name of a tensor type's element type ("float16"), None when unknown."""
    if t is None or t.WhichOneof("value") != "tensor_type" or t.tensor_type.elem_type == 0:
        return None
    elem_type = t.tensor_type.elem_type
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"unknown element type {elem_type}"


@dataclass(frozen=True)
class NodeTypes:
    """What the shape rules read of one node: its input names (empty: omitted) and their types
    (None: unknown), and its attributes. Built from a graph (`site_types`) or from ONNX's
    inference context while ONNX infers shapes."""

    op_type: str
    inputs: tuple[str, ...]
    types: tuple[onnx.TypeProto | None, ...]
    attributes: dict[str, Any]

    def type_of(self, index: int) -> onnx.TypeProto | None:
        """Return input `index`'s type, None when omitted or unknown."""
        return self.types[index] if index < len(self.types) and self.inputs[index] else None


def site_types(site: Site, attributes: dict[str, Any]) -> NodeTypes:
    """Return the node's input types as its scope knows them."""
    inputs = tuple(site.node.input)
    return NodeTypes(site.node.op_type, inputs, tuple(site.scope.type_of(n) if n else None for n in inputs), attributes)


def _hint(node: NodeTypes, index: int, position: str, unresolved: list[str]) -> Hint:
    if index >= len(node.inputs) or not node.inputs[index]:
        return MISSING
    t = node.type_of(index)
    what = f"input {index} ({position} {node.inputs[index]!r})"
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        unresolved.append(f"{what} is present without a known shape")
        return NO_SHAPE
    dims: list[int] = []
    for axis, dim in enumerate(t.tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
            continue
        dims.append(-1)
        if dim.dim_param:
            unresolved.append(f"{what} axis {axis} is the symbolic dimension {dim.dim_param!r} with no bound "
                              f"(give --dim {dim.dim_param}=MAX or --max-shape-override)")
        else:
            unresolved.append(f"{what} axis {axis} is unknown after shape inference")
    return tuple(dims)


def node_inputs(node: NodeTypes) -> NodeInputs:
    """Return the adapter's view of an attention node from its input types and attributes."""
    op = ATTENTION_OPS[node.op_type]
    unresolved: list[str] = []
    hints = tuple(_hint(node, i, name, unresolved) for i, name in enumerate(input_names(op)))
    return NodeInputs(op, element_type_name(node.type_of(0)), node.attributes, hints, tuple(unresolved))


def read_node(site: Site) -> NodeInputs:
    """Return the adapter's view of an attention node, or raise BadModel for a malformed node."""
    node = site.node
    op = ATTENTION_OPS[node.op_type]
    if node.domain != MS_DOMAIN:
        raise BadModel(f"{site.where}: {node.op_type} is a {MS_DOMAIN} operator, found in domain {node.domain!r}")
    attributes = _attributes(site, op)
    _check_inputs(site, op)
    return node_inputs(site_types(site, attributes))
