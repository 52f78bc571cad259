"""Maximum-shape inference: the model's tensor shapes at the user's bounds.

Like ORT's `session.max_shape_override`, this works on a disposable copy: large initializers become
typed graph inputs (shape inference needs their types, not their data), overrides replace graph
input shapes, every bounded symbolic dimension becomes its maximum (a symbol an override meets on
a graph input is bound everywhere, so value_info written by exporters resolves too), and then ONNX
shape inference
and the com.microsoft rules of `contrib` alternate until no output gains a shape (each round sizes
at least one more operator output, so stacked layers resolve one round at a time).
"""

from __future__ import annotations

from typing import Iterator

import onnx

from ..spec.errors import InternalError, UsageError
from .bounds import ShapeBounds
from .contrib import rule_for
from .errors import BadModel
from .graph import all_graphs, known_dims, tensor_type, walk

SHAPE_DATA_MAX_ELEMENTS = 1024  # initializers this small keep their data (Reshape shapes, axes)


def _keeps_data(tensor: onnx.TensorProto) -> bool:
    count = 1
    for d in tensor.dims:
        count *= d
    return tensor.data_location != onnx.TensorProto.EXTERNAL and count <= SHAPE_DATA_MAX_ELEMENTS


def shape_only_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of the model whose main-graph initializers over SHAPE_DATA_MAX_ELEMENTS (or
    stored externally) are graph inputs of the same type, so copies and inference stay cheap."""
    src = model.graph
    graph = onnx.GraphProto(name=src.name, node=src.node, output=src.output, value_info=src.value_info,
                            doc_string=src.doc_string)
    declared = {i.name for i in src.input}
    graph.input.extend(src.input)
    for tensor in src.initializer:
        if _keeps_data(tensor):
            graph.initializer.append(tensor)
        elif tensor.name not in declared:
            graph.input.append(onnx.ValueInfoProto(name=tensor.name, type=tensor_type(tensor.data_type, tensor.dims)))
    for sparse in src.sparse_initializer:
        if sparse.values.name not in declared:
            graph.input.append(onnx.ValueInfoProto(
                name=sparse.values.name, type=tensor_type(sparse.values.data_type, sparse.dims)))
    return onnx.ModelProto(ir_version=model.ir_version, opset_import=model.opset_import, graph=graph,
                           functions=model.functions)


def _tensor_types(model: onnx.ModelProto) -> Iterator[onnx.TypeProto]:
    for graph in all_graphs(model.graph):
        for info in (*graph.input, *graph.output, *graph.value_info):
            if info.type.WhichOneof("value") == "tensor_type" and info.type.tensor_type.HasField("shape"):
                yield info.type


def _override_bindings(
    model: onnx.ModelProto, overrides: dict[str, tuple[int, ...]], user_inputs: set[str]
) -> dict[str, int]:
    """Apply the overrides to the user's graph inputs; return the symbolic names they bind."""
    inputs = {i.name: i for i in model.graph.input if i.name in user_inputs}
    bindings: dict[str, int] = {}
    for name, dims in overrides.items():
        if name not in inputs:
            raise UsageError(f"--max-shape-override names {name!r}, which is not a graph input; inputs: {sorted(inputs)}")
        t = inputs[name].type.tensor_type
        declared = list(t.shape.dim) if t.HasField("shape") else None
        if declared is not None and len(declared) != len(dims):
            raise UsageError(f"--max-shape-override {name}: rank {len(dims)}, but the input has rank {len(declared)}")
        for axis, (dim, value) in enumerate(zip(declared or [], dims)):
            if dim.HasField("dim_value") and dim.dim_value != value:
                raise UsageError(f"--max-shape-override {name}: axis {axis} is fixed at {dim.dim_value}, not {value}")
            if dim.dim_param and bindings.setdefault(dim.dim_param, value) != value:
                raise UsageError(f"--max-shape-override binds {dim.dim_param!r} to both {bindings[dim.dim_param]} and {value}")
        t.shape.CopyFrom(tensor_type(t.elem_type, dims).tensor_type.shape)
    return bindings


def apply_bounds(model: onnx.ModelProto, bounds: ShapeBounds, user_inputs: set[str]) -> None:
    """Apply overrides to the user's graph inputs (not initializers), then replace every bounded
    symbolic dimension by its maximum everywhere in the model (in place). Unknown names and
    conflicts are usage errors."""
    symbols = {d.dim_param for t in _tensor_types(model) for d in t.tensor_type.shape.dim if d.dim_param}
    unknown = sorted(set(bounds.dims) - symbols)
    if unknown:
        raise UsageError(f"--dim {', '.join(unknown)}: no such symbolic dimension; the model has {sorted(symbols)}")
    bindings = _override_bindings(model, bounds.overrides, user_inputs)
    for name, value in bounds.dims.items():
        if bindings.setdefault(name, value) != value:
            raise UsageError(f"--dim {name}={value} disagrees with --max-shape-override, which gives {bindings[name]}")
    for t in _tensor_types(model):
        for dim in t.tensor_type.shape.dim:
            if dim.dim_param in bindings:
                dim.dim_value = bindings[dim.dim_param]


def _onnx_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        raise BadModel(f"ONNX shape inference failed: {error}") from None


def _set_type(graph: onnx.GraphProto, name: str, t: onnx.TypeProto) -> None:
    for info in (*graph.output, *graph.value_info):
        if info.name == name:
            info.type.CopyFrom(t)
            return
    graph.value_info.append(onnx.ValueInfoProto(name=name, type=t))


def annotate_contrib_outputs(model: onnx.ModelProto) -> int:
    """Give each com.microsoft output that `contrib` can size, and that has no full shape yet,
    its type (in place). Return how many outputs gained a shape."""
    added = 0
    for site in walk(model.graph):
        rule = rule_for(site)
        if rule is None:
            continue
        for name, (elem_type, dims) in rule(site).items():
            if known_dims(site.scope.type_of(name)) is None:
                _set_type(site.scope.graph, name, tensor_type(elem_type, dims))
                added += 1
    return added


def infer_max_shapes(model: onnx.ModelProto, bounds: ShapeBounds) -> onnx.ModelProto:
    """Return the shape-only copy of the model with every shape inferred at the bounds."""
    user_inputs = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    work = shape_only_copy(model)
    apply_bounds(work, bounds, user_inputs)
    work = _onnx_inference(work)
    rounds = sum(len(site.node.output) for site in walk(work.graph) if rule_for(site) is not None)
    for _ in range(rounds + 1):
        if not annotate_contrib_outputs(work):
            return work
        work = _onnx_inference(work)
    raise InternalError(f"shape propagation did not settle after {rounds + 1} rounds")
