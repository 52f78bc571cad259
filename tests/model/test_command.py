"""`attnws model` end to end through its own register(): exit codes, JSON numbers, text."""

from __future__ import annotations

import onnx
import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.spec.errors import UsageError
from attnws.spec.estimate import estimate_geometry
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op
from attnws.spec.packed.problem import QkvFormat
from attnws.spec.units import format_bytes
from attnws.spec.commands import estimate_json

from .builders import MS, OPSETS, run, save

DIMS = ["--dim", "token_count=24", "--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=5"]
SPEC = EncoderSpec(layers=2, hidden=64, heads=4, ffn=64, pmha_format=QkvFormat.SEPARATE, qkv_bias=True)
GEOMETRY = Geometry(op=Op.PMHA, element_size=2, batch=4, seq=8, heads=4, head_size=16, tokens=24,
                    pmha_format=QkvFormat.SEPARATE, qkv_bias=True)


@pytest.fixture
def model_path(tmp_path):
    return save(packed_encoder(SPEC), tmp_path)


def test_json_numbers_equal_the_estimate_command(model_path):
    result = run(model_path, *DIMS, "--sm", "90")
    expected = estimate_geometry(GEOMETRY, RuntimeConfig.make(sm=90))
    assert result.exit_code == EXIT_OK
    doc = result.json
    assert doc["complete"] and doc["node_count"] == doc["sized_count"] == 2
    assert [n["estimate"] for n in doc["nodes"]] == [estimate_json(expected)] * 2
    assert doc["nodes"][0]["estimate"]["requirements"] == [r.as_dict() for r in expected.requirements()]
    assert doc["sum_total_bytes"] == 2 * expected.total_workspace_bytes
    assert doc["peak_total_bytes"] == expected.total_workspace_bytes
    assert doc["nodes"][0]["input_shapes"] == [[24, 64], [24, 64], [24, 64], [192], [4, 8], [5], None]


def test_text_shows_each_node_and_the_totals(model_path):
    text = run(model_path, *DIMS).text
    total = estimate_geometry(GEOMETRY).total_workspace_bytes
    assert "attention_0, attention_1 (x2, identical) in graph main: PackedMultiHeadAttention" in text
    assert text.endswith(
        "model totals (every node)\n"
        "  peak: what ORT's arena needs, reusing one workspace as the nodes run one after another\n"
        "  sum:  what a planner needs that keeps every node's workspace alive together\n"
        "               peak      sum\n"
        f"  ORT's bound  {format_bytes(total)}  {format_bytes(2 * total)}")
    assert not any(mark in text for mark in ("{'", "None", "()")), text


def test_unbounded_dimension_exits_1_with_the_reason(model_path):
    result = run(model_path, "--dim", "batch=4")
    assert result.exit_code == EXIT_REJECTED
    assert not result.json["complete"] and result.json["sum_total_bytes"] is None  # nothing sized: no number
    assert "'token_count' with no bound" in result.json["nodes"][0]["estimate"]["message"]


@pytest.mark.parametrize("argv,message", [
    (["--dim", "batch"], "expected NAME=MAX"),
    (["--dim", "batch=x"], "not a non-negative integer in ASCII digits"),
    (["--dim", "batch=-1"], "not a non-negative integer in ASCII digits"),
    (["--dim", "batch=\u0668"], "not a non-negative integer in ASCII digits"),
    (["--dim", "batch=2147483648"], "must be within"),
    (["--dim", "batch=1", "--dim", "batch=2"], "given twice"),
    (["--max-shape-override", "token_offset=[4,8]"], "expected NAME:"),
    (["--max-shape-override", "token_offset:[4,8];token_offset:[4,8]"], "twice"),
    (["--max-bytes", "-1"], "--max-bytes -1 must be non-negative"),
    (["--max-nodes", "-1"], "--max-nodes -1 must be non-negative"),
    (["--env", "NOEQUALS"], "expected NAME=VALUE"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_usage_errors(argv, message, model_path):
    with pytest.raises(UsageError, match=message):
        run(model_path, *argv)


def test_environment_reaches_the_estimate(model_path):
    result = run(model_path, *DIMS, "--env", "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION=1")
    expected = estimate_geometry(GEOMETRY, RuntimeConfig.make(env={"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}))
    assert result.json["nodes"][1]["estimate"] == estimate_json(expected)


def test_max_nodes_flag(model_path):
    from attnws.model import ModelTooLarge

    assert run(model_path, *DIMS, "--max-nodes", "20").exit_code == EXIT_OK  # 2 layers of 10 nodes
    with pytest.raises(ModelTooLarge, match=r"has 20 nodes, over the limit of 19 \(--max-nodes\)"):
        run(model_path, *DIMS, "--max-nodes", "19")


def test_text_leads_with_what_to_reserve(model_path):
    total = estimate_geometry(GEOMETRY).total_workspace_bytes
    assert run(model_path, *DIMS).text.splitlines()[0] == (
        f"reserve {format_bytes(total)} for attention workspace: the peak, the largest node's, when ORT's arena reuses "
        f"one workspace as the nodes run one after another; {format_bytes(2 * total)}, the sum, if a planner keeps "
        "every node's workspace alive together")


def _two_layers_on_their_own_inputs(tokens: int | str | None = None) -> onnx.ModelProto:
    """Two PackedMultiHeadAttention nodes, each reading its own q/k/v graph inputs [tokens, 64]
    (None: shapeless)."""
    helper, int32 = onnx.helper, onnx.TensorProto.INT32
    inputs = [helper.make_tensor_value_info("to", int32, [4, 8]), helper.make_tensor_value_info("cu", int32, [5])]
    nodes = []
    for layer in range(2):
        names = [f"{x}{layer}" for x in "qkv"]
        inputs += [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT16, None if tokens is None else [tokens, 64])
                   for name in names]
        nodes.append(helper.make_node("PackedMultiHeadAttention", [*names, "", "to", "cu"], [f"out{layer}"],
                                      name=f"attention_{layer}", domain=MS, num_heads=4))
    outputs = [helper.make_tensor_value_info(f"out{layer}", onnx.TensorProto.FLOAT16, None) for layer in range(2)]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=OPSETS)


def test_unavailable_nodes_with_one_reason_group_and_no_number_leads(tmp_path):
    """The two nodes' reasons differ only in their tensors' names: one block, no reservation."""
    result = run(save(_two_layers_on_their_own_inputs(), tmp_path))
    lines = result.text.splitlines()
    assert lines[0] == "no safe reservation: none of the 2 attention node(s) could be sized (why below)"
    assert lines[1].endswith("2 attention node(s), 0 sized, 1 distinct")
    assert lines[2].startswith("attention_0, attention_1 (x2, identical but for tensor names; the first named below) "
                               "in graph main: PackedMultiHeadAttention")
    assert result.json["groups"] == [{"count": 2, "nodes": [0, 1], "op_type": "PackedMultiHeadAttention",
                                      "status": "unavailable", "total_workspace_bytes": None}]
    messages = [n["estimate"]["message"] for n in result.json["nodes"]]
    assert "input 0 (query 'q0') is present" in messages[0] and "input 0 (query 'q1') is present" in messages[1]
    sized = run(save(_two_layers_on_their_own_inputs(24), tmp_path))
    assert sized.exit_code == EXIT_OK and "attention_0, attention_1 (x2, identical) in graph main" in sized.text
    derived = run(save(_two_layers_on_their_own_inputs("T"), tmp_path))  # T <= B * S = 32, from token_offset [4, 8]
    assert derived.exit_code == EXIT_OK and [(d["name"], d["value"], d["relation"]) for d in derived.json["derived"]] \
        == [("T", 32, "maximum")]


def test_some_nodes_unavailable_gives_the_sized_ones_totals_but_no_reservation(tmp_path):
    model = packed_encoder(SPEC)
    model.graph.node.append(onnx.helper.make_node(
        "PackedMultiHeadAttention", ["q_unknown", "q_unknown", "q_unknown", "", "token_offset",
                                     "cumulative_sequence_length"], ["extra"], name="extra", domain=MS, num_heads=4))
    model.graph.input.append(onnx.helper.make_tensor_value_info("q_unknown", onnx.TensorProto.FLOAT16, None))
    result = run(save(model, tmp_path), *DIMS)
    total = estimate_geometry(GEOMETRY).total_workspace_bytes
    assert result.exit_code == EXIT_REJECTED
    assert result.text.splitlines()[0] == (
        f"no safe reservation: 1 of the 3 attention node(s) could not be sized (why below); the 2 sized alone need "
        f"{format_bytes(total)} at their peak, {format_bytes(2 * total)} summed")
    assert [g["nodes"] for g in result.json["groups"]] == [[0, 1], [2]]



def test_help_names_every_operator_read():
    from tests.cli.helpers import attnws

    run_ = attnws("model", "--help")
    text = " ".join(run_.out.split())
    assert run_.code == EXIT_OK
    assert ("every PackedAttention / PackedMultiHeadAttention / MultiHeadAttention / GroupQueryAttention / "
            "PagedAttention node" in text)
    assert "attnws's own for MultiHeadAttention and PagedAttention" in text
    assert "the longest total sequence a GroupQueryAttention node with a non-windowed cache sees" in text
