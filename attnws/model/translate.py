"""ORT's Level-1 adapter for one ONNX node: node metadata to the spec's estimator inputs.

`read_node` checks what ONNX Runtime checks when it loads the node (domain, attribute types,
required inputs, output count) and raises `BadModel` naming the node; it then reads input 0's
element type, the attributes, one positional shape hint per input: MISSING (empty name or past
the end), NO_SHAPE (present, shape unknown) or a tuple of dimensions with -1 where a dimension
stays unknown, and which outputs the node has (MultiHeadAttention's present_key / present_value
and output_qk change what it computes). Each shapeless input and unknown dimension is also
described in `unresolved`, which makes the node's estimate unavailable with those reasons.
Inputs and outputs are positional throughout: an empty name is an omitted optional one, and
trailing ones may be left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import onnx

from ..spec.hints import MISSING, NO_SHAPE, Hint, HintState, hint_at
from ..spec.inputs import input_names
from ..spec.problem import Op
from .errors import BadModel
from .graph import Site

MS_DOMAIN = "com.microsoft"
ATTENTION_OPS = {"PackedAttention": Op.PA, "PackedMultiHeadAttention": Op.PMHA, "MultiHeadAttention": Op.MHA}
_A = onnx.AttributeProto
# The attributes ORT's schemas declare for each operator, with their types. MultiHeadAttention's
# scale and mask_filter_value do not change any size.
ATTRIBUTE_TYPES = {
    Op.PA: {"num_heads": _A.INT, "qkv_hidden_sizes": _A.INTS, "scale": _A.FLOAT},
    Op.PMHA: {"num_heads": _A.INT, "mask_filter_value": _A.FLOAT, "scale": _A.FLOAT},
    Op.MHA: {"num_heads": _A.INT, "unidirectional": _A.INT, "scale": _A.FLOAT, "mask_filter_value": _A.FLOAT},
}
REQUIRED_INPUTS = {Op.PA: (0, 1, 2, 3, 4), Op.PMHA: (0, 4, 5), Op.MHA: (0,)}
# ORT 1.31.1's type constraints (its com.microsoft schemas): the index inputs are int32 (type M);
# every other input shares one type T, from this list.
INDEX_INPUTS = {Op.PA: (3, 4), Op.PMHA: (4, 5), Op.MHA: (4, 8, 9)}
T_TYPES = {Op.PA: ("float", "float16"), Op.PMHA: ("float", "float16"), Op.MHA: ("float", "float16", "bfloat16")}
# The outputs ORT's schemas declare, by position (output 0 is the result; the others are optional).
OUTPUT_NAMES = {
    Op.PA: ("output",), Op.PMHA: ("output",),
    Op.MHA: ("output", "present_key", "present_value", "output_qk"),
}
MHA_PRESENT_OUTPUTS = (1, 2)
MHA_OUTPUT_QK = 3


@dataclass(frozen=True)
class NodeInputs:
    """What the adapter reads from one attention node."""

    op: Op
    element_type: str | None  # ONNX name of input 0's element type ("float16"), None when unknown
    attributes: dict[str, Any]
    hints: tuple[Hint, ...]
    unresolved: tuple[str, ...]
    outputs: tuple[str, ...] = ()  # output names by position; "" for an omitted one
    names: tuple[str, ...] = ()  # the input names each hint was read from, by position; "" omitted

    @property
    def sizing_attributes(self) -> dict[str, Any]:
        """The attributes as ORT's kernel reads them for sizing: MultiHeadAttention is
        unidirectional only when the attribute is exactly 1 (ORT compares with 1)."""
        if self.op is not Op.MHA or "unidirectional" not in self.attributes:
            return self.attributes
        return {**self.attributes, "unidirectional": int(self.attributes["unidirectional"] == 1)}

    def has_output(self, index: int) -> bool:
        """Return whether output `index` is present (named and within the node's outputs)."""
        return index < len(self.outputs) and bool(self.outputs[index])

    @property
    def has_present(self) -> bool:
        """MultiHeadAttention: whether the node has both present_key and present_value."""
        return all(self.has_output(i) for i in MHA_PRESENT_OUTPUTS)

    def unmodelled(self) -> tuple[str, str]:
        """Return (reason, error status) when the node's outputs make it one attnws cannot size
        whatever its shapes, else ("", ""): a MultiHeadAttention with output_qk (not modelled), or
        with only one of present_key / present_value (ORT fails it at run time)."""
        if self.op is not Op.MHA:
            return "", ""
        if self.has_output(MHA_OUTPUT_QK):
            return (f"output {MHA_OUTPUT_QK} (output_qk {self.outputs[MHA_OUTPUT_QK]!r}) is present: MultiHeadAttention "
                    "with output_qk is not modelled (ORT then writes the Q*K^T scores and keeps only the unfused and "
                    "decoder-masked kernels)", "unsupported")
        present = [self.has_output(i) for i in MHA_PRESENT_OUTPUTS]
        if any(present) and not all(present):
            which = "present_key (output 1)" if present[0] else "present_value (output 2)"
            return (f"only {which} of present_key and present_value is present: ORT requires both or neither and "
                    "fails this node at run time", "invalid_argument")
        return "", ""


# Domains in which an operator named like an attention operator is taken for one (and then
# refused by `read_node` unless it is com.microsoft). The packed operators' names are ORT's own;
# "MultiHeadAttention" is a common name, so a custom domain's operator of that name is left alone.
_DEFAULT_DOMAINS = ("", "ai.onnx")


def is_attention(node: onnx.NodeProto) -> bool:
    """Return whether the node is a PackedAttention or PackedMultiHeadAttention (any domain), or a
    MultiHeadAttention in com.microsoft or the default domain (`read_node` refuses one outside
    com.microsoft)."""
    if node.op_type == "MultiHeadAttention":
        return node.domain in (MS_DOMAIN, *_DEFAULT_DOMAINS)
    return node.op_type in ATTENTION_OPS


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
    outputs = list(site.node.output)
    if len(outputs) > len(OUTPUT_NAMES[op]):
        raise BadModel(f"{site.where}: {len(outputs)} outputs; {op.onnx_name} has at most {len(OUTPUT_NAMES[op])} "
                       f"({', '.join(OUTPUT_NAMES[op])})")


def _check_types(site: Site, op: Op, node: "NodeTypes") -> None:
    """Check ORT's type constraints on the inputs whose element type is known: int32 index inputs,
    one type T (of those ORT registers) for all the others. ONNX Runtime refuses the model
    otherwise, when it loads it."""
    names = input_names(op)
    first = None  # (input described, its type) of the first T input
    for index, name in enumerate(node.inputs):
        kind = element_type_name(node.type_of(index))
        if kind is None:
            continue
        what = f"input {index} ({names[index]} {name!r})"
        if index in INDEX_INPUTS[op]:
            if kind != "int32":
                raise BadModel(f"{site.where}: {what} is {kind}; ONNX Runtime's {op.onnx_name} takes int32 there "
                               "and refuses the model")
        elif kind not in T_TYPES[op]:
            raise BadModel(f"{site.where}: {what} is {kind}; ONNX Runtime's {op.onnx_name} takes "
                           f"{' or '.join(T_TYPES[op])} there and refuses the model")
        elif first is None:
            first = (what, kind)
        elif kind != first[1]:
            raise BadModel(f"{site.where}: {first[0]} is {first[1]} but {what} is {kind}; ONNX Runtime's "
                           f"{op.onnx_name} takes one element type for all of them and refuses the model")


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
    outputs: tuple[str, ...] = ()  # output names by position ("" omitted; "?" present, name unknown)

    def type_of(self, index: int) -> onnx.TypeProto | None:
        """Return input `index`'s type, None when omitted or unknown."""
        return self.types[index] if index < len(self.types) and self.inputs[index] else None


def site_types(site: Site, attributes: dict[str, Any]) -> NodeTypes:
    """Return the node's input types as its scope knows them."""
    inputs = tuple(site.node.input)
    return NodeTypes(site.node.op_type, inputs, tuple(site.scope.type_of(n) if n else None for n in inputs), attributes,
                     tuple(site.node.output))


def anonymous(node: NodeTypes) -> NodeTypes:
    """Return the node with every present input and output named "?": what two nodes that differ
    only in their tensors' names have in common."""
    def masked(names: tuple[str, ...]) -> tuple[str, ...]:
        return tuple("?" if name else "" for name in names)
    return replace(node, inputs=masked(node.inputs), outputs=masked(node.outputs))


def _hint(node: NodeTypes, index: int, position: str, unresolved: list[Any],
          derivable: frozenset[tuple[int, int]] = frozenset()) -> Hint:
    """Return input `index`'s hint; add to `unresolved` each reason it is not fully known: a text,
    or for a symbolic dimension a (name, place, derivable) triple that `_reasons` gathers by name
    (`derivable`: the (input, axis) places attnws derives once others are bound)."""
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
            unresolved.append((dim.dim_param, f"{what} axis {axis}", (index, axis) in derivable))
        else:
            unresolved.append(f"{what} axis {axis} is unknown after shape inference")
    return tuple(dims)


def _reasons(unresolved: list[Any]) -> tuple[str, ...]:
    """Return the reasons in order, each unbounded symbolic dimension once with every place it
    appears (a decoder's batch and sequence symbols recur in every input); one that appears only
    where attnws derives it (a packed operator's B + 1 and token count) says so."""
    places: dict[str, list[str]] = {}
    derived: dict[str, bool] = {}
    order: list[tuple[bool, str]] = []  # (is a symbol, text or symbol name)
    for entry in unresolved:
        if isinstance(entry, str):
            order.append((False, entry))
            continue
        name, place, derivable = entry
        if name not in places:
            places[name] = []
            order.append((True, name))
        places[name].append(place)
        derived[name] = derived.get(name, True) and derivable

    def text(name: str) -> str:
        if derived[name]:
            return (f"symbolic dimension {name!r} with no bound yet (attnws derives it from token_offset [B, S] once "
                    f"B and S are bound, or give --dim {name}=MAX): {', '.join(places[name])}")
        return (f"symbolic dimension {name!r} with no bound (give --dim {name}=MAX or --max-shape-override): "
                f"{', '.join(places[name])}")

    return tuple(text(entry) if symbol else entry for symbol, entry in order)


# (token_offset, cumulative_sequence_length) inputs of the packed operators, and the inputs whose
# dimension 0 is the packed token count T
PACKED_INDEX_INPUTS = {Op.PA: (3, 4), Op.PMHA: (4, 5)}
TOKEN_INPUTS = {Op.PA: (0,), Op.PMHA: (0, 1, 2)}


def _derivable(op: Op, node: NodeTypes) -> frozenset[tuple[int, int]]:
    """The places attnws derives from token_offset [B, S] when it has a shape (`derive`): B + 1
    and the packed token count."""
    if op not in PACKED_INDEX_INPUTS:
        return frozenset()
    to, cu = PACKED_INDEX_INPUTS[op]
    t = node.type_of(to)
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape") \
            or len(t.tensor_type.shape.dim) != 2:
        return frozenset()
    return frozenset({(cu, 0), *((i, 0) for i in TOKEN_INPUTS[op])})


def node_inputs(node: NodeTypes) -> NodeInputs:
    """Return the adapter's view of an attention node from its input types and attributes."""
    op = ATTENTION_OPS[node.op_type]
    unresolved: list[Any] = []
    derivable = _derivable(op, node)
    hints = tuple(_hint(node, i, name, unresolved, derivable) for i, name in enumerate(input_names(op)))
    return NodeInputs(op, element_type_name(node.type_of(0)), node.attributes, hints, _reasons(unresolved),
                      node.outputs, node.inputs)


def checked_types(site: Site) -> NodeTypes:
    """Return an attention node's input types and attributes, or raise BadModel for a node ONNX
    Runtime would refuse: another domain, an unknown or mistyped attribute, a missing required
    input, too many inputs or outputs, an input type its schema does not allow."""
    node = site.node
    op = ATTENTION_OPS[node.op_type]
    if node.domain != MS_DOMAIN:
        raise BadModel(f"{site.where}: {node.op_type} is a {MS_DOMAIN} operator, found in domain {node.domain!r}")
    attributes = _attributes(site, op)
    _check_inputs(site, op)
    types = site_types(site, attributes)
    _check_types(site, op, types)
    return types


def read_node(site: Site) -> NodeInputs:
    """Return the adapter's view of an attention node, or raise BadModel for a malformed node."""
    return node_inputs(checked_types(site))


def indivisible_hidden(op: Op, num_heads: Any, hints: Sequence[Hint]) -> str:
    """MultiHeadAttention: return why a node whose query or value hidden size (rank 3) is not a
    multiple of num_heads is not sized, else "". ORT 1.31.1 does not check this: it floors the head
    size (H = D / N, Hv = Dv / N), and its CPU kernel then fails at run time. attnws's proofs take
    each hidden size as num_heads x head size, so such a node is neither sized nor proved."""
    if op is not Op.MHA or not isinstance(num_heads, int) or num_heads <= 0:
        return ""
    for index, what, size in ((0, "query", "H"), (2, "value", "Hv")):
        hint = hint_at(hints, index)
        if not isinstance(hint, HintState) and len(hint) == 3 and hint[2] >= 0 and hint[2] % num_heads:
            return (f"{what} hidden size {hint[2]} is not a multiple of num_heads = {num_heads}: ORT 1.31.1 does not "
                    f"check this and floors the head size to {size} = {hint[2] // num_heads} (its CPU kernel then fails at run "
                    "time), which attnws does not model")
    return ""
