"""Every attention operator's ORT 1.31.1 schema (each reader's `Schema`: required attributes and
inputs, each input's type constraint) against ONNX Runtime's own registry, and the models it
refuses, refused: ONNX Runtime's CPU engine refuses each to load, and `attnws model` refuses it
as a bad model (exit 1, naming the node, the input and the rule), never sizes it and never
exits 4.

The sweep puts every input of every operator at every element type below, beside an input of
the same type constraint where there is one, and holds attnws's verdict to ORT's: a type error
when ORT resolves the graph is a bad model, anything else ORT loads (or would, but for a CPU
kernel) is read.
"""

from __future__ import annotations

from typing import Any, Sequence

import onnx
import pytest
from onnx import TensorProto, helper

from attnws.model import BadModel
from attnws.model.registry import READERS, reader_of
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.spec.errors import InternalError, WorkspaceError

from tests.cli.helpers import attnws

from .builders import FP16, MS, OPSETS, ort_error, run, save

ort = pytest.importorskip("onnxruntime")
ORT_VERSION = "1.31.1"
INT32, INT64, FP32 = TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT
# The element types the sweep puts on each input: every type a constraint of the operators
# allows, and some none does.
SWEEP_TYPES = ("float", "float16", "bfloat16", "double", "int8", "uint8", "int32", "int64", "float8e4m3fn", "bool")


def _elem(name: str) -> int:
    return getattr(TensorProto, name.upper())


# -- the schema ------------------------------------------------------------------------------------

def _registry(op_type: str) -> Any:
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    (schema,) = [s for s in get_all_operator_schema() if s.name == op_type and s.domain == MS]
    return schema


def test_the_oracle_is_the_pinned_release():
    assert ort.__version__ == ORT_VERSION


@pytest.mark.parametrize("op_type", sorted(READERS))
def test_each_reader_s_schema_is_ort_s_own(op_type):
    """Names, required inputs, each input's type string, each constraint's allowed types, the
    attributes with their types and which are required, the outputs: as ORT 1.31.1 registers them."""
    schema, reader = _registry(op_type), reader_of(op_type)
    assert reader.input_names == tuple(p.name for p in schema.inputs)
    assert reader.input_types == tuple(p.typeStr for p in schema.inputs)
    assert reader.required_inputs == tuple(i for i, p in enumerate(schema.inputs) if p.option.name == "Single")
    constraints = {c.type_param_str: sorted(c.allowed_type_strs) for c in schema.type_constraints}
    used = {p.typeStr for p in schema.inputs} & set(constraints)  # QK types an output only
    assert {v: sorted(f"tensor({t})" for t in allowed) for v, allowed in reader.type_constraints.items()} == \
        {v: constraints[v] for v in used}
    assert {name: onnx.AttributeProto.AttributeType.Name(kind) for name, kind in reader.attribute_types.items()} == \
        {name: a.type.name for name, a in schema.attributes.items()}
    assert set(reader.required_attributes) == {name for name, a in schema.attributes.items() if a.required}
    assert len(reader.output_names) == len(schema.outputs)
    renamed = [(ours, p.name) for ours, p in zip(reader.output_names, schema.outputs) if ours != p.name]
    # MultiHeadAttention's output 3 is "qk" in the schema; attnws says output_qk, ORT's kernel's name
    assert renamed == ([("output_qk", "qk")] if op_type == "MultiHeadAttention" else [])


# -- the sweep: every input at every element type -------------------------------------------------

def _valid(reader: Any, index: int) -> int:
    """The element type a valid node gives input `index`: its constraint's first type; for T and
    the cache float16, or bfloat16 where T does not allow float (PagedAttention): ORT's CPU engine,
    which has no kernel for the node, puts a float Cast before each float16 input, which such a T
    refuses ("Type Error ... InsertedPrecisionFreeCast"), whatever the node."""
    variable, allowed = reader.allowed_types(index)
    if variable in ("T", "T_CACHE"):
        return FP16 if "float" in reader.type_constraints["T"] else TensorProto.BFLOAT16
    return _elem(allowed[0])


def _sweep_model(op_type: str, index: int, elem_type: str, drop: str = "") -> onnx.ModelProto:
    """A one-node model with the required inputs and input `index` (shapeless graph inputs), every
    one of its valid type but input `index`, which is `elem_type`; with another input of its
    constraint variable beside it, where the operator has one, so that ORT binds the variable
    first; every required attribute but `drop`."""
    reader = reader_of(op_type)
    variable, _ = reader.allowed_types(index)
    partner = [i for i in reader.inputs_of(variable) if i != index][:1] if variable else []
    present = sorted({*reader.required_inputs, index, *partner})
    names = [reader.input_names[i] if i in present else "" for i in range(max(present) + 1)]
    inputs = [helper.make_tensor_value_info(reader.input_names[i], _elem(elem_type) if i == index else
                                            _valid(reader, i), None) for i in present]
    attributes = {name: 4 if name == "num_heads" else 2 for name in reader.required_attributes if name != drop}
    node = helper.make_node(op_type, names, ["out"], name="attn", domain=MS, **attributes)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("out", _valid(reader, 0), None)])
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=10)


def _ort_refuses_the_types(error: str) -> bool:
    """Return whether ORT's load error is its schema's type check; fail on any error that is
    neither that nor a missing CPU kernel (the graph itself is fine: the CUDA EP has others; the
    packed operators have no CPU kernel at all)."""
    if "Type Error" in error:
        return True
    assert not error or "Could not find an implementation" in error or "Kernel not found" in error, error
    return False


SWEEP = [(op_type, index, elem) for op_type, reader in sorted(READERS.items())
         for index in range(len(reader.input_names)) for elem in SWEEP_TYPES]


def _sweep_id(case: tuple[str, int, str]) -> str:
    op_type, index, elem = case
    return f"{op_type}-{reader_of(op_type).input_names[index]}-{elem}"


@pytest.mark.parametrize("case", SWEEP, ids=_sweep_id)
def test_every_input_type_is_refused_exactly_where_ort_refuses_it(case, tmp_path):
    op_type, index, elem = case
    model = _sweep_model(op_type, index, elem)
    ort_refuses = _ort_refuses_the_types(ort_error(model))
    reader = reader_of(op_type)
    variable, allowed = reader.allowed_types(index)
    # the schema's own answer, in words: allowed, and the partner's type where one binds it first
    partnered = variable is not None and len(reader.inputs_of(variable)) > 1
    assert ort_refuses == (elem not in allowed or (partnered and _elem(elem) != _valid(reader, index)))
    path = save(model, tmp_path)
    try:
        run(path)
    except BadModel as error:
        assert ort_refuses, f"attnws refuses a model ONNX Runtime loads: {error}"
        name = reader.input_names[index]
        assert f"node 'attn' ({op_type}, graph main): " in str(error) and f"{name} '{name}') is {elem}" in str(error)
        assert f"its type constraint {variable}" in str(error) if variable else f"types {name} tensor(" in str(error)
    except InternalError as error:  # exit 4
        pytest.fail(f"internal error: {error}")
    except WorkspaceError:
        assert not ort_refuses
    else:
        assert not ort_refuses, "attnws reads a model ONNX Runtime refuses"


def test_the_sweep_covers_every_constraint_of_every_operator():
    """Every constraint variable and fixed type of every operator is swept, both refused (a type
    it does not allow, a second type bound to it) and allowed."""
    for reader in READERS.values():
        for variable in {*reader.input_types}:
            index = reader.input_types.index(variable)
            allowed = reader.allowed_types(index)[1]
            assert set(allowed) <= set(SWEEP_TYPES) and set(SWEEP_TYPES) - set(allowed)


@pytest.mark.parametrize("op_type, attribute", [(op_type, name) for op_type, reader in sorted(READERS.items())
                                                 for name in reader.required_attributes])
def test_a_missing_required_attribute_is_refused_as_ort_refuses_it(op_type, attribute, tmp_path):
    query = TensorProto.DataType.Name(_valid(reader_of(op_type), 0)).lower()
    model = _sweep_model(op_type, 0, query, drop=attribute)
    assert f"Required attribute '{attribute}' is missing" in ort_error(model)
    assert _ort_refuses_the_types(ort_error(_sweep_model(op_type, 0, query))) is False  # with it: loads
    with pytest.raises(BadModel, match=f"node 'attn' \\({op_type}, graph main\\): required attribute {attribute} "
                                       f"is missing; ONNX Runtime's {op_type} requires "):
        run(save(model, tmp_path))


def test_a_non_tensor_input_is_refused_as_ort_refuses_it(tmp_path):
    """A sequence where the schema takes a tensor: ORT's type check refuses it, and so does attnws."""
    seq = helper.make_node("SequenceConstruct", ["x"], ["q"])
    node = helper.make_node("MultiHeadAttention", ["q"], ["out"], name="attn", domain=MS, num_heads=4)
    graph = helper.make_graph([seq, node], "g", [helper.make_tensor_value_info("x", FP16, [2, 8, 64])],
                              [helper.make_tensor_value_info("out", FP16, None)])
    model = helper.make_model(graph, opset_imports=OPSETS, ir_version=10)
    assert _ort_refuses_the_types(ort_error(model))
    with pytest.raises(BadModel, match=r"input 0 \(query 'q'\) is seq\(tensor\(float16\)\), not a tensor; ONNX "
                                       r"Runtime's MultiHeadAttention refuses the model \(its type constraint T: "):
        run(save(model, tmp_path))


# -- the models: sized or exit 4 before, bad models now --------------------------------------

B, S, N, NK, H, P = 2, 8, 4, 2, 64, 32
GQA = "GroupQueryAttention"
Input = tuple[str, int, Sequence[int]] | None


def _gqa(cache: tuple[int, int] = (FP16, FP16), position_ids: int | None = None, scales: int | None = None,
         **attrs: Any) -> onnx.ModelProto:
    """A decode-step GroupQueryAttention node with its present outputs (past_key and past_value
    of the `cache` element types; `scales`, per-tensor k_scale / v_scale of that type, with an
    8-bit cache; `position_ids` of that type, with rotary caches)."""
    rotary = position_ids is not None
    inputs: list[Input] = [("q", FP16, [B, S, N * H]), ("k", FP16, [B, S, NK * H]), ("v", FP16, [B, S, NK * H]),
                           ("pk", cache[0], [B, NK, P, H]), ("pv", cache[1], [B, NK, P, H]),
                           ("sk", INT32, [B]), ("tsl", INT32, [])]
    inputs += [("cos", FP16, [P, H // 2]), ("sin", FP16, [P, H // 2]), ("pos", position_ids, [B, S])] if rotary \
        else [None] * 3
    inputs += [None, None]  # attention_bias, head_sink
    inputs += [("ks", scales, [1]), ("vs", scales, [1])] if scales else [None] * 2
    while inputs[-1] is None:
        inputs.pop()
    names = [i[0] if i else "" for i in inputs]
    graph_inputs = [helper.make_tensor_value_info(*i) for i in inputs if i]
    attributes = {"num_heads": N, "kv_num_heads": NK, **({"do_rotary": 1} if rotary else {}), **attrs}
    if scales:
        attributes.update(kv_cache_bit_width=8, k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR")
    attributes = {name: value for name, value in attributes.items() if value is not None}
    node = helper.make_node(GQA, names, ["out", "present_key", "present_value"], name="attn", domain=MS, **attributes)
    outputs = [helper.make_tensor_value_info("out", FP16, None),
               helper.make_tensor_value_info("present_key", cache[0], None),
               helper.make_tensor_value_info("present_value", cache[1], None)]
    return helper.make_model(helper.make_graph([node], "g", graph_inputs, outputs), opset_imports=OPSETS, ir_version=10)


# The models: (model ORT refuses, its valid twin, what ORT says, what attnws says). Before
# the schema's type constraints and required attributes were checked, attnws exited 4 (TypeError)
# on the first two and sized the others (exit 0).
REFUSED = {
    "gqa-without-kv_num_heads": (
        _gqa(kv_num_heads=None), _gqa(),
        "Required attribute 'kv_num_heads' is missing",
        "node 'attn' (GroupQueryAttention, graph main): required attribute kv_num_heads is missing; ONNX Runtime's "
        "GroupQueryAttention requires num_heads and kv_num_heads and refuses the model"),
    "gqa-without-num_heads": (
        _gqa(num_heads=None), _gqa(),
        "Required attribute 'num_heads' is missing",
        "required attribute num_heads is missing"),
    "gqa-past_key-float16-past_value-int8": (
        _gqa(cache=(FP16, TensorProto.INT8)), _gqa(),
        "Type parameter (T_CACHE) of Optype (GroupQueryAttention) bound to different types (tensor(float16) and "
        "tensor(int8) in node (attn)",
        "input 3 (past_key 'pk') is float16 but input 4 (past_value 'pv') is int8; ONNX Runtime's GroupQueryAttention "
        "takes one element type for all of them and refuses the model (its type constraint T_CACHE: past_key, "
        "past_value, bound to float16 by past_key)"),
    "gqa-past_key-int8-past_value-uint8": (
        _gqa(cache=(TensorProto.INT8, TensorProto.UINT8), scales=FP32),
        _gqa(cache=(TensorProto.INT8,) * 2, scales=FP32),
        "Type parameter (T_CACHE) of Optype (GroupQueryAttention) bound to different types (tensor(int8) and "
        "tensor(uint8) in node (attn)",
        "input 3 (past_key 'pk') is int8 but input 4 (past_value 'pv') is uint8; ONNX Runtime's GroupQueryAttention "
        "takes one element type for all of them"),
    "gqa-position_ids-int32": (
        _gqa(position_ids=INT32), _gqa(position_ids=INT64),
        "Type 'tensor(int32)' of input parameter (pos) of operator (GroupQueryAttention) in node (attn) is invalid",
        "input 9 (position_ids 'pos') is int32; ONNX Runtime's GroupQueryAttention takes int64 there and refuses the "
        "model (its schema types position_ids tensor(int64))"),
    "gqa-scales-float16": (
        _gqa(cache=(TensorProto.INT8,) * 2, scales=FP16), _gqa(cache=(TensorProto.INT8,) * 2, scales=FP32),
        "Type 'tensor(float16)' of input parameter (ks) of operator (GroupQueryAttention) in node (attn) is invalid",
        "input 12 (k_scale 'ks') is float16; ONNX Runtime's GroupQueryAttention takes float there and refuses the "
        "model (its type constraint T_KV_SCALE: k_scale, v_scale)"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_ort_refuses_each_model_to_load(name):
    model, twin, ort_says, _ = REFUSED[name]
    assert ort_says in ort_error(model)
    assert ort_error(twin) == ""  # the one change is what ORT refuses: the twin loads


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_attnws_refuses_each_as_a_bad_model(name, tmp_path):
    model, _, _, message = REFUSED[name]
    result = attnws("model", save(model, tmp_path), "--max-total-seq", "64")
    assert result.code == EXIT_REJECTED, result  # never 4 (internal), never 0 (sized)
    assert result.out.startswith("rejected (bad_model): ") and message in result.out, result.out
    with pytest.raises(BadModel):
        run(save(model, tmp_path, "again.onnx"), "--max-total-seq", "64")


def test_a_type_only_inference_knows_is_checked(tmp_path):
    """past_value an int8 Cast of a float16 graph input: the load-time check cannot see its type,
    the check after shape inference does, as ORT's graph resolution does."""
    model = _gqa()
    model.graph.node.insert(0, helper.make_node("Cast", ["pv_source"], ["pv"], to=TensorProto.INT8))
    next(i for i in model.graph.input if i.name == "pv").name = "pv_source"
    assert "Type parameter (T_CACHE) of Optype (GroupQueryAttention) bound to different types" in ort_error(model)
    with pytest.raises(BadModel, match=r"input 4 \(past_value 'pv'\) is int8; .* \(its type constraint T_CACHE: "):
        run(save(model, tmp_path), "--max-total-seq", "64")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_valid_twin_is_sized(name, tmp_path):
    """The model without the one thing ORT refuses is sized: each refusal is that thing's."""
    _, twin, _, _ = REFUSED[name]
    result = attnws("model", save(twin, tmp_path), "--max-total-seq", "64")
    assert result.code == EXIT_OK, result
