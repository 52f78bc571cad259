"""Dimensions `attnws model` derives from the model (B + 1, T <= B * S, the graph's equalities,
formula names), what it says is missing, and usage errors for given values that contradict it.

The planted-bug tests show that a wrong derivation does not pass unnoticed: the spec's own
builders reject the shapes it produces (the node becomes unavailable, exit 1)."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import attnws.model.derive as derive
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.model import ShapeBounds, analyze_model, node_target, shape_bounds
from attnws.model.derive import evaluate_formula, formula_terms
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.model.report import with_exact_dims
from attnws.spec.errors import InternalError, UsageError
from attnws.spec.estimate import estimate_geometry
from attnws.spec.hints import Geometry
from attnws.spec.problem import Op
from attnws.spec.commands import estimate_json

from .builders import FP16, MS, OPSETS, node_model, run, save
from .test_mha_model import DECODER, ENCDEC

SMALL = dict(layers=2, hidden=64, heads=4, ffn=64)
B, S = 4, 8


@pytest.fixture
def encoder(tmp_path):
    return save(packed_encoder(EncoderSpec(**SMALL)), tmp_path)


def derived(doc) -> list[tuple[str, int, str, str]]:
    return [(d["name"], d["value"], d["relation"], d["formula"]) for d in doc["derived"]]


# -- the packed encoder needs only batch and seq --------------------------------------------------------

@pytest.mark.parametrize("op", [Op.PMHA, Op.PA], ids=lambda op: op.value)
def test_the_packed_encoder_needs_only_batch_and_seq(op, tmp_path):
    path = save(packed_encoder(EncoderSpec(**SMALL, op=op)), tmp_path)
    result = run(path, "--dim", f"batch={B}", "--dim", f"seq={S}")
    assert result.exit_code == EXIT_OK and result.json["complete"] and result.json["missing"] == []
    assert derived(result.json) == [("batch_plus_1", B + 1, "equal", "batch + 1"),
                                    ("token_count", B * S, "maximum", "batch * seq")]
    expected = estimate_geometry(Geometry(op=op, element_size=2, batch=B, seq=S, heads=4, head_size=16, tokens=B * S))
    assert [n["estimate"] for n in result.json["nodes"]] == [estimate_json(expected)] * 2
    lines = result.text.splitlines()
    assert lines[1:4] == [
        "derived from the model (a --dim you give overrides one):",
        f"  batch_plus_1 = {B + 1} (batch + 1): cumulative_sequence_length of {op.onnx_name} node attention_0 "
        f"(input {4 if op is Op.PA else 5}) is [B + 1], B = {B} from token_offset",
        f"  token_count <= {B * S} (batch * seq), taken as its maximum: the packed token count T of {op.onnx_name} "
        f"node attention_0 (input 0, {'input' if op is Op.PA else 'query'}) is at most B * S, B = {B} and S = {S} from "
        "token_offset",
    ]


def test_bert_base_needs_only_batch_and_seq(tmp_path):
    result = run(save(packed_encoder(), tmp_path), "--dim", "batch=16", "--dim", "seq=384")
    assert result.exit_code == EXIT_OK and result.json["node_count"] == result.json["sized_count"] == 12
    assert [(d["name"], d["value"]) for d in result.json["derived"]] == [("batch_plus_1", 17), ("token_count", 6144)]


def test_the_whisper_test_models_need_only_their_batch_and_sequence_symbols():
    result = run(str(ENCDEC), "--dim", "batch_size=4", "--dim", "sequence_length=8")
    assert result.exit_code == EXIT_OK and result.json["missing"] == [] and result.json["derived"] == []
    lines = result.text.splitlines()
    assert lines[0] == ("reserve 1,538,048 B (1.5 MiB) for attention workspace: the peak, the largest node's, when ORT's "
                        "arena reuses one workspace as the nodes run one after another; 3,076,096 B (2.9 MiB), the sum, "
                        "if a planner keeps every node's workspace alive together")
    assert "  peak: what ORT's arena needs, reusing one workspace as the nodes run one after another" in lines
    assert "  sum:  what a planner needs that keeps every node's workspace alive together" in lines


def test_a_given_dimension_wins_over_a_derived_one(encoder):
    result = run(encoder, "--dim", f"batch={B}", "--dim", f"seq={S}", "--dim", "token_count=20")
    assert derived(result.json) == [("batch_plus_1", B + 1, "equal", "batch + 1")]
    assert result.json["nodes"][0]["estimate"]["problem"]["token_count"] == 20


def test_batch_is_derived_back_from_batch_plus_1(encoder):
    result = run(encoder, "--dim", f"batch_plus_1={B + 1}", "--dim", f"seq={S}", "--json")
    assert result.exit_code == EXIT_OK
    assert derived(result.json) == [("batch", B, "equal", "batch_plus_1 - 1"),
                                    ("token_count", B * S, "maximum", "batch * seq")]


def test_an_override_counts_as_given(encoder):
    result = run(encoder, "--max-shape-override", f"token_offset:[{B},{S}]")
    assert result.exit_code == EXIT_OK and [d[0] for d in derived(result.json)] == ["batch_plus_1", "token_count"]


@pytest.mark.parametrize("argv,message", [
    (["--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=9"],
     r"--dim batch_plus_1=9 contradicts the model: PackedMultiHeadAttention node attention_0 takes token_offset "
     r"\[B, S\] = \[4, 8\] and cumulative_sequence_length \[B \+ 1\] = \[9\], but 4 \+ 1 != 9"),
    (["--max-shape-override", "token_offset:[4,8]", "--dim", "batch_plus_1=6"], "--dim batch_plus_1=6 contradicts"),
    (["--max-shape-override", "token_offset:[4,8];cumulative_sequence_length:[4]"],
     r"batch_plus_1 = 4 \(from --max-shape-override\) contradicts"),
], ids=["dims", "override-and-dim", "overrides"])
def test_a_given_value_contradicting_a_derived_equality_is_a_usage_error(argv, message, encoder):
    with pytest.raises(UsageError, match=message):
        run(encoder, *argv)


def test_a_given_token_count_over_b_times_s_is_a_usage_error(tmp_path):
    path = save(packed_encoder(EncoderSpec(**SMALL, op=Op.PA)), tmp_path)  # PA reads hidden_states itself
    with pytest.raises(UsageError, match=r"--dim token_count=33 exceeds batch \* seq = 32: the packed token count T"):
        run(path, "--dim", "batch=4", "--dim", "seq=8", "--dim", "token_count=33")


# -- what is missing ---------------------------------------------------------------------------------

def test_nothing_given_asks_for_batch_and_seq_only(encoder):
    result = run(encoder)
    assert result.exit_code == EXIT_REJECTED
    assert result.text.splitlines()[1:3] == [
        "missing: --dim batch=MAX (the batch size B of PackedMultiHeadAttention node attention_0, input 4 "
        "(token_offset) axis 0)",
        "missing: --dim seq=MAX (the sequence length S of PackedMultiHeadAttention node attention_0, input 4 "
        "(token_offset) axis 1)",
    ]
    assert [m["flag"] for m in result.json["missing"]] == ["--dim batch=MAX", "--dim seq=MAX"]
    assert result.json["derived"] == []


def test_batch_given_asks_for_seq_only(encoder):
    result = run(encoder, "--dim", "batch=4")
    assert [m["name"] for m in result.json["missing"]] == ["seq"]
    assert derived(result.json) == [("batch_plus_1", 5, "equal", "batch + 1")]
    assert "missing: --dim token_count" not in result.text


def test_a_token_count_nothing_determines_is_asked_for(tmp_path):
    """token_offset without a shape: T cannot be derived, so it is the one missing."""
    inputs = [("q", FP16, ["T", 64]), ("k", FP16, ["T", 64]), ("v", FP16, ["T", 64]), None,
              ("to", TensorProto.INT32, None), ("cu", TensorProto.INT32, [5])]
    result = run(save(node_model("PackedMultiHeadAttention", inputs, num_heads=4), tmp_path))
    assert result.exit_code == EXIT_REJECTED
    assert result.text.splitlines()[1] == ("missing: --dim T=MAX (the packed token count of PackedMultiHeadAttention "
                                           "node attn, input 0 (query) axis 0)")


def test_the_decoder_asks_for_its_free_symbols():
    result = run(str(DECODER), "--dim", "batch_size=4")
    assert [m.split(" (")[0] for m in result.text.splitlines()[1:3]] == [
        "missing: --dim sequence_length=MAX", "missing: --dim past_sequence_length=MAX"]
    assert result.json["missing"][1]["where"] == ("the past sequence length P of MultiHeadAttention node Attention_0, "
                                                  "input 6 (past_key) axis 2")


def test_the_decoder_formula_name_is_derived():
    result = run(str(DECODER), "--dim", "batch_size=4", "--dim", "sequence_length=8",
                 "--dim", "past_sequence_length=24")
    assert derived(result.json) == [("past_sequence_length+sequence_length", 32, "equal",
                                     "past_sequence_length+sequence_length")]


@pytest.mark.parametrize("text,values,value,terms", [
    ("a+b", {"a": 3, "b": 4}, 7, ["a", "b"]),
    ("2*a + 1", {"a": 5}, 11, ["a"]),
    ("(a + b) * c - 1", {"a": 1, "b": 2, "c": 3}, 8, ["a", "b", "c"]),
    ("a+b", {"a": 3}, None, ["a", "b"]),
    ("a - b", {"a": 3, "b": 1}, None, None),  # a symbol subtracted: not monotone
    ("batch", {"batch": 3}, None, None),  # a plain name
    ("floor(a/2)", {"a": 4}, None, None),
])
def test_formula_names(text, values, value, terms):
    assert evaluate_formula(text, values) == value and formula_terms(text) == terms


# -- the graph's own equalities ----------------------------------------------------------------------

def _broadcast_model(tie: bool) -> onnx.ModelProto:
    """MultiHeadAttention on x [2, len, 64]; with `tie`, an Add broadcasts x against a tensor the
    graph shapes like y [2, seq, 64] (Shape -> ConstantOfShape), which ties len to seq."""
    nodes = [helper.make_node("MultiHeadAttention", ["x", "x", "x"], ["out"], name="attn", domain=MS, num_heads=4)]
    if tie:
        nodes += [helper.make_node("Shape", ["y"], ["shape"], name="shape"),
                  helper.make_node("ConstantOfShape", ["shape"], ["zeros"], name="zeros",
                                   value=helper.make_tensor("v", FP16, [1], [0])),
                  helper.make_node("Add", ["x", "zeros"], ["sum"], name="tie")]
    inputs = [helper.make_tensor_value_info("x", FP16, [2, "len", 64]),
              helper.make_tensor_value_info("y", FP16, [2, "seq", 64])]
    outputs = [helper.make_tensor_value_info("out", FP16, None)] + (
        [helper.make_tensor_value_info("sum", FP16, None)] if tie else [])
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=OPSETS)


def test_a_symbol_the_graph_ties_to_a_given_one_is_derived(tmp_path):
    result = run(save(_broadcast_model(tie=True), tmp_path), "--dim", "seq=8")
    assert result.exit_code == EXIT_OK
    assert derived(result.json) == [("len", 8, "equal", "8")]
    assert "node tie (Add) requires it equal to a dimension of 8" in result.json["derived"][0]["reason"]
    assert result.json["nodes"][0]["estimate"]["problem"]["sequence_length"] == 8
    with pytest.raises(UsageError, match=r"--dim len=9 contradicts the model: node tie \(Add\) requires the "
                                         r"dimensions 8 and 9 equal \(or 1\)"):
        run(save(_broadcast_model(tie=True), tmp_path), "--dim", "seq=8", "--dim", "len=9")
    with pytest.raises(UsageError, match=r"^--dim seq=8 changes nothing"):  # len = 1 broadcasts: no contradiction,
        run(save(_broadcast_model(tie=True), tmp_path), "--dim", "seq=8", "--dim", "len=1")  # and seq reaches nothing
    untied = save(_broadcast_model(tie=False), tmp_path)
    with pytest.raises(UsageError, match=r"^--dim seq=8 changes nothing"):  # without the tie, seq reaches nothing
        run(untied, "--dim", "seq=8")
    result = run(untied)
    assert result.exit_code == EXIT_REJECTED and [m["name"] for m in result.json["missing"]] == ["len"]
    assert result.json["missing"][0]["where"] == "the sequence length S of MultiHeadAttention node attn, input 0 " \
                                                "(query) axis 1"


# -- exactness: a derived maximum is never exact -------------------------------------------------------

def test_a_derived_token_maximum_stays_a_range_where_b_and_s_are_static():
    model = packed_encoder(EncoderSpec(**SMALL))
    for info in model.graph.input:
        if info.name == "token_offset":
            info.CopyFrom(helper.make_tensor_value_info("token_offset", TensorProto.INT32, [B, S]))
    bounds = ShapeBounds()
    report = with_exact_dims(model, analyze_model(model, bounds), bounds)
    target = node_target(report.nodes[0])
    assert (str(target.batch), str(target.seq), str(target.tokens)) == (str(B), str(S), f"1..{B * S}")
    assert {"batch", "seq"} <= report.nodes[0].exact and "tokens" not in report.nodes[0].exact


# -- planted bugs: a wrong derivation is caught by the spec's builders -----------------------------------

@pytest.mark.parametrize("name,wrong,message", [
    ("cumulative_length", lambda batch: batch, "cumulative_sequence_length.shape[0] = 4 must equal B + 1 = 5"),
    ("token_maximum", lambda batch, seq: batch * seq + 1, "token count T = 33 exceeds B * S = 32"),
], ids=["batch_plus_1 as batch", "T over B * S"])
def test_a_planted_wrong_derivation_is_caught(name, wrong, message, monkeypatch, encoder):
    honest = run(encoder, "--dim", f"batch={B}", "--dim", f"seq={S}")
    assert honest.exit_code == EXIT_OK
    monkeypatch.setattr(derive, name, wrong)
    planted = run(encoder, "--dim", f"batch={B}", "--dim", f"seq={S}")
    assert planted.exit_code == EXIT_REJECTED and not planted.json["complete"]
    first = planted.json["nodes"][0]["estimate"]
    assert first["status"] == "invalid_argument" and message in first["message"]


def test_a_planted_wrong_reverse_derivation_is_caught_as_ours(monkeypatch, encoder):
    """B derived from batch_plus_1 wrongly: the consistency check blames attnws, not the user's --dim."""
    monkeypatch.setattr(derive, "batch_of_cumulative", lambda length: length)
    with pytest.raises(InternalError, match=r"the derived batch = 5 contradicts the model: PackedMultiHeadAttention "
                                            r"node attention_0 takes token_offset \[B, S\] = \[5, 8\]"):
        run(encoder, "--dim", f"batch_plus_1={B + 1}", "--dim", f"seq={S}")


def test_derivation_does_not_change_a_fully_given_report():
    model = packed_encoder(EncoderSpec(**SMALL))
    full = shape_bounds(["token_count=32", "batch=4", "seq=8", "batch_plus_1=5"], None)
    derived_report = analyze_model(model, shape_bounds(["batch=4", "seq=8"], None))
    given_report = analyze_model(model, full)
    assert [n.estimate for n in derived_report.nodes] == [n.estimate for n in given_report.nodes]
    assert given_report.derived == () and given_report.missing == ()
