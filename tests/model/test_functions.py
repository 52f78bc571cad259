"""Attention nodes inside model-local functions: ONNX Runtime inlines every call and runs the
body's nodes, so `attnws model` reports one node per call, named by the call-site path, with the
function's inputs and attributes bound to the call's, as ONNX Runtime 1.31.1 (CPU) inlines them.
A recursive function is a bad model, and so is a ref_attr_name outside a function body; calls
that multiply the nodes past --max-nodes make the model too large."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from attnws.spec.command_line import EXIT_OK
from attnws.model import BadModel, ModelTooLarge, ShapeBounds, analyze_model, load_model
from attnws.spec.estimate import estimate_for_node
from attnws.spec.hints import MISSING
from attnws.spec.options import RuntimeConfig

from .builders import (
    FP32,
    LAYER_SHAPE,
    call,
    functions_model,
    heads_attribute,
    local_function,
    mha_node,
    ort_attention_nodes,
    run,
    save,
)

HINTS = (tuple(LAYER_SHAPE),) * 3 + (MISSING,) * 7


def two_layers(first_heads=4, second_heads=4) -> onnx.ModelProto:
    """main: layer0 = Layer(x), layer1 = Layer(layer0's output); an unused function beside it."""
    return functions_model([call("Layer", ["x"], ["y1"], "layer0", heads=first_heads),
                            call("Layer", ["y1"], ["y"], "layer1", heads=second_heads)], [layer(), unused()])


def layer() -> onnx.FunctionProto:
    """Layer(x) -> y: one MultiHeadAttention over x, num_heads from the call's `heads`."""
    return local_function("Layer", [mha_node()])


def unused() -> onnx.FunctionProto:
    return local_function("Unused", [mha_node(heads=2)])


def ort_attributes(model: onnx.ModelProto, folder) -> list[dict[str, int]]:
    """Return num_heads of each attention node ONNX Runtime runs."""
    return [{a.name: a.i for a in node.attribute if a.name == "num_heads"} for node in ort_attention_nodes(model, folder)]


def expected(heads: int):
    return estimate_for_node("MultiHeadAttention", "float", {"num_heads": heads}, HINTS, RuntimeConfig())


def test_a_function_called_twice_is_two_nodes_named_by_their_call_sites(tmp_path):
    path = save(two_layers(), tmp_path)
    result = run(path, "--json")
    assert result.exit_code == EXIT_OK
    doc = result.json
    assert [(n["graph"], n["name"]) for n in doc["nodes"]] == [("main/layer0", "attn"), ("main/layer1", "attn")]
    assert all(n["input_shapes"][:3] == [LAYER_SHAPE] * 3 for n in doc["nodes"])  # layer1's from layer0's output
    report = analyze_model(load_model(path), ShapeBounds())
    assert [n.estimate for n in report.nodes] == [expected(4)] * 2 and expected(4).ok
    assert doc["sum_total_bytes"] == 2 * expected(4).total_workspace_bytes
    assert doc["groups"] == [{"count": 2, "nodes": [0, 1], "op_type": "MultiHeadAttention", "status": "ok",
                              "total_workspace_bytes": expected(4).total_workspace_bytes}]
    text = run(path).text
    assert "main/layer0/attn, main/layer1/attn (x2, identical): MultiHeadAttention, float, num_heads = 4" in text
    assert len(ort_attention_nodes(two_layers(), tmp_path)) == 2


def test_num_heads_comes_from_each_calls_attribute(tmp_path):
    report = analyze_model(two_layers(4, 2), ShapeBounds())
    assert [n.attributes for n in report.nodes] == ort_attributes(two_layers(4, 2), tmp_path) \
        == [{"num_heads": 4}, {"num_heads": 2}]
    assert [n.estimate for n in report.nodes] == [expected(4), expected(2)]


def test_a_calls_missing_attribute_takes_the_functions_default_or_is_missing(tmp_path):
    """ORT takes the default a function declares (ONNX's inliner would drop the attribute)."""
    default = helper.make_attribute("heads", 2)
    with_default = local_function("Layer", [mha_node()], attributes=(), defaults=[default])
    model = functions_model([call("Layer", name="layer0"), call("Layer", ["y"], ["z"], "layer1", heads=4)],
                            [with_default], output="z")
    report = analyze_model(model, ShapeBounds())
    assert [n.estimate for n in report.nodes] == [expected(2), expected(4)]
    assert [n.attributes for n in report.nodes] == ort_attributes(model, tmp_path) == [{"num_heads": 2}, {"num_heads": 4}]
    missing = functions_model([call("Layer", name="layer0")], [layer()])  # no heads, no default: ORT refuses it
    with pytest.raises(Exception, match="Required attribute 'num_heads' is missing"):
        ort_attention_nodes(missing, tmp_path)
    with pytest.raises(BadModel, match="required attribute num_heads is missing"):
        analyze_model(missing, ShapeBounds())


def test_an_unreachable_functions_nodes_are_not_counted(tmp_path):
    model = functions_model([helper.make_node("Identity", ["x"], ["y"])], [layer(), unused()])
    result = run(save(model, tmp_path))
    assert result.exit_code == EXIT_OK and result.json["node_count"] == 0
    assert result.text.startswith("nothing to reserve: the model has no PackedAttention, PackedMultiHeadAttention, "
                                  "MultiHeadAttention, GroupQueryAttention or PagedAttention node\n")
    assert ort_attention_nodes(model, tmp_path) == []


def test_nested_calls_and_calls_in_subgraphs_are_named_by_their_path(tmp_path):
    block = local_function("Block", [call("Layer", name="inner", heads=4),
                                     local_function_call_unnamed()])
    then = helper.make_graph([call("Block", ["x"], ["t"], "block1", heads=4)], "then", [],
                             [helper.make_tensor_value_info("t", FP32, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", FP32, None)])
    nodes = [call("Block", ["x"], ["b0"], "block0", heads=4),
             helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then, else_branch=other)]
    model = functions_model(nodes, [layer(), block], extra_inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, [])])
    report = analyze_model(load_model(save(model, tmp_path)), ShapeBounds())
    assert [n.path for n in report.nodes] == [
        "main/block0/inner/attn", "main/block0/Layer#1/attn",
        "main/gate.then_branch/block1/inner/attn", "main/gate.then_branch/block1/Layer#1/attn"]
    assert all(n.estimate == expected(4) for n in report.nodes)
    assert len(ort_attention_nodes(model, tmp_path)) == 4


def local_function_call_unnamed() -> onnx.NodeProto:
    """An unnamed call (labelled `Layer#1`, its position in the body) that passes `heads` on."""
    node = helper.make_node("Layer", ["x"], ["z"], domain="local")
    node.attribute.append(heads_attribute("heads", "heads"))
    return node


@pytest.mark.parametrize("cycle", [["A"], ["A", "B"], ["A", "B", "C"]], ids=len)
def test_recursive_functions_are_bad_models(cycle, tmp_path):
    functions = [local_function(name, [call(cycle[(i + 1) % len(cycle)], name="again")])
                 for i, name in enumerate(cycle)]
    model = functions_model([call("A", name="start")], functions)
    chain = " -> ".join(f"local.{name}" for name in [*cycle, cycle[0]])
    with pytest.raises(BadModel, match=f"the model-local function local.A calls itself \\({chain}\\); ONNX refuses "
                                       "recursive functions"):
        run(save(model, tmp_path))


def test_calls_nested_deeper_than_onnx_inlines_at_once_are_inlined_in_passes(tmp_path):
    """ONNX's inliner stops at 100 levels of calls; ONNX Runtime runs 150."""
    depth = 150
    functions = [local_function(f"F{i}", [call(f"F{i + 1}", name="next")] if i < depth else [mha_node(heads=4)])
                 for i in range(depth + 1)]
    model = functions_model([call("F0", name="start")], functions)
    report = analyze_model(load_model(save(model, tmp_path)), ShapeBounds())
    assert [n.path for n in report.nodes] == ["main/start" + "/next" * depth + "/attn"]
    assert report.nodes[0].estimate == expected(4)
    assert len(ort_attention_nodes(model, tmp_path)) == 1


def test_calls_that_multiply_the_nodes_are_refused_at_the_node_limit(tmp_path):
    """Each level calls the next twice: 2**40 attention nodes once inlined, refused before any is built."""
    levels = 40
    functions = [local_function(f"F{i}", [call(f"F{i + 1}", name="a"), call(f"F{i + 1}", name="b")])
                 for i in range(levels)] + [local_function(f"F{levels}", [mha_node(heads=4)])]
    path = save(functions_model([call("F0", name="start")], functions), tmp_path)
    with pytest.raises(ModelTooLarge, match="holds more than 1,000 nodes once its functions are inlined, the "
                                           "limit \\(--max-nodes\\)"):
        load_model(path, max_nodes=1000)


def test_a_malformed_node_in_a_function_is_named_by_its_call_site(tmp_path):
    bad = local_function("Layer", [helper.make_node("MultiHeadAttention", ["x", "x", "x"], ["y"], name="attn",
                                                    domain="com.microsoft", num_heads=4, bogus=1)])
    with pytest.raises(BadModel, match="node 'attn' \\(MultiHeadAttention, graph main/layer0\\): unknown attribute "
                                       "'bogus'"):
        run(save(functions_model([call("Layer", name="layer0")], [bad]), tmp_path))


def test_ref_attr_name_outside_a_function_body_is_a_bad_model(tmp_path):
    model = functions_model([mha_node(name="attn")], [])
    with pytest.raises(BadModel, match="node 'attn' \\(MultiHeadAttention, graph main\\): attribute 'num_heads' refers "
                                       "to the attribute 'heads' of a calling function \\(ref_attr_name\\), which only "
                                       "a function body may do"):
        run(save(model, tmp_path))
    then = helper.make_graph([mha_node(name="inner", output="t")], "then", [],
                             [helper.make_tensor_value_info("t", FP32, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", FP32, None)])
    gate = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then, else_branch=other)
    model = functions_model([gate], [], extra_inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, [])])
    with pytest.raises(BadModel, match="node 'inner' \\(MultiHeadAttention, graph main/gate.then_branch\\): attribute "
                                       "'num_heads' refers"):
        run(save(model, tmp_path))


def test_exit_codes_and_text_through_the_command(tmp_path):
    result = run(save(two_layers(4, 2), tmp_path))
    assert result.exit_code == EXIT_OK
    assert result.text.splitlines()[0].startswith(f"reserve {expected(4).total_workspace_bytes:,} B")
    missing = functions_model([call("Layer", name="layer0")], [layer()])  # num_heads missing: a bad model, exit 1
    with pytest.raises(BadModel, match="required attribute num_heads is missing"):
        run(save(missing, tmp_path))
