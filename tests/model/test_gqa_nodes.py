"""`attnws model` on GroupQueryAttention nodes: the family's reader (`attnws.model.readers.gqa`)
through the shared pipeline, like every other operator's.

The decoder below is laid out as onnxruntime-genai exports one: one GroupQueryAttention per layer,
query / key / value from MatMuls of the hidden state, past_key_values.N.key / value graph inputs
[batch_size, kv_heads, past_sequence_length, head_size], seqlens_k [batch_size] and the scalar
total_sequence_length as int32 graph inputs, present.N.key / value outputs. The expected numbers
are computed here through the spec's own builder and ORT's estimator (`attnws.spec.gqa`) from the
shapes the test itself gives (the schema against ORT 1.31.1's own registry: test_schema_types.py).
The solver's numbers (`--policy tight`, `--pattern`, `--prove`: the shared theorems and
`solver.tight`) are checked against the spec's own runtime over the node's box.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import attnws.model.functions as functions_module
import attnws.model.readers.gqa as gqa_reader
from attnws.model import BadModel, ShapeBounds, analyze_model
from attnws.model.report import Unstated, node_target, with_exact_dims
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.spec.commands import estimate_json
from attnws.spec.estimate import estimate_exact, estimate_geometry
from attnws.spec.gqa.builder import build_gqa_problem
from attnws.spec.gqa.estimate import aggregate_for_bounds, ort_bounds, ort_estimate
from attnws.spec.gqa.problem import KvQuantization
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op
from attnws.spec.target import DimRange
from attnws.spec.units import format_bytes

from tests.cli.helpers import REPR_MARKS, attnws

from .builders import FP16, OPSETS, run, save

GQA = "GroupQueryAttention"
N, NK, H = 4, 2, 64
HIDDEN = 8  # the model's hidden state: q/k/v project it to N * H and Nk * H (small weights, a small file)
BOUNDS = {"batch_size": 2, "sequence_length": 8, "past_sequence_length": 32}
B, S, P = BOUNDS["batch_size"], BOUNDS["sequence_length"], BOUNDS["past_sequence_length"]
NODE_NAMES = [f"/model/layers.{i}/attn/GroupQueryAttention" for i in range(2)]
PATHS = [f"main{name}" for name in NODE_NAMES]  # a scoped name brings its own "/"
COMMITTED = Path(__file__).parents[1] / "data" / "gqa_decoder.onnx"  # decoder(), the README's example


def decoder(layers: int = 2, kv_num_heads: int = NK, past: bool = True, head_sink: str | None = None,
            **attrs: Any) -> onnx.ModelProto:
    """A genai-style decoder of `layers` layers, each MatMul q/k/v -> GroupQueryAttention -> o_proj -> residual
    (with `head_sink` "initializer", a constant head sink [N] per layer, which ORT prepacks; "input", a graph
    input per layer, which XQA converts at every run)."""
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
        sink = []
        if head_sink == "initializer":
            weights.append(numpy_helper.from_array(np.zeros(N, np.float16), f"layers.{i}.sink"))
        elif head_sink == "input":
            inputs.append(helper.make_tensor_value_info(f"layers.{i}.sink", FP16, [N]))
        if head_sink:
            sink = ["", "", "", "", f"layers.{i}.sink"]  # cos, sin, position_ids, attention_bias, head_sink
        nodes.append(helper.make_node(
            GQA, [f"/layers.{i}/{w}" for w in "qkv"] + pasts + ["seqlens_k", "total_sequence_length"] + sink,
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
    assert [n.name for n in report.nodes] == NODE_NAMES
    want = expected_bytes(max_total, past=past)
    for i, n in enumerate(report.nodes):
        assert n.op_type == GQA and n.attributes == {"num_heads": N, "kv_num_heads": NK}
        assert n.inputs[3:5] == (f"past_key_values.{i}.key", f"past_key_values.{i}.value")
        assert n.hints[:7] == ((B, S, N * H), (B, S, NK * H), (B, S, NK * H), (B, NK, past, H), (B, NK, past, H), (B,),
                               ())
        est = n.estimate
        assert est.ok and est.op is Op.GQA and est.total_workspace_bytes == want
        assert est.problem.past_sequence_length == past and est.requirements()[0].size_bytes == want
    assert report.complete and report.sum_total_bytes == 2 * want and report.peak_total_bytes == want


# -- the nodes, their estimates --------------------------------------------------------------------------

@pytest.mark.parametrize("max_total", [P, 2 * P])
def test_every_layer_is_read_by_position_and_sized_by_ort_s_estimator(max_total):
    report = analyze_model(decoder(), ShapeBounds(BOUNDS), max_total_sequence_length=max_total)
    check_report(report, max_total)


@pytest.mark.parametrize("config", [RuntimeConfig(), RuntimeConfig.make(sm=90)], ids=["sm80", "sm90 (cuDNN)"])
def test_a_node_s_estimate_is_the_spec_s_for_its_target_s_maxima(config):
    """The reader's estimate of a node (its own problem, the session's option) says what the
    shared `estimate_geometry` says of the node's target at its maxima: the same routes, verdicts,
    bytes, note and error, ok or not (the problem's T apart: the node is read at its first prompt)."""
    n = _node(config=config)
    target = node_target(replace(n, estimate=replace(n.estimate, status="ok")) if not n.estimate.ok else n)
    ours, spec = (estimate_json(e) for e in (n.estimate, estimate_geometry(target.max_geometry(), config)))
    if not n.estimate.ok:  # the report's advice on the setting that makes ORT's estimate sizable
        assert ours["message"].endswith(gqa_reader._CUDNN_ADVICE)
        ours["message"] = ours["message"][:-len(gqa_reader._CUDNN_ADVICE)]
    assert {k: v for k, v in ours.items() if k != "problem"} == {k: v for k, v in spec.items() if k != "problem"}
    assert {**ours["problem"], "total_sequence_length": None} == {**spec["problem"], "total_sequence_length": None}


def test_the_option_beyond_the_cache_raises_the_estimate_and_below_it_changes_nothing():
    """ORT's bound is max(option, P): ORT's own test (NonWindowedRequiresExplicitTotalKvBound)."""
    sizes = [analyze_model(decoder(1), ShapeBounds(BOUNDS), max_total_sequence_length=m).nodes[0]
             .estimate.total_workspace_bytes for m in (P // 2, P, 8 * P)]
    assert sizes[0] == sizes[1] < sizes[2]


def test_on_sm90_prompts_reach_cudnn_and_ort_declares_nothing():
    config = RuntimeConfig.make(sm=90)
    (n, _) = analyze_model(decoder(), ShapeBounds(BOUNDS), config, max_total_sequence_length=P).nodes
    assert not n.estimate.ok and "cuDNN" in n.estimate.message
    with pytest.raises(Exception, match="cuDNN"):
        ort_estimate(n.estimate.problem, config, P)


# -- nodes ORT cannot size, or refuses ----------------------------------------------------------------------

@pytest.mark.parametrize("model, max_total, words", [
    (decoder(), 0, "ep.cuda.gqa_workspace_max_total_sequence_length (unset); --max-total-seq N sets it"),
    (decoder(kv_num_heads=3), P, "num_heads % kv_num_heads == 0"),
    (decoder(past=False), P, "past_key (input 3) is absent"),
    (decoder(local_window_size=0), P, "local_window_size must be -1 or greater than 0"),
], ids=["option unset", "kv heads not dividing heads", "no past_key", "window 0"])
def test_a_node_ort_cannot_size_is_unavailable_with_its_reason(model, max_total, words):
    report = analyze_model(model, ShapeBounds(BOUNDS), max_total_sequence_length=max_total)
    assert not report.complete and all(not n.estimate.ok and words in n.estimate.message for n in report.nodes)


def test_a_node_with_output_qk_is_not_modelled():
    model = decoder(1)
    gqa = next(n for n in model.graph.node if n.op_type == GQA)
    gqa.output.append("qk")
    (n,) = analyze_model(model, ShapeBounds(BOUNDS), max_total_sequence_length=P).nodes
    assert n.estimate.error == "unsupported" and "output_qk 'qk') is present" in n.estimate.message


def test_a_node_onnx_runtime_refuses_to_load_is_a_bad_model(tmp_path):
    model = decoder(1)
    gqa = next(n for n in model.graph.node if n.op_type == GQA)
    gqa.input[5] = ""  # seqlens_k is required
    with pytest.raises(BadModel, match=r"required input 5 \(seqlens_k\) is missing"):
        analyze_model(model, ShapeBounds(BOUNDS), max_total_sequence_length=P)
    run_ = attnws("model", save(model, tmp_path), *dims(), "--max-total-seq", str(P))
    assert run_.code == EXIT_REJECTED and "seqlens_k" in run_.err + run_.out and "Traceback" not in run_.err


def test_a_missing_bound_is_named():
    report = analyze_model(decoder(), ShapeBounds({k: v for k, v in BOUNDS.items() if k != "past_sequence_length"}),
                           max_total_sequence_length=P)
    assert all("--dim past_sequence_length=MAX" in n.estimate.message for n in report.nodes)
    assert [m.name for m in report.missing] == ["past_sequence_length"]
    assert "the cache capacity P of GroupQueryAttention node" in report.missing[0].where


# -- the command line ----------------------------------------------------------------------------------------

def test_the_text_leads_with_the_reservation_and_shows_each_layer_once(tmp_path):
    run_ = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", str(P))
    want = expected_bytes(P)
    assert run_.code == EXIT_OK
    assert run_.out.startswith(f"reserve {want:,} B for attention workspace")
    assert "(x2, identical)" in run_.out and "past_key [2, 2, 32, 64]" in run_.out and "absent: output_qk" in run_.out
    assert f"  total workspace      {format_bytes(want)}" in run_.out and "flash_fast_decode" in run_.out
    assert "  ORT's bound  " in run_.out  # ORT estimates GroupQueryAttention: no attnws-own Level-1 bound
    assert not any(mark in run_.out for mark in REPR_MARKS)
    unset = attnws("model", save(decoder(), tmp_path), *dims())
    assert unset.code == EXIT_REJECTED and "no safe reservation" in unset.out and "--max-total-seq N" in unset.out


def test_the_json_lists_every_node_with_its_estimate_and_level_2(tmp_path):
    doc = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", str(P), "--json").json()
    want = expected_bytes(P)
    assert doc["node_count"] == doc["sized_count"] == 2 and doc["status"] == "ok"
    assert doc["sum_total_bytes"] == 2 * want and doc["totals"]["ort"] == {"peak": want, "sum": 2 * want}
    assert doc["groups"] == [{"count": 2, "nodes": [0, 1], "op_type": GQA, "status": "ok",
                              "total_workspace_bytes": want}]
    for name, node in zip(NODE_NAMES, doc["nodes"]):
        assert node["name"] == name and node["input_shapes"][3] == [B, NK, P, H] and node["input_shapes"][6] == []
        assert node["output_names"] == [node["output_names"][0], *node["output_names"][1:3], None]
        assert node["session_options"] == {"max_total_sequence_length": P, "cache_layout": "shared"}
        est = node["estimate"]
        assert est["op"] == "gqa" and est["problem"]["past_sequence_length"] == P
        assert est["total_workspace_bytes"] == want == max(r["sized_bytes"] or 0 for r in est["routes"])
        assert est["requirements"] == [{"size_bytes": want, "slot_id": 0, "alignment_bytes": 256}]


# -- the solver: the shared theorems and tight policy on each node's target ------------------------------------

SMALL = {"batch_size": 2, "sequence_length": 4, "past_sequence_length": 16}


def runtime(past: int = SMALL["past_sequence_length"], **dims: int) -> int:
    """The spec's runtime workspace of one GroupQueryAttention shape of the decoder, its cache of
    `past` rows (0 where it fails or does not run)."""
    est = estimate_exact(Geometry(op=Op.GQA, element_size=2, heads=N, head_size=H, kv_heads=NK, past=past,
                                  max_total_seq=past, **dims))
    return est.total_workspace_bytes if est.ok else 0


def box_maximum(batches: range, seqs: range, past: int = SMALL["past_sequence_length"]) -> int:
    """The largest runtime workspace over B, S and every key length T of the node's box."""
    return max(runtime(past, batch=b, seq=s, total_seq=t) for b, s in itertools.product(batches, seqs)
               for t in range(s, past + 1))


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """`model --prove --policy tight` with decode, a pattern narrowing the batch and one naming the
    cache's capacity, on the small decoder (one run, shared by the tests below)."""
    path = save(decoder(), tmp_path_factory.mktemp("gqa"))
    return run(path, *dims(SMALL), "--max-total-seq", "16", "--prove", "--policy", "tight", "--pattern",
               "decode:seq=1", "--pattern", "one:batch=1", "--pattern", "cache:past=0")


def test_tight_policy_is_the_proven_maximum_of_the_node_s_box(solved):
    doc = solved.json
    assert solved.exit_code == EXIT_OK and set(doc["checks"]) == set(PATHS)
    first, second = (doc["checks"][path] for path in PATHS)
    assert second["shared_from"] == PATHS[0] and first["unprovable"] is None  # one run for both layers
    tight = first["tight"]
    assert tight["method"] == "proven maximum" and tight["verdict"] == "PROVED"
    whole = box_maximum(range(1, 3), range(1, 5))
    assert tight["tight_total_bytes"] == whole < tight["ort_total_bytes"] == doc["peak_total_bytes"]
    witness = tight["witness"]
    assert runtime(batch=witness["batch"], seq=witness["seq"], total_seq=witness["total_seq"]) == whole  # attained
    assert doc["totals"]["proven"] == {"peak": whole, "sum": 2 * whole}


def test_patterns_prove_decode_below_the_whole_maximum(solved):
    first = solved.json["checks"][PATHS[0]]["patterns"]
    decode, one = first["decode"], first["one"]
    assert decode["applies"] and decode["dims"] == {"seq": "1..1"} and decode["result"]["verdict"] == "PROVED"
    assert decode["result"]["details"]["witness"]["seq"] == 1
    assert decode["reserve_bytes"] == box_maximum(range(1, 3), range(1, 2))
    assert one["dims"] == {"batch": "1..1"} and one["reserve_bytes"] == box_maximum(range(1, 2), range(1, 5))
    cache = first["cache"]  # the capacity P is exact: a pattern on it lies outside the node's box
    whole = solved.json["checks"][PATHS[0]]["tight"]["tight_total_bytes"]
    assert not cache["applies"] and cache["reason"] == "past 0..0 is not inside the node's 16..16: the pattern misses the node's P"
    assert cache["reserve_bytes"] == whole and solved.json["totals"]["patterns"]["cache"]["peak"] == whole
    assert f"    decode  reserve {format_bytes(decode['reserve_bytes'])}" in solved.text


def test_prove_runs_the_shared_theorems_on_each_node(solved):
    proofs = solved.json["checks"][PATHS[0]]["proofs"]
    assert [(p["theorem"], p["verdict"]) for p in proofs] == [("safe_bound", "PROVED"), ("containment", "PROVED")]
    assert solved.json["verdict"] == "PROVED"
    assert "(x2, one target)" in solved.text and "PROVED   safe_bound" in solved.text


# -- the solver's target of a node (no Z3) ---------------------------------------------------------------------

def _node(max_total: int = P, model: onnx.ModelProto | None = None, config: RuntimeConfig = RuntimeConfig(),
          **attrs: Any) -> Any:
    """The one node of `model` (default: a one-layer decoder with `attrs`) read for the solver."""
    model = model or decoder(1, **attrs)
    bounds = ShapeBounds(BOUNDS)
    report = with_exact_dims(model, analyze_model(model, bounds, config, max_total_sequence_length=max_total), bounds)
    (n,) = report.nodes
    assert n.estimate.ok or config != RuntimeConfig(), n.estimate.message
    return n


def test_a_sized_node_s_target_is_the_shared_target_of_its_node():
    """N, H, Nk and P exact, B and S from 1, T up to the cache, the option as the session bound."""
    target = node_target(_node())
    assert target.op is Op.GQA and target.name == PATHS[0] and target.patterns == ()
    assert (target.batch, target.seq, target.total_seq) == (DimRange(1, B), DimRange(1, S), DimRange(1, P))
    assert (target.heads, target.head_size, target.kv_heads, target.past) == tuple(DimRange(v, v) for v in (N, H, NK, P))
    assert target.max_total_seq == P and target.window is None and target.kv_quant is None and not target.bf16


def test_a_windowed_cache_s_keys_range_up_to_the_option_beyond_the_cache():
    target = node_target(_node(4 * P, local_window_size=P, sliding_window_cache=1))
    assert target.window == P and target.sliding_window_cache and target.total_seq == DimRange(1, 4 * P)


def _per_channel(n: Any) -> Any:
    problem = replace(n.estimate.problem, k_quantization=KvQuantization.PER_CHANNEL,
                      v_quantization=KvQuantization.PER_CHANNEL, kv_cache_bit_width=8, cache_element_size=1)
    return replace(n, estimate=replace(n.estimate, problem=problem))


def _attention_bias(n: Any) -> Any:
    return replace(n, estimate=replace(n.estimate, problem=replace(n.estimate.problem, has_attention_bias=True)))


@pytest.mark.parametrize("change, words", [
    (_per_channel, "the solver's box has per-tensor cache scales only"),
    (_attention_bias, "the solver's box cannot state the node's has_attention_bias"),
], ids=["per-channel scales", "attention bias"])
def test_a_node_the_target_cannot_state_raises_unstated_with_why(change, words):
    with pytest.raises(Unstated, match=words):
        node_target(change(_node()))


@pytest.mark.parametrize("kind", ["initializer", "input"])
def test_a_head_sink_s_kind_reaches_the_solver_s_target(kind):
    """A constant head sink is prepacked (ORT reports the prepack), a graph input is converted into
    XQA's scratch at every run (align256(4 N) bytes more): the node's target states which, so its
    estimate is the node's own to the byte."""
    n = _node(head_sink=kind)
    target = node_target(n)
    assert target.head_sink == kind
    at_target = estimate_geometry(target.max_geometry(), target.config)
    assert at_target.total_workspace_bytes == n.estimate.total_workspace_bytes
    assert at_target.persistent_prepack_bytes == n.estimate.persistent_prepack_bytes == (4 * N if kind == "initializer" else 0)


def test_an_input_head_sink_costs_its_conversion():
    converted, prepacked = (estimate_json(_node(head_sink=kind).estimate) for kind in ("input", "initializer"))
    xqa = [next(r["sized_bytes"] for r in est["routes"] if r["backend"] == "xqa") for est in (converted, prepacked)]
    assert xqa[0] - xqa[1] == 256  # align256(4 * N)


def test_a_head_sink_node_is_proven_like_any_other(tmp_path):
    result = run(save(decoder(head_sink="initializer"), tmp_path), *dims(), "--max-total-seq", str(P), "--pattern",
                 "decode:seq=1")
    check = result.json["checks"][PATHS[0]]
    assert check["unprovable"] is None and check["tight"]["verdict"] == "PROVED"
    assert result.exit_code == EXIT_OK and "(x2, identical)" in result.text


def test_the_plot_draws_a_node_like_every_other(tmp_path):
    """--plot draws GroupQueryAttention's nodes through the shared target: ORT's estimate, the
    tight policy and the proven maximum of the node's box."""
    tiny = {"batch_size": 1, "sequence_length": 2, "past_sequence_length": 8}
    run_ = attnws("model", save(decoder(1), tmp_path), *dims(tiny), "--max-total-seq", "8", "--plot",
                  str(tmp_path / "plot.png"), "--json")
    doc = run_.json()
    (bars,) = doc["plot_nodes"]
    whole = box_maximum(range(1, 2), range(1, 3), past=8)
    assert run_.code == EXIT_OK and bars["node"] == PATHS[0]
    assert bars["proven_max_bytes"] == bars["tight_bound_bytes"] == whole
    assert bars["ort_estimate_bytes"] == doc["nodes"][0]["estimate"]["total_workspace_bytes"] > whole
    assert (tmp_path / "plot.png").stat().st_size > 0 and "plot_leaves_out" not in doc


def _with_attention_bias(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with an attention_bias [B, 1, S, T] graph input on every GroupQueryAttention node."""
    model.graph.input.append(helper.make_tensor_value_info(
        "attention_bias", FP16, ["batch_size", 1, "sequence_length", "total_sequence_length"]))
    for node in model.graph.node:
        if node.op_type == "GroupQueryAttention":
            names = list(node.input) + [""] * (11 - len(node.input))
            names[10] = "attention_bias"
            del node.input[:]
            node.input.extend(names)
    return model


def test_the_plot_refuses_a_node_its_target_cannot_state_by_name(tmp_path):
    """An attention bias, which the solver's box has no field for (a QK-norm node it states:
    Qwen3's, as onnxruntime-genai's builder writes it, is proven in test_genai_models)."""
    path = tmp_path / "biased.onnx"
    onnx.save(_with_attention_bias(decoder()), path)
    run_ = attnws("model", str(path), *dims(), "--dim", "total_sequence_length=8", "--max-total-seq", str(P),
                  "--plot", str(tmp_path / "plot.png"))
    assert run_.code == EXIT_REJECTED and "Traceback" not in run_.err
    assert ("the solver's target cannot state it (the solver's box cannot state the node's has_attention_bias; --plot "
            "draws every sized node's proven bounds") in run_.err + run_.out


def test_the_committed_decoder_is_this_builder_s():
    """tests/data/gqa_decoder.onnx (the README's example) is `decoder()`; rewrite it with
    `onnx.save(decoder(), COMMITTED)` when the builder changes."""
    assert onnx.load(COMMITTED).SerializeToString() == decoder().SerializeToString()
    run_ = attnws("model", str(COMMITTED), *dims(), "--max-total-seq", str(P))
    assert run_.code == EXIT_OK and run_.out.startswith(f"reserve {expected_bytes(P):,} B")


# -- a planted bug the checks catch ---------------------------------------------------------------------------

def _capacity_read_as_s(monkeypatch):
    """The adapter reads the cache capacity from S instead of past_key's dimension 2."""
    real = gqa_reader.ort_estimate
    monkeypatch.setattr(gqa_reader, "ort_estimate",
                        lambda p, *a: real(replace(p, past_sequence_length=p.sequence_length), *a))


def _last_layer_dropped(monkeypatch):
    real = functions_module.is_attention
    monkeypatch.setattr(functions_module, "is_attention", lambda node: real(node) and node.name != NODE_NAMES[-1])


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
