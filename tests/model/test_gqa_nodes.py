"""`attnws model` on GroupQueryAttention nodes, the path of a reader declared in progress (`attnws.model.in_progress`).

The decoder below is laid out as onnxruntime-genai exports one: one GroupQueryAttention per layer,
query / key / value from MatMuls of the hidden state, past_key_values.N.key / value graph inputs
[batch_size, kv_heads, past_sequence_length, head_size], seqlens_k [batch_size] and the scalar
total_sequence_length as int32 graph inputs, present.N.key / value outputs. The expected numbers
are computed here through the spec's own builder and ORT's estimator (`attnws.spec.gqa`) from the
shapes the test itself gives, and the schema against ORT 1.31.1's own registry (the CPU wheel).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import attnws.model.in_progress as in_progress
from attnws.model import BadModel, ShapeBounds, analyze_model
from attnws.model.in_progress import in_progress_target
from attnws.model.registry import in_progress_reader
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.spec.gqa.builder import build_gqa_problem
from attnws.spec.gqa.estimate import aggregate_for_bounds, ort_bounds, ort_estimate
from attnws.spec.gqa.problem import KvQuantization
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op
from attnws.spec.target import DimRange, Pattern

from tests.cli.helpers import REPR_MARKS, attnws

from .builders import FP16, OPSETS, save

GQA = "GroupQueryAttention"
N, NK, H = 4, 2, 64
HIDDEN = 8  # the model's hidden state: q/k/v project it to N * H and Nk * H (small weights, a small file)
BOUNDS = {"batch_size": 2, "sequence_length": 8, "past_sequence_length": 32}
B, S, P = BOUNDS["batch_size"], BOUNDS["sequence_length"], BOUNDS["past_sequence_length"]
NODE_NAMES = [f"/model/layers.{i}/attn/GroupQueryAttention" for i in range(2)]
COMMITTED = Path(__file__).parents[1] / "data" / "gqa_decoder.onnx"  # decoder(), the README's example


def decoder(layers: int = 2, kv_num_heads: int = NK, past: bool = True, **attrs: Any) -> onnx.ModelProto:
    """A genai-style decoder of `layers` layers, each MatMul q/k/v -> GroupQueryAttention -> o_proj -> residual."""
    inputs = [helper.make_tensor_value_info("hidden_states", FP16, ["batch_size", "sequence_length", HIDDEN]),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch_size"]),
              helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    outputs, nodes, weights, h = [], [], [], "hidden_states"
    for i in range(layers):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", FP16,
                                                        ["batch_size", NK, "past_sequence_length", H]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", FP16,
                                                         ["batch_size", NK, "total_sequence_length", H]))
        for w, shape in (("q", (HIDDEN, N * H)), ("k", (HIDDEN, NK * H)), ("v", (HIDDEN, NK * H)), ("o", (N * H, HIDDEN))):
            weights.append(numpy_helper.from_array(np.zeros(shape, np.float16), f"layers.{i}.{w}_proj.weight"))
        for w in "qkv":
            nodes.append(helper.make_node("MatMul", [h, f"layers.{i}.{w}_proj.weight"], [f"/layers.{i}/{w}"]))
        pasts = [f"past_key_values.{i}.key", f"past_key_values.{i}.value"] if past else ["", ""]
        nodes.append(helper.make_node(
            GQA, [f"/layers.{i}/{w}" for w in "qkv"] + pasts + ["seqlens_k", "total_sequence_length"],
            [f"/layers.{i}/attn", f"present.{i}.key", f"present.{i}.value"], name=NODE_NAMES[i],
            domain="com.microsoft", num_heads=N, kv_num_heads=kv_num_heads, **attrs))
        nodes.append(helper.make_node("MatMul", [f"/layers.{i}/attn", f"layers.{i}.o_proj.weight"], [f"/layers.{i}/o"]))
        nodes.append(helper.make_node("Add", [h, f"/layers.{i}/o"], [f"/layers.{i}/residual"]))
        h = f"/layers.{i}/residual"
    nodes.append(helper.make_node("Identity", [h], ["logits"]))
    outputs.insert(0, helper.make_tensor_value_info("logits", FP16, ["batch_size", "sequence_length", HIDDEN]))
    return helper.make_model(helper.make_graph(nodes, "decoder", inputs, outputs, weights), opset_imports=OPSETS)


def dims(bounds: dict[str, int] = BOUNDS) -> list[str]:
    return [arg for name, value in bounds.items() for arg in ("--dim", f"{name}={value}")]


def expected_bytes(max_total: int, config: RuntimeConfig = RuntimeConfig(), past: int = P) -> int:
    """ORT's estimate for the test's own shapes, through the spec alone (the first prompt at S)."""
    p = build_gqa_problem([B, S, N * H], [B, S, NK * H], [B, S, NK * H], [B, NK, past, H], [B, NK, past, H], [B],
                          S, num_heads=N, kv_num_heads=NK)
    return aggregate_for_bounds(ort_bounds(p, config, max_total)).total_workspace_bytes


def check_report(report: Any, max_total: int, past: int = P) -> None:
    """Every layer's node found, read by position at the bounds (the cache `past`), with ORT's
    estimate for its shapes."""
    assert [n.name for n in report.in_progress] == NODE_NAMES and report.nodes == ()
    want = expected_bytes(max_total, past=past)
    for i, n in enumerate(report.in_progress):
        assert n.op_type == GQA and n.attributes == {"num_heads": N, "kv_num_heads": NK}
        assert n.inputs[3:5] == (f"past_key_values.{i}.key", f"past_key_values.{i}.value")
        assert n.hints[:7] == ((B, S, N * H), (B, S, NK * H), (B, S, NK * H), (B, NK, past, H), (B, NK, past, H), (B,),
                               ())
        assert n.ok and n.total_workspace_bytes == want and n.problem.past_sequence_length == past
    assert report.complete and report.sum_total_bytes == 2 * want and report.peak_total_bytes == want


# -- the schema ---------------------------------------------------------------------------------------

def test_the_reader_s_schema_is_ort_s_own():
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    (schema,) = [s for s in get_all_operator_schema() if s.name == GQA and s.domain == "com.microsoft"]
    reader = in_progress_reader(GQA)
    assert reader.input_names == tuple(i.name for i in schema.inputs)
    assert reader.output_names == tuple(o.name for o in schema.outputs)
    assert set(reader.attribute_types) == set(schema.attributes)
    assert {a for a, s in schema.attributes.items() if s.required} == {"num_heads", "kv_num_heads"}
    single = {i for i, p in enumerate(schema.inputs) if p.option.name == "Single"}
    assert set(reader.required_inputs) == single
    assert {i for i, p in enumerate(schema.inputs) if p.typeStr == "M"} == set(reader.index_inputs)
    types = {t.type_param_str: t.allowed_type_strs for t in schema.type_constraints}
    assert {f"tensor({t})" for t in reader.element_types} == set(types["T"])
    assert {i for i, p in enumerate(schema.inputs) if p.typeStr not in ("T", "M")} == set(reader.own_type_inputs)


# -- the nodes, their estimates --------------------------------------------------------------------------

@pytest.mark.parametrize("max_total", [P, 2 * P])
def test_every_layer_is_read_by_position_and_sized_by_ort_s_estimator(max_total):
    report = analyze_model(decoder(), ShapeBounds(BOUNDS), max_total_sequence_length=max_total)
    check_report(report, max_total)


def test_the_option_beyond_the_cache_raises_the_estimate_and_below_it_changes_nothing():
    """ORT's bound is max(option, P): ORT's own test (NonWindowedRequiresExplicitTotalKvBound)."""
    sizes = [analyze_model(decoder(1), ShapeBounds(BOUNDS), max_total_sequence_length=m).in_progress[0]
             .total_workspace_bytes for m in (P // 2, P, 8 * P)]
    assert sizes[0] == sizes[1] < sizes[2]


def test_on_sm90_prompts_reach_cudnn_and_ort_declares_nothing():
    config = RuntimeConfig.make(sm=90)
    (n, _) = analyze_model(decoder(), ShapeBounds(BOUNDS), config, max_total_sequence_length=P).in_progress
    assert not n.ok and "cuDNN" in n.message
    with pytest.raises(Exception, match="cuDNN"):
        ort_estimate(n.problem, config, P)


# -- nodes ORT cannot size, or refuses ----------------------------------------------------------------------

@pytest.mark.parametrize("model, max_total, words", [
    (decoder(), 0, "ep.cuda.gqa_workspace_max_total_sequence_length (unset)"),
    (decoder(kv_num_heads=3), P, "num_heads % kv_num_heads == 0"),
    (decoder(past=False), P, "past_key (input 3) is absent"),
    (decoder(local_window_size=0), P, "local_window_size must be -1 or greater than 0"),
], ids=["option unset", "kv heads not dividing heads", "no past_key", "window 0"])
def test_a_node_ort_cannot_size_is_unavailable_with_its_reason(model, max_total, words):
    report = analyze_model(model, ShapeBounds(BOUNDS), max_total_sequence_length=max_total)
    assert not report.complete and all(not n.ok and words in n.message for n in report.in_progress)


def test_a_node_onnx_runtime_refuses_to_load_is_a_bad_model(tmp_path):
    model = decoder(1)
    gqa = next(n for n in model.graph.node if n.op_type == GQA)
    gqa.input[5] = ""  # seqlens_k is required
    with pytest.raises(BadModel, match=r"required input 5 \(seqlens_k\) is missing"):
        analyze_model(model, ShapeBounds(BOUNDS), max_total_sequence_length=P)
    run = attnws("model", save(model, tmp_path), *dims(), "--max-total-seq", str(P))
    assert run.code == EXIT_REJECTED and "seqlens_k" in run.err + run.out and "Traceback" not in run.err


def test_a_missing_bound_is_named():
    report = analyze_model(decoder(), ShapeBounds({k: v for k, v in BOUNDS.items() if k != "past_sequence_length"}),
                           max_total_sequence_length=P)
    assert all("--dim past_sequence_length=MAX" in n.message for n in report.in_progress)


# -- the command line ----------------------------------------------------------------------------------------

def test_the_text_leads_with_the_reservation_and_shows_each_layer_once(tmp_path):
    run = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", str(P))
    want = expected_bytes(P)
    assert run.code == EXIT_OK
    assert run.out.startswith(f"reserve {want:,} B for attention workspace")
    assert "(x2, identical)" in run.out and "past_key [2, 2, 32, 64]" in run.out and "absent: output_qk" in run.out
    assert f"ORT's estimate: {want:,} B (Level 2: one slot-0 root" in run.out
    assert not any(mark in run.out for mark in REPR_MARKS)
    unset = attnws("model", save(decoder(), tmp_path), *dims())
    assert unset.code == EXIT_REJECTED and "no safe reservation" in unset.out and "--max-total-seq N" in unset.out


def test_the_json_lists_every_node_with_its_estimate_and_level_2(tmp_path):
    doc = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", str(P), "--json").json()
    want = expected_bytes(P)
    assert doc["node_count"] == doc["sized_count"] == 2 and doc["status"] == "ok" and doc["nodes"] == []
    assert doc["sum_total_bytes"] == 2 * want and doc["totals"]["ort"] == {"peak": want, "sum": 2 * want}
    for name, node in zip(NODE_NAMES, doc["in_progress_nodes"]):
        assert node["name"] == name and node["input_shapes"][3] == [B, NK, P, H] and node["input_shapes"][6] == []
        assert node["output_names"] == [node["output_names"][0], *node["output_names"][1:3], None]
        est = node["estimate"]
        assert est["total_workspace_bytes"] == want == max(est["routes"].values())
        assert est["requirements"] == [{"size_bytes": want, "slot_id": 0, "alignment_bytes": 256}]
        assert est["cache_capacity"] == P and est["max_total_sequence_length"] == P


def test_patterns_prove_decode_and_prefill_below_ort_s_estimate(tmp_path):
    small = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 16}
    run = attnws("model", save(decoder(), tmp_path), *dims(small), "--max-total-seq", "16", "--pattern", "one:batch=1",
                 "--pattern", "cache:past=0", "--json")
    doc = run.json()
    assert run.code == EXIT_OK
    checks = doc["in_progress_checks"]
    assert set(checks) == {f"main/{n}" for n in NODE_NAMES}
    first = checks[f"main/{NODE_NAMES[0]}"]
    assert checks[f"main/{NODE_NAMES[1]}"]["shared_from"] == f"main/{NODE_NAMES[0]}"  # one run for both layers
    maxima = {m["pattern"]: m for m in first["results"]["maxima"]}
    assert set(maxima) == {"every shape", "decode", "prefill", "one"}
    assert maxima["decode"]["witness"]["seq"] == 1 and maxima["prefill"]["witness"]["seq"] >= 2
    ort = doc["in_progress_nodes"][0]["estimate"]["total_workspace_bytes"]
    assert all(m["bytes"] <= maxima["every shape"]["bytes"] <= ort for m in maxima.values())
    assert first["not_applied"] == {"cache": "the node's box has no past (it ranges batch, seq and total_seq)"}
    assert doc["totals"]["proven"]["sum"] == 2 * maxima["every shape"]["bytes"]
    assert doc["totals"]["patterns"]["cache"] == doc["totals"]["proven"]


# -- the solver's target of a node (no Z3: `in_progress_target`) ---------------------------------------------

def _node(max_total: int = P, **attrs: Any) -> Any:
    (n,) = analyze_model(decoder(1, **attrs), ShapeBounds(BOUNDS), max_total_sequence_length=max_total).in_progress
    assert n.ok, n.message
    return n


def test_a_sized_node_s_target_is_the_shared_target_of_its_node():
    """N, H, Nk and P exact, B and S from 1, T up to the cache, the option as the session bound,
    decode and prefill as patterns, and the user's patterns that narrow B or S, clipped."""
    user = (Pattern.parse("one:batch=1"), Pattern.parse("wide:batch=1..64"), Pattern.parse("cache:past=0"))
    target, reason, not_applied = in_progress_target(_node(), user)
    assert reason == "" and target.op is Op.GQA and target.name == f"main/{NODE_NAMES[0]}"
    assert (target.batch, target.seq, target.total_seq) == (DimRange(1, B), DimRange(1, S), DimRange(1, P))
    assert (target.heads, target.head_size, target.kv_heads, target.past) == tuple(DimRange(v, v) for v in (N, H, NK, P))
    assert target.max_total_seq == P and target.window is None and target.kv_quant is None and not target.bf16
    assert {p.name: dict(p.dims) for p in target.patterns} == {
        "decode": {"seq": DimRange(1, 1)}, "prefill": {"seq": DimRange(2, S)}, "one": {"batch": DimRange(1, 1)},
        "wide": {"batch": DimRange(1, B)}}
    assert dict(not_applied) == {"cache": "the node's box has no past (it ranges batch, seq and total_seq)"}


def test_a_windowed_cache_s_keys_range_up_to_the_option_beyond_the_cache():
    target, reason, _ = in_progress_target(_node(4 * P, local_window_size=P, sliding_window_cache=1), ())
    assert reason == "" and target.window == P and target.sliding_window_cache and target.total_seq == DimRange(1, 4 * P)


@pytest.mark.parametrize("change, words", [
    (dict(head_sink_prepacked=True), "the solver's box has no prepacked head sink"),
    (dict(problem=dict(k_quantization=KvQuantization.PER_CHANNEL, v_quantization=KvQuantization.PER_CHANNEL,
                       kv_cache_bit_width=8, cache_element_size=1)), "the solver's box has per-tensor cache scales only"),
    (dict(problem=dict(has_attention_bias=True)), "the solver's box cannot state the node's has_attention_bias"),
], ids=["prepacked head sink", "per-channel scales", "attention bias"])
def test_a_node_the_target_cannot_state_keeps_ort_s_bound_and_says_why(change, words):
    n = _node()
    n = replace(n, **{k: replace(n.problem, **v) if k == "problem" else v for k, v in change.items()})
    assert in_progress_target(n, ()) == (None, words, ())


def test_the_committed_decoder_is_this_builder_s():
    """tests/data/gqa_decoder.onnx (the README's example) is `decoder()`; rewrite it with
    `onnx.save(decoder(), COMMITTED)` when the builder changes."""
    assert onnx.load(COMMITTED).SerializeToString() == decoder().SerializeToString()
    run = attnws("model", str(COMMITTED), *dims(), "--max-total-seq", str(P))
    assert run.code == EXIT_OK and run.out.startswith(f"reserve {expected_bytes(P):,} B")


# -- a planted bug the checks catch ---------------------------------------------------------------------------

def _capacity_read_as_s(monkeypatch):
    """The adapter reads the cache capacity from S instead of past_key's dimension 2."""
    real = in_progress.ort_estimate
    monkeypatch.setattr(in_progress, "ort_estimate",
                        lambda p, *a: real(replace(p, past_sequence_length=p.sequence_length), *a))


def _last_layer_dropped(monkeypatch):
    real = in_progress.is_in_progress
    monkeypatch.setattr(in_progress, "is_in_progress", lambda node: real(node) and node.name != NODE_NAMES[-1])


LONG = 4096  # a cache long enough that the unfused route's S x T buffers outgrow XQA's scratch


@pytest.mark.parametrize("plant", [None, _capacity_read_as_s, _last_layer_dropped])
def test_a_planted_misreading_fails_the_checks(plant, monkeypatch):
    report = lambda: analyze_model(decoder(), ShapeBounds({**BOUNDS, "past_sequence_length": LONG}),
                                   max_total_sequence_length=1)
    if plant is None:  # the honest reading passes the same check
        check_report(report(), 1, LONG)
        return
    plant(monkeypatch)
    with pytest.raises(AssertionError):
        check_report(report(), 1, LONG)


def test_the_plot_says_it_leaves_the_nodes_out(tmp_path):
    """--plot draws the registered families' nodes only: a GroupQueryAttention node is named as
    left out, never counted as 0 B in silence."""
    run = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", str(P), "--plot",
                 str(tmp_path / "plot.png"), "--json")
    assert run.code == EXIT_OK and run.json()["plot_leaves_out"] == [f"main/{name}" for name in NODE_NAMES]
