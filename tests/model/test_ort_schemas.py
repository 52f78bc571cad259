"""ONNX Runtime's own default-domain operators: the table attnws registers against ORT 1.31.1's
registry, and models using them against ORT's CPU engine (what ORT loads, attnws reads; what it
refuses, attnws refuses)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from attnws.model.errors import BadModel
from attnws.model.load import load_model
from attnws.model.ort_schemas import ORT_DEFAULT_DOMAIN_SCHEMAS, attributes, parameters

from .builders import ort_error

ort = pytest.importorskip("onnxruntime")
VALUES = {"FLOAT": 1.0, "INT": 1, "STRING": "x", "FLOATS": [1.0], "INTS": [1]}


def _ort_rows() -> set[tuple]:
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    rows = set()
    for schema in state.get_all_operator_schema():
        if schema.domain != "" or onnx.defs.has(schema.name, ""):
            continue
        if schema.deprecated:  # a removal marker: what it would check never runs
            rows.add((schema.name, schema.since_version, True))
            continue
        rows.add((schema.name, schema.since_version, False,
                  tuple((p.name, p.option.name == "Optional") for p in schema.inputs),
                  tuple((p.name, p.option.name == "Optional") for p in schema.outputs),
                  tuple(sorted((a, schema.attributes[a].type.name, schema.attributes[a].required)
                               for a in schema.attributes))))
    return rows


def _our_rows() -> set[tuple]:
    rows = set()
    for s in ORT_DEFAULT_DOMAIN_SCHEMAS:
        ins, outs = tuple(parameters(s.inputs)), tuple(parameters(s.outputs))
        attrs = tuple(sorted(attributes(s.attributes)))
        rows.add((s.name, 1, False, ins, outs, attrs))
        if s.removed_at is not None:  # ORT marks the removal with a deprecated schema of that version
            rows.add((s.name, s.removed_at, True))
    return rows


def test_the_table_is_ort_s_registry():
    assert _our_rows() == _ort_rows()


def _node_model(op_type: str, opset: int, **attrs) -> onnx.ModelProto:
    schema = next(s for s in ORT_DEFAULT_DOMAIN_SCHEMAS if s.name == op_type)
    inputs = [n for n, optional in parameters(schema.inputs) if not optional]
    outputs = [n for n, optional in parameters(schema.outputs) if not optional]
    node = helper.make_node(op_type, inputs, outputs, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, None) for i in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("schema", ORT_DEFAULT_DOMAIN_SCHEMAS, ids=lambda s: s.name)
def test_unchecked_attributes_are_what_ort_lets_through(schema):
    """ORT checks a node's attributes against its schema before its types or kernel; whether it
    refuses an attribute the schema does not name is the table's `unchecked_attributes`."""
    attrs = {name: VALUES[kind] for name, kind, _ in attributes(schema.attributes)}
    refused = "Unrecognized attribute: bogus" in ort_error(_node_model(schema.name, 9, bogus=3, **attrs))
    assert refused is not schema.unchecked_attributes


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save_model(model, str(path))
    return str(path)


def _norm_model(**attrs) -> onnx.ModelProto:
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              [onnx.numpy_helper.from_array(np.ones(8, np.float32), "scale")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)


@pytest.mark.parametrize("model", [
    _norm_model(epsilon=1e-5, axis=-1),  # as onnxruntime-genai's builder writes it
    _norm_model(),
    _norm_model(epsilon=1e-5, kernel=3),  # an attribute its schema does not name: ORT ignores it
    _norm_model(axis=1.5),  # axis is an INT
    _node_model("Affine", 9, alpha=2.0),
    _node_model("Affine", 10, alpha=2.0),  # ORT dropped Affine at opset 10
    _node_model("MemcpyToHost", 17, bogus=1),
], ids=["builder", "defaults", "unknown-attribute", "wrong-type", "affine-9", "affine-10", "memcpy-unknown-attribute"])
def test_a_model_is_read_exactly_where_ort_loads_it(model, tmp_path):
    error = ort_error(model)
    loads = not error or "Could not find an implementation" in error  # no CPU kernel: the graph itself is fine
    path = _save(model, tmp_path / "model.onnx")
    if loads:
        load_model(path)
    else:
        with pytest.raises(BadModel):
            load_model(path)


def test_the_schemas_are_registered_only_while_a_model_is_read(tmp_path):
    load_model(_save(_norm_model(epsilon=1e-5), tmp_path / "norm.onnx"))
    assert not onnx.defs.has("SimplifiedLayerNormalization", "")
