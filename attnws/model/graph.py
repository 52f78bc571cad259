"""Walking an ONNX model: every node of every graph, control-flow subgraphs included, with the
tensor types visible where the node sits.

A subgraph (an `If` branch, a `Loop` or `Scan` body) sees its own tensors and, through its scope's
parent, every tensor of the graphs enclosing it. Graph paths read `main/If_0.then_branch`; a node's
path is its graph's path and its label (`join_path`): `main/attn`, and for an exporter's scoped
name, which brings its own leading "/", `main/model/layers.0/attn/GroupQueryAttention`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import onnx

MAIN = "main"


def tensor_type(elem_type: int, dims: list[int] | tuple[int, ...]) -> onnx.TypeProto:
    """Return a tensor TypeProto with the given element type and fixed dimensions."""
    return onnx.helper.make_tensor_type_proto(elem_type, list(dims))


def _initializer_type(tensor: onnx.TensorProto) -> onnx.TypeProto:
    return tensor_type(tensor.data_type, tensor.dims)


class Scope:
    """The tensor types visible in one graph: its own first, then its enclosing graphs'."""

    def __init__(self, graph: onnx.GraphProto, parent: "Scope | None" = None) -> None:
        self.graph = graph
        self.parent = parent
        self._types: dict[str, onnx.TypeProto] = {}
        for tensor in graph.initializer:
            self._types[tensor.name] = _initializer_type(tensor)
        for sparse in graph.sparse_initializer:
            self._types[sparse.values.name] = tensor_type(sparse.values.data_type, sparse.dims)
        for info in (*graph.input, *graph.output, *graph.value_info):
            if info.type.WhichOneof("value") is not None:
                self._types[info.name] = info.type

    def type_of(self, name: str) -> onnx.TypeProto | None:
        """Return the type of tensor `name` as seen from this graph, or None when nothing is known."""
        if name in self._types:
            return self._types[name]
        return self.parent.type_of(name) if self.parent is not None else None


@dataclass(frozen=True)
class Site:
    """One node, its position in its graph, the graph's path and the scope it reads types from;
    `name`, when given, is the node's label in the model as written (a node inlined from a
    function is labelled by its place in the function body, its graph path by the call site)."""

    node: onnx.NodeProto
    index: int
    graph_path: str
    scope: Scope
    name: str = ""
    node_path: str = ""  # the path `attention_sites` gives the node, one no other attention node has

    @property
    def label(self) -> str:
        """Return the node's name, or `OpType#index` for an unnamed node."""
        return self.name or node_label(self.node, self.index)

    @property
    def path(self) -> str:
        """Return the node's path: `node_path` where given, else its graph path joined with its
        label (`join_path`)."""
        return self.node_path or join_path(self.graph_path, self.label)

    @property
    def where(self) -> str:
        """Return `node 'label' (OpType, graph path)` for messages."""
        return f"node {self.label!r} ({self.node.op_type}, graph {self.graph_path})"


def node_label(node: onnx.NodeProto, index: int) -> str:
    """Return the node's name, or `OpType#index` (its position in its graph) when it has none."""
    return node.name or f"{node.op_type}#{index}"


def join_path(parent: str, label: str) -> str:
    """Return the path of `label` (a node's, or a subgraph's label) inside the graph at path
    `parent`: "parent/label"; a label that begins with "/" (an exporter's scoped name,
    "/model/layers.0/attn/X") brings its own separator: "parent/model/layers.0/attn/X"."""
    return f"{parent}{label}" if label.startswith("/") else f"{parent}/{label}"


def unique_paths(paths: Sequence[str]) -> list[str]:
    """Return the paths, each one an earlier path already is (two nodes of one name, or "x" beside
    "/x" in one graph) suffixed " (2)", " (3)", ...: the first suffix no path has, so no two of
    them are equal."""
    taken = set(paths)
    seen: set[str] = set()
    out = []
    for path in paths:
        unique, k = path, 1
        while unique in seen or (unique != path and unique in taken):
            k += 1
            unique = f"{path} ({k})"
        seen.add(unique)
        out.append(unique)
    return out


def subgraphs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    """Yield (attribute label, graph) for every graph-valued attribute of a node."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.name, attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for k, graph in enumerate(attr.graphs):
                yield f"{attr.name}[{k}]", graph


def walk(graph: onnx.GraphProto, path: str = MAIN, parent: Scope | None = None) -> Iterator[Site]:
    """Yield every node of the graph and of its subgraphs, depth first, in graph order."""
    scope = Scope(graph, parent)
    for index, node in enumerate(graph.node):
        site = Site(node, index, path, scope)
        yield site
        for label, sub in subgraphs(node):
            yield from walk(sub, f"{join_path(path, site.label)}.{label}", scope)


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yield the graph and every subgraph below it, parents first, in graph order."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed([sub for node in current.node for _, sub in subgraphs(node)]))


def model_graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    """Yield every graph a model holds: the main graph and its subgraphs, the subgraphs inside
    its functions' nodes and its training graphs."""
    yield from all_graphs(model.graph)
    for function in model.functions:
        for node in function.node:
            for _, sub in subgraphs(node):
                yield from all_graphs(sub)
    for training in model.training_info:
        for field in ("initialization", "algorithm"):
            if training.HasField(field):
                yield from all_graphs(getattr(training, field))


def model_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Yield every node of every graph and function of the model."""
    for graph in model_graphs(model):
        yield from graph.node
    for function in model.functions:
        yield from function.node


def node_count(model: onnx.ModelProto) -> int:
    """Return how many nodes the model holds, in every graph, subgraph and function."""
    return sum(len(graph.node) for graph in model_graphs(model)) + sum(len(f.node) for f in model.functions)


def _attribute_tensors(attr: onnx.AttributeProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    if attr.HasField("t"):
        yield attr.t, ""
    yield from ((t, "") for t in attr.tensors)
    sparse = ([attr.sparse_tensor] if attr.HasField("sparse_tensor") else []) + list(attr.sparse_tensors)
    for s in sparse:
        yield s.values, " (sparse values)"
        yield s.indices, " (sparse indices)"


def model_tensors(model: onnx.ModelProto) -> Iterator[tuple[onnx.TensorProto, str]]:
    """Yield (tensor, what it is) for every tensor a model holds: initializers, the values and
    indices of sparse initializers, and tensor-valued attributes, in every graph and function."""
    for graph in model_graphs(model):
        yield from ((t, "initializer") for t in graph.initializer)
        for sparse in graph.sparse_initializer:
            yield sparse.values, "sparse initializer values"
            yield sparse.indices, "sparse initializer indices"
    for node in model_nodes(model):
        for attr in node.attribute:
            for tensor, suffix in _attribute_tensors(attr):
                yield tensor, f"attribute {attr.name!r} of node {node.name or node.op_type!r}{suffix}"


def known_dims(t: onnx.TypeProto | None) -> list[int] | None:
    """Return the dimensions of a tensor type whose every dimension is a number, else None."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return [d.dim_value for d in dims]
