"""Walking an ONNX model: every node of every graph, control-flow subgraphs included, with the
tensor types visible where the node sits.

A subgraph (an `If` branch, a `Loop` or `Scan` body) sees its own tensors and, through its scope's
parent, every tensor of the graphs enclosing it. Graph paths read `main/If_0.then_branch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

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
    """One node, its position in its graph, the graph's path and the scope it reads types from."""

    node: onnx.NodeProto
    index: int
    graph_path: str
    scope: Scope

    @property
    def label(self) -> str:
        """Return the node's name, or `OpType#index` for an unnamed node."""
        return self.node.name or f"{self.node.op_type}#{self.index}"

    @property
    def where(self) -> str:
        """Return `node 'label' (OpType, graph path)` for messages."""
        return f"node {self.label!r} ({self.node.op_type}, graph {self.graph_path})"


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
            yield from walk(sub, f"{path}/{site.label}.{label}", scope)


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yield the graph and every subgraph below it."""
    yield graph
    for node in graph.node:
        for _, sub in subgraphs(node):
            yield from all_graphs(sub)


def known_dims(t: onnx.TypeProto | None) -> list[int] | None:
    """Return the dimensions of a tensor type whose every dimension is a number, else None."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return [d.dim_value for d in dims]
