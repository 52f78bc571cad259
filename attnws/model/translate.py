"""ORT's Level-1 adapter for one ONNX node: node metadata to the spec's estimator inputs.

`read_node` checks what ONNX Runtime checks when it loads the node (domain, attribute types,
required attributes and inputs, output count, each input's type against its schema's type
constraint) and raises `BadModel` naming the node; it then reads input 0's element type, the
attributes, one positional shape hint per input: MISSING (empty name or past the end), NO_SHAPE
(present, shape unknown) or a tuple of dimensions with -1 where a dimension stays unknown, and
which outputs the node has (MultiHeadAttention's present_key / present_value and output_qk change
what it computes). Each shapeless input and unknown dimension is also described in
`unresolved`, which makes the node's estimate unavailable with those reasons.
Inputs and outputs are positional throughout: an empty name is an omitted optional one, and
trailing ones may be left out.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import onnx

from ..spec.hints import MISSING, NO_SHAPE, Hint
from .errors import BadModel
from .graph import Site
from .reader import NodeInputs, NodeReader, Packing, Schema
from .registry import READERS, reader_of

MS_DOMAIN = "com.microsoft"
Dim = int | str | None  # a value, a symbol's name, or unknown
_A = onnx.AttributeProto


@dataclass(frozen=True)
class ReadNode:
    """Where an attention node sits and what the adapter read of it: its label, op type, graph
    path, input 0's element type (ONNX name), attributes, one hint per input position and its path
    (`graph.Site.path`: `main/attn`, `main/layer0/attn` in a function, `main/model/layers.0/attn/X`
    for the scoped name "/model/layers.0/attn/X"; no two attention nodes of a model share one)."""

    name: str
    op_type: str
    graph: str
    element_type: str | None
    attributes: dict[str, Any]
    hints: tuple[Hint, ...]
    path: str


# The domains besides com.microsoft in which a node is taken for an attention operator whose reader
# does not take `any_domain` (and then refused by `read_node`): its op type is a common name, so a
# custom domain's operator of that name is left alone.
_DEFAULT_DOMAINS = ("", "ai.onnx")


def is_attention(node: onnx.NodeProto) -> bool:
    """Return whether the node is one a reader reads (`registry.READERS`): in any domain where the
    reader takes `any_domain` (the packed operators' names are ORT's own), else in com.microsoft
    or the default domain (`read_node` refuses one outside com.microsoft)."""
    reader = READERS.get(node.op_type)
    return reader is not None and (reader.any_domain or node.domain in (MS_DOMAIN, *_DEFAULT_DOMAINS))


def _attributes(site: Site, reader: Schema) -> dict[str, Any]:
    expected = reader.attribute_types
    out: dict[str, Any] = {}
    for attr in site.node.attribute:
        if attr.name not in expected:
            raise BadModel(f"{site.where}: unknown attribute {attr.name!r}; {reader.op_type} has {sorted(expected)}")
        if attr.type != expected[attr.name]:
            raise BadModel(
                f"{site.where}: attribute {attr.name} has type {_A.AttributeType.Name(attr.type)}, "
                f"expected {_A.AttributeType.Name(expected[attr.name])}"
            )
        value = onnx.helper.get_attribute_value(attr)
        out[attr.name] = list(value) if attr.type == _A.INTS else \
            value.decode("utf-8", "replace") if attr.type == _A.STRING else value
    for name in reader.required_attributes:
        if name not in out:
            raise BadModel(f"{site.where}: required attribute {name} is missing; ONNX Runtime's {reader.op_type} "
                           f"requires {' and '.join(reader.required_attributes)} and refuses the model")
    return out


def _check_inputs(site: Site, reader: Schema) -> None:
    names = reader.input_names
    inputs = list(site.node.input)
    if len(inputs) > len(names):
        raise BadModel(f"{site.where}: {len(inputs)} inputs; {reader.op_type} takes at most {len(names)}")
    for index in reader.required_inputs:
        if index >= len(inputs) or not inputs[index]:
            raise BadModel(f"{site.where}: required input {index} ({names[index]}) is missing")
    outputs, declared = list(site.node.output), reader.output_names
    if len(outputs) > len(declared):
        raise BadModel(f"{site.where}: {len(outputs)} outputs; {reader.op_type} has at most {len(declared)} "
                       f"({', '.join(declared)})")


def _type_rule(reader: Schema, index: int) -> str:
    """Return the schema's rule for input `index`'s type, in words: its constraint variable and
    every input bound to it, or its fixed type."""
    names = reader.input_names
    variable, allowed = reader.allowed_types(index)
    if variable is None:
        return f"its schema types {names[index]} tensor({allowed[0]})"
    return f"its type constraint {variable}: {', '.join(names[i] for i in reader.inputs_of(variable))}"


def _type_text(t: onnx.TypeProto) -> str:
    """Return a type as ORT writes it: "seq(tensor(float16))"; a map or an opaque type by its kind."""
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return f"{kind.removesuffix('_type')}({_elem_name(getattr(t, kind).elem_type) or 'undefined'})"
    if kind in ("sequence_type", "optional_type"):
        return f"{'seq' if kind == 'sequence_type' else 'optional'}({_type_text(getattr(t, kind).elem_type)})"
    return str(kind).removesuffix("_type")


def _check_types(site: Site, reader: Schema, node: "NodeTypes") -> None:
    """Check ORT's type constraints (the reader's `input_types` and `type_constraints`, ORT
    1.31.1's com.microsoft schema) on every input whose type is known, in order, as ORT's graph
    resolution does: a tensor, of an element type its constraint variable (or its fixed type)
    allows, and the type every earlier input of the same variable bound it to. ONNX Runtime
    refuses the model otherwise, when it loads it."""
    names = reader.input_names
    bound: dict[str, tuple[int, str]] = {}  # variable -> (the input that bound it, its element type)
    for index, name in enumerate(node.inputs):
        t = node.type_of(index)
        what = f"input {index} ({names[index]} {name!r})"
        if t is not None and t.WhichOneof("value") not in (None, "tensor_type"):
            raise BadModel(f"{site.where}: {what} is {_type_text(t)}, not a tensor; ONNX Runtime's "
                           f"{reader.op_type} refuses the model ({_type_rule(reader, index)})")
        kind = element_type_name(t)
        if kind is None:
            continue
        variable, allowed = reader.allowed_types(index)
        if kind not in allowed:
            raise BadModel(f"{site.where}: {what} is {kind}; ONNX Runtime's {reader.op_type} takes "
                           f"{' or '.join(allowed)} there and refuses the model ({_type_rule(reader, index)})")
        if variable is None:
            continue
        first, first_kind = bound.setdefault(variable, (index, kind))
        if kind != first_kind:
            raise BadModel(f"{site.where}: input {first} ({names[first]} {node.inputs[first]!r}) is {first_kind} but "
                           f"{what} is {kind}; ONNX Runtime's {reader.op_type} takes one element type for all of them "
                           f"and refuses the model ({_type_rule(reader, index)}, bound to {first_kind} by "
                           f"{names[first]})")


def shape_dims(t: onnx.TypeProto | None) -> list[Dim] | None:
    """Return a shaped tensor type's dimensions (a value, a symbol's name, None where unknown);
    None for an unknown type, a tensor without a shape, or a type that is not a tensor (see
    `infer.tensor_types` for the tensors a sequence or an optional holds)."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim]


def token_inputs(packing: Packing, query: list[Dim] | None) -> tuple[int, ...]:
    """Return the inputs whose dimension 0 is the packed token count T, for a node whose query has
    the dimensions `query` (`shape_dims`; None: unknown, every token input)."""
    return packing.tokens_of(None if query is None else len(query))


def element_type_name(t: onnx.TypeProto | None) -> str | None:
    """Return the ONNX name of a tensor type's element type ("float16"), None when unknown."""
    if t is None or t.WhichOneof("value") != "tensor_type":
        return None
    return _elem_name(t.tensor_type.elem_type)


def _elem_name(elem_type: int) -> str | None:
    """Return the ONNX name of an element type ("float16"), None for 0 (unknown)."""
    if not elem_type:
        return None
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


@dataclass(frozen=True)
class Unbound:
    """A symbolic dimension an attention node's input still has after inference: the symbol, the
    input and axis, the input's rank, the place in words ("input 0 (query 'x') axis 1") and
    whether attnws derives it there once others are bound (`_derivable`)."""

    name: str
    index: int
    axis: int
    rank: int
    place: str
    derivable: bool


def _hint(node: NodeTypes, index: int, position: str, unresolved: list[str | Unbound],
          derivable: frozenset[tuple[int, int]] = frozenset()) -> Hint:
    """Return input `index`'s hint; add to `unresolved` each reason it is not fully known: a text,
    or for a symbolic dimension an `Unbound` that `_reasons` gathers by name (`derivable`: the
    (input, axis) places attnws derives once others are bound)."""
    if index >= len(node.inputs) or not node.inputs[index]:
        return MISSING
    shape = shape_dims(node.type_of(index))
    what = f"input {index} ({position} {node.inputs[index]!r})"
    if shape is None:
        unresolved.append(f"{what} is present without a known shape")
        return NO_SHAPE
    for axis, dim in enumerate(shape):
        if isinstance(dim, str):
            unresolved.append(Unbound(dim, index, axis, len(shape), f"{what} axis {axis}", (index, axis) in derivable))
        elif dim is None:
            unresolved.append(f"{what} axis {axis} is unknown after shape inference")
    return tuple(dim if isinstance(dim, int) else -1 for dim in shape)


def _reasons(unresolved: list[str | Unbound]) -> tuple[str, ...]:
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
        if entry.name not in places:
            places[entry.name] = []
            order.append((True, entry.name))
        places[entry.name].append(entry.place)
        derived[entry.name] = derived.get(entry.name, True) and entry.derivable

    def text(name: str) -> str:
        if derived[name]:
            return (f"symbolic dimension {name!r} with no bound yet (attnws derives it from token_offset [B, S] once "
                    f"B and S are bound, or give --dim {name}=MAX): {', '.join(places[name])}")
        return (f"symbolic dimension {name!r} with no bound (give --dim {name}=MAX or --max-shape-override): "
                f"{', '.join(places[name])}")

    return tuple(text(entry) if symbol else entry for symbol, entry in order)


def _derivable(reader: NodeReader, node: NodeTypes) -> frozenset[tuple[int, int]]:
    """The places attnws derives from token_offset [B, S] when it has a shape (`derive`): B + 1
    and the packed token count (the reader's `packing`, for the query's rank; none without)."""
    packing = reader.packing
    offsets = None if packing is None else shape_dims(node.type_of(packing.token_offset))
    if packing is None or offsets is None or len(offsets) != 2:
        return frozenset()
    tokens = token_inputs(packing, shape_dims(node.type_of(0)))
    return frozenset({(packing.cumulative_sequence_length, 0), *((i, 0) for i in tokens)})


def _read(node: NodeTypes) -> tuple[tuple[Hint, ...], list[str | Unbound]]:
    """Return one hint per input position of the node's operator and, in order, every reason its
    shapes are not fully known: the one reading both a node's reasons (`node_inputs`) and the
    model's missing symbols (`unbound_dims`, which `derive` reads) come from."""
    reader = reader_of(node.op_type)
    unresolved: list[str | Unbound] = []
    derivable = _derivable(reader, node)
    hints = tuple(_hint(node, i, name, unresolved, derivable) for i, name in enumerate(reader.input_names))
    return hints, unresolved


def unbound_dims(site: Site) -> tuple[Unbound, ...]:
    """Return the symbolic dimensions an attention node's inputs still have, in the order and at
    the places its reasons name them (`node_inputs`)."""
    _, unresolved = _read(site_types(site, {}))
    return tuple(entry for entry in unresolved if isinstance(entry, Unbound))


def elem_type_of(node: NodeTypes, index: int) -> int:
    """Return input `index`'s ONNX element type (0: omitted or unknown)."""
    t = node.type_of(index)
    return t.tensor_type.elem_type if t is not None and t.WhichOneof("value") == "tensor_type" else 0


def node_inputs(node: NodeTypes) -> NodeInputs:
    """Return the adapter's view of an attention node from its input types and attributes."""
    reader = reader_of(node.op_type)
    hints, unresolved = _read(node)
    return NodeInputs(reader, element_type_name(node.type_of(0)), node.attributes, hints, _reasons(unresolved),
                      node.outputs, node.inputs, tuple(elem_type_of(node, i) for i in range(len(reader.input_names))))


def checked_types(site: Site) -> NodeTypes:
    """Return an attention node's input types and attributes, or raise BadModel for a node ONNX
    Runtime would refuse: another domain, an unknown or mistyped attribute, a missing required
    attribute or input, too many inputs or outputs, an input type its schema's type constraints
    do not allow (its reader's `Schema`)."""
    node = site.node
    reader = reader_of(node.op_type)
    if node.domain != MS_DOMAIN:
        raise BadModel(f"{site.where}: {node.op_type} is a {MS_DOMAIN} operator, found in domain {node.domain!r}")
    attributes = _attributes(site, reader)
    _check_inputs(site, reader)
    types = site_types(site, attributes)
    _check_types(site, reader, types)
    return types


def read_node(site: Site) -> NodeInputs:
    """Return the adapter's view of an attention node, or raise BadModel for a malformed node."""
    return node_inputs(checked_types(site))
