"""Shape hints from ONNX models: the three input states, bounds, propagation and subgraphs."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from attnws.model import BadModel, ShapeBounds, analyze_model, infer_max_shapes, shape_bounds
from attnws.model.examples import DIM_BATCH, DIM_BATCH_PLUS_ONE, DIM_SEQ, DIM_TOKENS, EncoderSpec, packed_encoder
from attnws.spec.errors import UsageError
from attnws.spec.estimate import estimate_from_hints, estimate_geometry
from attnws.spec.hints import MISSING, NO_SHAPE, Geometry
from attnws.spec.problem import Op
from attnws.spec.packed.problem import QkvFormat

from .builders import FP16, FP32, MS, OPSETS, node_model, pmha_separate_inputs, run, save

NONE = ShapeBounds()
SEPARATE = Geometry(op=Op.PMHA, element_size=2, batch=4, seq=8, heads=4, head_size=16, tokens=24,
                    pmha_format=QkvFormat.SEPARATE)


def only_node(model, bounds=NONE):
    report = analyze_model(model, bounds)
    assert len(report.nodes) == 1
    return report.nodes[0]


def test_optional_inputs_missing_are_missing_hints():
    node = only_node(node_model("PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4))
    assert node.hints == ((24, 64), (24, 64), (24, 64), MISSING, (4, 8), (5,), MISSING)
    assert node.estimate == estimate_geometry(SEPARATE)


def test_optional_input_present_without_shape_is_unavailable():
    inputs = pmha_separate_inputs(bias=("qkv_bias", FP16, None))
    node = only_node(node_model("PackedMultiHeadAttention", inputs, num_heads=4))
    assert node.hints[3] is NO_SHAPE
    assert not node.estimate.ok and "input 3 (bias 'qkv_bias') is present without a known shape" in node.estimate.message


def test_zero_dimension_is_unavailable_never_zero_bytes():
    node = only_node(node_model("PackedMultiHeadAttention", pmha_separate_inputs(b=0), num_heads=4))
    assert not node.estimate.ok and "zero" in node.estimate.message and node.estimate.requirements() == []
    assert node.estimate == estimate_from_hints(Op.PMHA, 2, 4, node.hints)


def test_bfloat16_multihead_attention_is_unavailable():
    """ORT's MultiHeadAttention takes bfloat16 (attnws does not size it)."""
    inputs = [("q", TensorProto.BFLOAT16, [2, 8, 64])] * 3
    node = only_node(node_model("MultiHeadAttention", inputs, num_heads=4))
    assert not node.estimate.ok and "'bfloat16'" in node.estimate.message


@pytest.mark.parametrize("elem,name", [(TensorProto.BFLOAT16, "bfloat16"), (TensorProto.DOUBLE, "double")])
def test_element_type_outside_the_packed_schemas_is_a_bad_model(elem, name):
    """ORT's packed operators take float and float16 only, and refuse the model otherwise."""
    with pytest.raises(BadModel, match=f"input 0 \\(query 'q'\\) is {name}; ONNX Runtime's PackedMultiHeadAttention "
                                       "takes float or float16 there and refuses the model"):
        only_node(node_model("PackedMultiHeadAttention", pmha_separate_inputs(elem=elem), num_heads=4))


def test_missing_num_heads_is_a_bad_model():
    """ORT's schema requires num_heads, and ORT refuses the model without it."""
    with pytest.raises(BadModel, match="required attribute num_heads is missing"):
        only_node(node_model("PackedMultiHeadAttention", pmha_separate_inputs()))


def test_pa_fp32_with_qkv_hidden_sizes_and_broadcast_bias():
    inputs = [("x", FP32, [24, 48]), ("w", FP32, [48, 32 + 32 + 16]), ("b", FP32, [80]), ("to", TensorProto.INT32, [4, 8]),
              ("cu", TensorProto.INT32, [5]), ("ab", FP32, [1, 4, 8, 8])]
    node = only_node(node_model("PackedAttention", inputs, num_heads=4, qkv_hidden_sizes=[32, 32, 16]))
    expected = estimate_geometry(Geometry(op=Op.PA, element_size=4, batch=4, seq=8, heads=4, head_size=8, v_head_size=4,
                                          tokens=24, input_hidden=48, qkv_hidden_sizes=(32, 32, 16), attn_bias=True,
                                          attn_bias_broadcast_batch=True))
    assert expected.ok and node.estimate == expected


def test_symbolic_dimension_without_bound_names_it():
    node = only_node(packed_encoder(EncoderSpec(layers=1, hidden=64, heads=4, ffn=64)),
                     ShapeBounds({DIM_TOKENS: 24, DIM_BATCH: 4, DIM_BATCH_PLUS_ONE: 5}))
    assert not node.estimate.ok
    assert "symbolic dimension 'seq' with no bound (give --dim seq=MAX" in node.estimate.message


def test_max_shape_override_equals_dim_bounds():
    model = packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64))
    by_dims = analyze_model(model, ShapeBounds({DIM_TOKENS: 24, DIM_BATCH: 4, DIM_SEQ: 8, DIM_BATCH_PLUS_ONE: 5}))
    by_override = analyze_model(model, shape_bounds(
        [], "hidden_states:[24,64]; token_offset:[4,8]; cumulative_sequence_length:[5]"))
    mixed = analyze_model(model, shape_bounds([f"{DIM_BATCH_PLUS_ONE}=5"], "hidden_states:[24,64];token_offset:[4,8]"))
    assert by_dims.complete
    assert [n.estimate for n in by_override.nodes] == [n.estimate for n in by_dims.nodes]
    assert [n.estimate for n in mixed.nodes] == [n.estimate for n in by_dims.nodes]


@pytest.mark.parametrize("dims,override,message", [
    (["nope=3"], None, "no such symbolic dimension"),
    ([], "missing_input:[1,2]", "not a graph input"),
    ([], "qkv_weight:[64,192]", "not a graph input"),
    ([], "token_offset:[4,8,1]", "rank 3"),
    ([], "hidden_states:[24,65]", "fixed at 64"),
    ([f"{DIM_BATCH}=3"], "token_offset:[4,8]", "disagrees"),
    ([], "token_offset:[4,8];attention_bias:[2,4,8,8]", "both 4 and 2"),
], ids=lambda v: str(v))
def test_bound_conflicts_are_usage_errors(dims, override, message):
    model = packed_encoder(EncoderSpec(layers=1, hidden=64, heads=4, ffn=64, attention_bias=(False, False)))
    with pytest.raises(UsageError, match=message):
        infer_max_shapes(model, shape_bounds(dims, override))


def test_node_inside_if_branch_is_found_and_sized(tmp_path):
    to, cu = ("to", TensorProto.INT32, [4, 8]), ("cu", TensorProto.INT32, [5])
    outer = [helper.make_tensor_value_info(*i) for i in (("q", FP16, [24, 64]), to, cu)]
    outer.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    attn = helper.make_node("PackedMultiHeadAttention", ["relu_q", "q", "q", "", "to", "cu"], ["a"],
                            domain=MS, num_heads=4)
    then = helper.make_graph([helper.make_node("Relu", ["q"], ["relu_q"]), attn], "then", [],
                             [helper.make_tensor_value_info("a", FP16, None)])
    other = helper.make_graph([helper.make_node("Identity", ["q"], ["i"])], "else", [],
                              [helper.make_tensor_value_info("i", FP16, None)])
    branch = helper.make_node("If", ["cond"], ["y"], name="gate", then_branch=then, else_branch=other)
    graph = helper.make_graph([branch], "g", outer, [helper.make_tensor_value_info("y", FP16, [24, 64])])
    model = helper.make_model(graph, opset_imports=OPSETS)
    node = only_node(model)
    assert node.graph == "main/gate.then_branch" and node.name == "PackedMultiHeadAttention#1"
    assert node.estimate == estimate_geometry(SEPARATE)
    assert run(save(model, tmp_path)).json["nodes"][0]["graph"] == "main/gate.then_branch"  # the file path too


def test_shapes_propagate_through_remove_and_restore_padding():
    """RemovePadding's token count is bounded by B*S; two stacked PMHA nodes both resolve."""
    inputs = [helper.make_tensor_value_info("emb", FP16, ["batch", "seq", 64]),
              helper.make_tensor_value_info("count", TensorProto.INT32, ["batch"])]
    nodes = [helper.make_node("RemovePadding", ["emb", "count"], ["x", "to", "cu", "max_len"], domain=MS)]
    x = "x"
    for layer in range(2):
        nodes.append(helper.make_node("PackedMultiHeadAttention", [x, x, x, "", "to", "cu"], [f"a{layer}"],
                                      domain=MS, name=f"attn{layer}", num_heads=4))
        x = f"a{layer}"
    nodes.append(helper.make_node("RestorePadding", [x, "to"], ["y"], domain=MS))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", FP16, None)])
    model = helper.make_model(graph, opset_imports=OPSETS)
    report = analyze_model(model, shape_bounds([], "emb:[4,8,64];count:[4]"))
    expected = estimate_geometry(Geometry(op=Op.PMHA, element_size=2, batch=4, seq=8, heads=4, head_size=16,
                                          tokens=32, pmha_format=QkvFormat.SEPARATE))
    assert [n.estimate for n in report.nodes] == [expected, expected]
    inferred = infer_max_shapes(model, shape_bounds([], "emb:[4,8,64];count:[4]"))
    y = next(o for o in inferred.graph.output if o.name == "y")
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [4, 8, 64]


def test_node_inside_a_loop_inside_an_if_is_found():
    to, cu = ("to", TensorProto.INT32, [4, 8]), ("cu", TensorProto.INT32, [5])
    outer = [helper.make_tensor_value_info(*i) for i in (("q", FP16, [24, 64]), to, cu)]
    outer += [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
              helper.make_tensor_value_info("trips", TensorProto.INT64, [])]
    body = helper.make_graph(
        [helper.make_node("PackedMultiHeadAttention", ["q", "q", "q", "", "to", "cu"], ["a"], domain=MS,
                          name="inner", num_heads=4),
         helper.make_node("Identity", ["keep_going"], ["keep_going_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("keep_going", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("keep_going_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("a", FP16, None)])
    loop = helper.make_node("Loop", ["trips", ""], ["stacked"], name="loop", body=body)
    then = helper.make_graph([loop], "then", [], [helper.make_tensor_value_info("stacked", FP16, None)])
    other = helper.make_graph([helper.make_node("Unsqueeze", ["q", "zero"], ["u"])], "else", [],
                              [helper.make_tensor_value_info("u", FP16, None)],
                              [helper.make_tensor("zero", TensorProto.INT64, [1], [0])])
    branch = helper.make_node("If", ["cond"], ["y"], name="gate", then_branch=then, else_branch=other)
    graph = helper.make_graph([branch], "g", outer, [helper.make_tensor_value_info("y", FP16, None)])
    node = only_node(helper.make_model(graph, opset_imports=OPSETS))
    assert (node.graph, node.name) == ("main/gate.then_branch/loop.body", "inner")
    assert node.estimate == estimate_geometry(SEPARATE)
