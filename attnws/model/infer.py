"""Maximum-shape inference: the model's tensor shapes at the user's bounds.

Like ORT's `session.max_shape_override`, this works on a disposable copy: large initializers become
typed graph inputs (shape inference needs their types, not their data), each call of a
model-local function is replaced by its body as ONNX Runtime does, overrides replace graph
input shapes, every bounded symbolic dimension becomes its maximum (a symbol an override meets on
a graph input is bound everywhere, so value_info written by exporters resolves too), and then ONNX
shape inference runs once. The com.microsoft rules of `contrib` take part in that one pass: for its
duration they are registered with ONNX as operator schemas whose inference function is the rule,
so a stack of layers resolves in time linear in its nodes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import onnx
from onnx.defs import OpSchema

from ..spec.errors import InternalError, UsageError
from .bounds import ShapeBounds
from .contrib import RULE_ATTRIBUTES, RULES, Rule, rule_for
from .errors import BadModel
from .functions import inline_functions
from .graph import all_graphs, tensor_type
from .ort_schemas import ORT_DEFAULT_DOMAIN_SCHEMAS, attributes, parameters
from .translate import MS_DOMAIN, NodeTypes, shape_dims

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


def model_symbols(model: onnx.ModelProto) -> set[str]:
    """Return every symbolic dimension (`dim_param`) the model's tensor types name, functions included."""
    return {symbol for t in _tensor_types(model) for symbol in symbols_of(t)}


def tensor_types(t: onnx.TypeProto) -> Iterator[onnx.TypeProto]:
    """Yield the shaped tensor types `t` holds: itself, or the element types of a sequence, an
    optional or a map's values, however nested (a symbol there reaches a tensor through
    SequenceAt or OptionalGetElement)."""
    kind = t.WhichOneof("value")
    if shape_dims(t) is not None:
        yield t
    elif kind in ("sequence_type", "optional_type"):
        yield from tensor_types(getattr(t, kind).elem_type)
    elif kind == "map_type":
        yield from tensor_types(t.map_type.value_type)


def symbols_of(t: onnx.TypeProto | None) -> set[str]:
    """Return the symbols (`dim_param`) the shapes of the tensor types `t` holds name
    (`tensor_types`: a sequence's or an optional's elements too); none for an unknown type."""
    if t is None:
        return set()
    return {d for shaped in tensor_types(t) for d in shape_dims(shaped) or () if isinstance(d, str)}


def _tensor_types(model: onnx.ModelProto) -> Iterator[onnx.TypeProto]:
    for graph in all_graphs(model.graph):
        for info in (*graph.input, *graph.output, *graph.value_info):
            yield from tensor_types(info.type)


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


def apply_bounds(model: onnx.ModelProto, bounds: ShapeBounds, user_inputs: set[str],
                 derived: dict[str, int] | None = None) -> None:
    """Apply overrides to the user's graph inputs (not initializers), then replace every bounded
    symbolic dimension by its maximum everywhere in the model (in place). Unknown names and
    conflicts are usage errors. `derived` binds further symbols (`derive`: what the model
    determines from the bounds), which a given bound always wins over."""
    symbols = model_symbols(model)
    unknown = sorted(set(bounds.dims) - symbols)
    if unknown:
        raise UsageError(f"--dim {', '.join(unknown)}: no such symbolic dimension; the model has {sorted(symbols)}")
    bindings = _override_bindings(model, bounds.overrides, user_inputs)
    for name, value in bounds.dims.items():
        if bindings.setdefault(name, value) != value:
            raise UsageError(f"--dim {name}={value} disagrees with --max-shape-override, which gives {bindings[name]}")
    for name, value in (derived or {}).items():
        bindings.setdefault(name, value)
    for t in _tensor_types(model):
        for dim in t.tensor_type.shape.dim:
            if dim.dim_param in bindings:
                dim.dim_value = bindings[dim.dim_param]


def _onnx_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as error:  # noqa: BLE001 - ONNX's C++ raises several types on a malformed model
        raise BadModel(f"ONNX shape inference failed: {type(error).__name__}: {error}") from None


def _known(t: Any) -> onnx.TypeProto | None:
    return t if isinstance(t, onnx.TypeProto) and t.WhichOneof("value") is not None else None


def _inference_function(op_type: str, rule: Rule, failures: list[BaseException]) -> Any:
    """Return ONNX's inference callback for one rule. A rule's own failure is recorded (and raised
    after inference as an InternalError), never lost inside ONNX."""

    def infer(ctx: Any) -> None:
        try:
            count = ctx.get_num_inputs()
            present = [ctx.has_input(i) for i in range(count)]
            inputs = tuple("?" if p else "" for p in present)
            types = tuple(_known(ctx.get_input_type(i)) if p else None for i, p in enumerate(present))
            attributes = {}
            for name in RULE_ATTRIBUTES.get(op_type, ()):
                attr = ctx.get_attribute(name)
                if isinstance(attr, onnx.AttributeProto):
                    value = onnx.helper.get_attribute_value(attr)
                    attributes[name] = list(value) if attr.type == onnx.AttributeProto.INTS else value
            produced = tuple("?" if ctx.has_output(i) else "" for i in range(ctx.get_num_outputs()))
            outputs = rule(NodeTypes(op_type, inputs, types, attributes, produced))
            for index, output in enumerate(outputs):
                if output is not None and index < len(produced) and produced[index]:
                    ctx.set_output_type(index, tensor_type(*output))
        except Exception as error:  # noqa: BLE001 - handed back after inference
            failures.append(error)

    return infer


def _variadic(name: str) -> OpSchema.FormalParameter:
    return OpSchema.FormalParameter(name, "T", param_option=OpSchema.FormalParameterOption.Variadic,
                                    is_homogeneous=False, min_arity=0)


_ANY_TENSOR = [f"tensor({name.lower()})" for name in onnx.TensorProto.DataType.keys()
               if name not in ("UNDEFINED",)]


_ATTRIBUTE_TYPES = {name: getattr(OpSchema.AttrType, name) for name in ("FLOAT", "INT", "STRING", "FLOATS", "INTS")}


def _formal(name: str, optional: bool) -> OpSchema.FormalParameter:
    option = OpSchema.FormalParameterOption.Optional if optional else OpSchema.FormalParameterOption.Single
    return OpSchema.FormalParameter(name, "T", param_option=option)


def ort_default_domain_schemas(failures: list[BaseException]) -> list[OpSchema]:
    """Return ONNX schemas for the default-domain operators ONNX Runtime adds (`ort_schemas`),
    with their inputs, outputs and attributes; those with a `contrib` rule infer with it."""
    schemas = []
    for entry in ORT_DEFAULT_DOMAIN_SCHEMAS:
        schema = OpSchema(
            entry.name, "", 1,
            inputs=[_formal(*p) for p in parameters(entry.inputs)],
            outputs=[_formal(*p) for p in parameters(entry.outputs)],
            type_constraints=[("T", _ANY_TENSOR, "any tensor")],
            attributes=[OpSchema.Attribute(name, _ATTRIBUTE_TYPES[kind], "", required=required)
                        for name, kind, required in attributes(entry.attributes)])
        rule = rule_for(entry.name, "")
        if rule is not None:
            schema.set_type_and_shape_inference_function(_inference_function(entry.name, rule, failures))
        schemas.append(schema)
    return schemas


def _contrib_rule_schemas(failures: list[BaseException]) -> list[OpSchema]:
    schemas = []
    for op_type, rule in RULES.items():
        schema = OpSchema(op_type, MS_DOMAIN, 1, inputs=[_variadic("inputs")], outputs=[_variadic("outputs")],
                          type_constraints=[("T", _ANY_TENSOR, "any tensor")])
        schema.set_type_and_shape_inference_function(_inference_function(op_type, rule, failures))
        schemas.append(schema)
    return schemas


@contextmanager
def registered(schemas: list[OpSchema]) -> Iterator[None]:
    """Register the schemas with ONNX for the duration of the block, leaving alone any name
    ONNX already defines in that domain."""
    defined = {(s.name, s.domain) for s in schemas if onnx.defs.has(s.name, s.domain)}
    added: list[OpSchema] = []
    try:
        for schema in schemas:
            if (schema.name, schema.domain) not in defined:
                onnx.defs.register_schema(schema)
                added.append(schema)
        yield
    finally:
        for schema in added:
            onnx.defs.deregister_schema(schema.name, schema.since_version, schema.domain)


@contextmanager
def contrib_schemas() -> Iterator[list[BaseException]]:
    """Register every `contrib` rule as a com.microsoft schema (version 1) and ORT's own
    default-domain operators for the duration of the block; yield the list that collects rule
    failures."""
    failures: list[BaseException] = []
    with registered([*_contrib_rule_schemas(failures), *ort_default_domain_schemas(failures)]):
        yield failures


def infer_max_shapes(model: onnx.ModelProto, bounds: ShapeBounds,
                     derived: dict[str, int] | None = None) -> onnx.ModelProto:
    """Return the shape-only copy of the model, its model-local functions inlined
    (`functions.inline_functions`), with every shape inferred at the bounds (and the `derived`
    symbols' values), in one pass of ONNX shape inference with the com.microsoft rules registered."""
    user_inputs = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
    work = inline_functions(shape_only_copy(model))
    apply_bounds(work, bounds, user_inputs, derived)
    with contrib_schemas() as failures:
        work = _onnx_inference(work)
    if failures:
        raise InternalError(f"a com.microsoft shape rule failed: {failures[0]!r}") from failures[0]
    return work
