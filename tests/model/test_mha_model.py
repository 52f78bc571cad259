"""`attnws model` on MultiHeadAttention models built by ONNX Runtime's own fusion tooling.

tests/data/mha_encoder_decoder.onnx and tests/data/mha_decoder.onnx are a tiny random Whisper
(d_model 16, 2 heads of 8) exported by ORT's Whisper wrappers and fused by ORT's optimizer; see
tools/make_mha_test_model.py (never run or imported here). Their value_info is ORT's own symbolic
shape inference, which the checks below read independently of attnws: every MultiHeadAttention
node of each file is reported, each input position shows the tensor and the shape ORT's view
gives it, and each estimate equals the specification's for those shapes. The planted-bug tests
show that the same checks fail when the model layer drops a node or misreads a position.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import attnws.model.functions as functions_module
import attnws.model.translate as translate
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.model import BadModel, ShapeBounds, analyze_model, load_model
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.estimate import estimate_exact, estimate_for_node
from attnws.spec.hints import MISSING, Geometry
from attnws.spec.mha.problem import MhaFormat
from attnws.spec.problem import Op
from attnws.spec.target import DimRange
from attnws.spec.commands import estimate_json

from tests.imports import imported_packages

from .builders import FP16, FP32, MS, OPSETS, run, save

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
ENCDEC, DECODER = DATA / "mha_encoder_decoder.onnx", DATA / "mha_decoder.onnx"
ENCDEC_BOUNDS = {"batch_size": 4, "sequence_length": 8}
DECODER_BOUNDS = {**ENCDEC_BOUNDS, "past_sequence_length": 24}
CASES = [(ENCDEC, ENCDEC_BOUNDS), (DECODER, DECODER_BOUNDS)]
MHA_INPUT_COUNT, MHA_OUTPUT_COUNT = 10, 4


def dim_args(bounds: dict[str, int]) -> list[str]:
    return [arg for name, value in bounds.items() for arg in ("--dim", f"{name}={value}")]


def report_of(path: Path, bounds: dict[str, int], *extra: str):
    return run(str(path), *dim_args(bounds), *extra)


# -- what the file says, read with onnx alone ------------------------------------------------------

def mha_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every com.microsoft MultiHeadAttention node of the graph and its subgraphs, in graph order."""
    out = []
    for node in graph.node:
        if node.op_type == "MultiHeadAttention" and node.domain == MS:
            out.append(node)
        for attr in node.attribute:
            subs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in subs:
                out += mha_nodes(sub)
    return out


def ort_shapes(model: onnx.ModelProto, bounds: dict[str, int]) -> dict[str, list[int]]:
    """Every tensor's shape as the file records it (ORT's symbolic inference, graph inputs and
    outputs, initializers), each symbolic dimension at its bound."""
    shapes = {t.name: list(t.dims) for t in model.graph.initializer}
    for info in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value if d.HasField("dim_value") else bounds.get(d.dim_param, -1) for d in dims]
    return shapes


def positional(names: Any, count: int) -> list[str | None]:
    names = list(names)
    return [names[i] if i < len(names) and names[i] else None for i in range(count)]


def check_report(doc: dict[str, Any], model: onnx.ModelProto, bounds: dict[str, int]) -> None:
    """Assert that the JSON report lists every MultiHeadAttention node of the model, in order, and
    that at every input position it read the node's tensor with ORT's shape for it."""
    nodes = mha_nodes(model.graph)
    reported = [n for n in doc["nodes"] if n["op_type"] == "MultiHeadAttention"]
    assert [n["name"] for n in reported] == [node.name for node in nodes]
    shapes = ort_shapes(model, bounds)
    for node, entry in zip(nodes, reported):
        names = positional(node.input, MHA_INPUT_COUNT)
        assert entry["input_names"] == names, node.name
        assert entry["input_shapes"] == [None if name is None else shapes[name] for name in names], node.name
        assert entry["output_names"] == positional(node.output, MHA_OUTPUT_COUNT), node.name


def expected_estimate(node: onnx.NodeProto, model: onnx.ModelProto, bounds: dict[str, int]):
    """The specification's estimate for the node at ORT's shapes (read without attnws.model)."""
    shapes = ort_shapes(model, bounds)
    hints = [MISSING if name is None else tuple(shapes[name]) for name in positional(node.input, MHA_INPUT_COUNT)]
    element = {i.name: i.type.tensor_type.elem_type for i in (*model.graph.input, *model.graph.value_info)}
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    outputs = positional(node.output, MHA_OUTPUT_COUNT)
    return estimate_for_node("MultiHeadAttention", element[node.input[0]], attributes, hints,
                             has_present=bool(outputs[1] and outputs[2]))


@pytest.fixture(scope="module")
def models():
    return {path: onnx.load(str(path)) for path, _ in CASES}


@pytest.fixture(scope="module")
def docs():
    return {path: report_of(path, bounds, "--json") for path, bounds in CASES}


# -- the committed models ----------------------------------------------------------------------------

def test_the_files_are_small_and_hold_ort_fused_attention(models):
    for path, model in models.items():
        assert path.stat().st_size < 2 * 1024 * 1024
        assert {op.domain: op.version for op in model.opset_import}[MS] == 1
    assert len(mha_nodes(models[ENCDEC].graph)) == 2  # the decoder's cross attention, both layers
    assert sum(n.op_type == "Attention" for n in models[ENCDEC].graph.node) == 3  # left to ORT's Attention
    assert len(mha_nodes(models[DECODER].graph)) == 4  # self and cross attention per layer


@pytest.mark.parametrize("path,bounds", CASES, ids=lambda v: getattr(v, "stem", ""))
def test_every_multihead_attention_node_is_reported_with_the_shapes_ort_sees(path, bounds, models, docs):
    result, model = docs[path], models[path]
    check_report(result.json, model, bounds)
    assert result.json["node_count"] == len(mha_nodes(model.graph))
    for entry in result.json["nodes"]:
        estimate = entry["estimate"]
        assert estimate["op"] == "mha" and estimate["status"] in ("ok", "unsupported")
        if estimate["status"] == "ok":
            assert estimate["classification"] == "safe_bound" and estimate["total_workspace_bytes"] > 0
            assert estimate["requirements"] == [{"size_bytes": estimate["total_workspace_bytes"], "slot_id": 0,
                                                 "alignment_bytes": 256}]
            assert any(r["reachable"] for r in estimate["routes"]) and estimate["note"]


@pytest.mark.parametrize("path,bounds", CASES, ids=lambda v: getattr(v, "stem", ""))
def test_each_estimate_is_the_specifications_for_ort_shapes(path, bounds, models, docs):
    nodes = {n["name"]: n for n in docs[path].json["nodes"]}
    for node in mha_nodes(models[path].graph):
        if node.output[3:4] and node.output[3]:
            continue  # output_qk: below
        assert nodes[node.name]["estimate"] == estimate_json(expected_estimate(node, models[path], bounds))


def test_encoder_decoder_cross_attention(docs):
    result = docs[ENCDEC]
    assert result.exit_code == EXIT_OK and result.json["complete"]
    for entry in result.json["nodes"]:
        p = entry["estimate"]["problem"]
        assert (p["qkv_format"], p["batch_size"], p["sequence_length"], p["kv_sequence_length"]) == \
            ("separate", 4, 8, 1500)
        assert (p["past_sequence_length"], p["has_present"], p["is_unidirectional"], p["has_bias"]) == \
            (0, True, False, True)
        assert entry["element_type"] == "float" and entry["output_names"][1].startswith("present_key_cross_")
    assert "flash" not in [r["backend"] for r in result.json["nodes"][0]["estimate"]["routes"] if r["reachable"]]


def test_decoder_self_attention_with_past_and_cross_attention(docs):
    nodes = {n["name"]: n for n in docs[DECODER].json["nodes"]}
    for name, layer in (("Attention_0", 0), ("Attention_2", 1)):
        p = nodes[name]["estimate"]["problem"]
        assert nodes[name]["input_names"][6:8] == [f"past_key_self_{layer}", f"past_value_self_{layer}"]
        assert (p["qkv_format"], p["past_sequence_length"], p["total_sequence_length"]) == ("separate", 24, 32)
        assert p["has_past"] and p["has_present"] and p["is_unidirectional"]
    cross = nodes["Attention_1"]
    assert cross["input_names"][1:3] == ["past_key_cross_0", "past_value_cross_0"]
    assert cross["input_shapes"][1:3] == [[4, 2, 1500, 8], [4, 2, 1500, 8]]
    p = cross["estimate"]["problem"]
    assert (p["qkv_format"], p["kv_sequence_length"], p["has_present"]) == ("cross", 1500, False)
    assert cross["element_type"] == "float16"


def test_output_qk_node_is_unavailable_with_the_reason(docs):
    result = docs[DECODER]
    node = next(n for n in result.json["nodes"] if n["name"] == "Attention_3")
    assert node["output_names"] == [node["output_names"][0], None, None, "output_cross_qk_1"]
    estimate = node["estimate"]
    assert (estimate["status"], estimate["classification"]) == ("unsupported", "unavailable")
    assert "output_qk 'output_cross_qk_1'" in estimate["message"] and "not modelled" in estimate["message"]
    assert estimate["total_workspace_bytes"] == 0 and estimate["requirements"] == []
    assert result.exit_code == EXIT_REJECTED and not result.json["complete"]
    assert result.json["sized_count"] == 3 and result.json["node_count"] == 4
    sized = [n["estimate"]["total_workspace_bytes"] for n in result.json["nodes"] if n["estimate"]["status"] == "ok"]
    assert result.json["sum_total_bytes"] == sum(sized) and result.json["peak_total_bytes"] == max(sized)


def test_text_lists_every_node_with_routes_outputs_and_note():
    text = report_of(DECODER, DECODER_BOUNDS).text
    assert text.startswith("no safe reservation: 1 of the 4 attention node(s) could not be sized (why below); the 3 "
                           "sized alone need 769,024 B at their peak, 791,552 B summed\n"
                           "derived from the model (a --dim you give overrides one):\n"
                           "  past_sequence_length+sequence_length = 32: its name is its formula, in bound symbols\n"
                           f"model {DECODER}: 4 attention node(s), 3 sized, 3 distinct")
    assert "Attention_0, Attention_2 (x2, identical) in graph main: MultiHeadAttention, float16, num_heads = 2, " \
           "unidirectional = 1" in text
    assert "past_key [4, 2, 24, 8], past_value [4, 2, 24, 8]; absent: key_padding_mask" in text
    assert "outputs       output, present_key, present_value; absent: output_qk" in text
    assert "outputs       output, output_qk; absent: present_key, present_value" in text
    assert "unavailable: output 3 (output_qk 'output_cross_qk_1') is present" in text
    assert text.count("  route ") == 2 and text.count("  note: The bound covers ORT's workspace allocation") == 2
    assert "  Level-1 bound: ORT's estimate for PackedAttention, PackedMultiHeadAttention and GroupQueryAttention, " \
           "attnws's own for MultiHeadAttention and PagedAttention (ORT has none)" in text
    assert not any(mark in text for mark in ("{'", "None", "()", "Traceback")), text


def test_the_estimates_are_safe_bounds_for_every_smaller_runtime_shape(docs):
    """The decoder's self-attention bound covers the exact runtime workspace of each shape within
    the bounds (B <= 4, S <= 8, P <= 24), and the cross attention's each B and S."""
    nodes = {n["name"]: n["estimate"]["total_workspace_bytes"] for n in docs[DECODER].json["nodes"]}
    common = dict(op=Op.MHA, element_size=2, heads=2, head_size=8, qkv_bias=True)
    for b in (1, 2, 4):
        for s in (1, 3, 8):
            for past in (0, 1, 17, 24):
                exact = estimate_exact(Geometry(batch=b, seq=s, past=past, with_past=True, with_present=True,
                                                unidirectional=True, **common))
                assert exact.ok and exact.total_workspace_bytes <= nodes["Attention_0"]
            cross = estimate_exact(Geometry(batch=b, seq=s, kv_seq=1500, mha_format=MhaFormat.CROSS, **common))
            assert cross.ok and cross.total_workspace_bytes <= nodes["Attention_1"]


def test_without_value_info_attnws_own_shape_rules_give_the_same_report(tmp_path, docs):
    """ORT's optimizer writes no value_info: attnws's rules for Attention, EmbedLayerNormalization,
    SkipLayerNormalization, BiasGelu and MultiHeadAttention's outputs must carry the shapes."""
    for path, bounds in CASES:
        model = onnx.load(str(path))
        del model.graph.value_info[:]
        bare = report_of(Path(save(model, tmp_path, path.name)), bounds, "--json")
        assert bare.json["nodes"] == docs[path].json["nodes"]


def test_symbolic_dimensions_without_bounds_are_named_once_per_node():
    result = run(str(DECODER), "--dim", "batch_size=4", "--json")
    message = result.json["nodes"][0]["estimate"]["message"]
    assert message.count("symbolic dimension 'sequence_length' with no bound (give --dim sequence_length=MAX") == 1
    assert "input 0 (query '/decoder/layers.0/self_attn/q_proj/MatMul_output_0') axis 1" in message
    assert "input 7 (past_value 'past_value_self_0') axis 2" in message
    assert result.exit_code == EXIT_REJECTED


def test_max_shape_override_equals_dim_bounds(docs):
    override = "input_ids:[4,8];past_key_self_0:[4,2,24,8]"
    result = run(str(DECODER), "--max-shape-override", override, "--json")
    assert result.json["nodes"] == docs[DECODER].json["nodes"]


def test_prove_and_tight_policy_on_the_encoder_decoder():
    result = report_of(ENCDEC, ENCDEC_BOUNDS, "--prove", "--policy", "tight", "--json")
    assert result.exit_code == EXIT_OK and result.json["verdict"] == "PROVED"
    checks = result.json["checks"]
    assert list(checks) == ["main/Attention_2", "main/Attention_4"]
    assert checks["main/Attention_4"]["shared_from"] == "main/Attention_2"
    assert [p["theorem"] for p in checks["main/Attention_2"]["proofs"]] == ["safe_bound", "containment"]
    totals = result.json["totals"]
    assert totals["proven"]["peak"] <= totals["ort"]["peak"] == result.json["peak_total_bytes"]


# -- planted bugs: the checks above fail when the model layer misreads ------------------------------

def _planted(monkeypatch, permute, names_too: bool = True) -> None:
    """Make the adapter read each MultiHeadAttention node's inputs permuted by `permute` (with
    `names_too` False, only their types: the names stay right, the shapes move)."""
    real = translate.site_types

    def site_types(site, attributes):
        node = real(site, attributes)
        if node.op_type != "MultiHeadAttention":
            return node
        order = permute(list(range(len(node.inputs))), node.inputs)
        names = tuple(node.inputs[i] for i in order) if names_too else node.inputs
        types = tuple(node.types[i] for i in order) + (None,) * (len(names) - len(order))
        return translate.NodeTypes(node.op_type, names, types, node.attributes, node.outputs)

    monkeypatch.setattr(translate, "site_types", site_types)


def _swap(a: int, b: int):
    def permute(order, names):
        if max(a, b) < len(order):
            order[a], order[b] = order[b], order[a]
        return order
    return permute


def _compact(order, names):
    return [i for i in order if names[i]]  # drops the empty names: later inputs shift left


PLANTED = {"swap key and value": (_swap(1, 2), True), "swap query and key": (_swap(0, 1), True),
           "skip empty names": (_compact, True), "query and key types swapped": (_swap(0, 1), False),
           "past types read one early": (_compact, False)}


@pytest.mark.parametrize("bug", [*PLANTED, "drop a node"])
def test_a_planted_misreading_fails_the_checks(bug, monkeypatch, models):
    if bug == "drop a node":
        last = mha_nodes(models[DECODER].graph)[-1].name
        real = functions_module.is_attention
        monkeypatch.setattr(functions_module, "is_attention", lambda node: real(node) and node.name != last)
    else:
        _planted(monkeypatch, *PLANTED[bug])
    # BadModel: a misread type breaks ORT's type constraints; UsageError: a misread input leaves a --dim
    # reaching no input shape, which is refused
    with pytest.raises((AssertionError, BadModel, UsageError)) as caught:
        check_report(report_of(DECODER, DECODER_BOUNDS, "--json").json, models[DECODER], DECODER_BOUNDS)
    if isinstance(caught.value, UsageError):
        assert "changes nothing" in str(caught.value), caught.value


def test_a_key_value_swap_also_changes_the_estimate_where_their_shapes_differ(monkeypatch):
    """Key [B, L, D] and value [B, L, Dv] with Dv != D: read swapped, key's width is not the
    query's and the node is rejected instead of sized."""
    model = _separate_model(value_hidden=32)
    honest = analyze_model(model, ShapeBounds()).nodes[0]
    assert honest.estimate.ok and honest.estimate.problem.v_head_size == 16
    _planted(monkeypatch, _swap(1, 2))
    swapped = analyze_model(model, ShapeBounds()).nodes[0]
    assert not swapped.estimate.ok and swapped.hints[1] == (2, 6, 32)


# -- the adapter on hand-built MultiHeadAttention nodes -----------------------------------------------

def _separate_model(value_hidden: int = 16, inputs: list[str] | None = None, outputs: list[str] | None = None,
                    domain: str = MS, elem: int = FP16, extra: list[onnx.ValueInfoProto] = (), **attrs: Any):
    """A one-node MultiHeadAttention model: query [2, 5, 16], key [2, 6, 16], value [2, 6, Dv]."""
    graph_inputs = [helper.make_tensor_value_info("q", elem, [2, 5, 16]),
                    helper.make_tensor_value_info("k", elem, [2, 6, 16]),
                    helper.make_tensor_value_info("v", elem, [2, 6, value_hidden]), *extra]
    node = helper.make_node("MultiHeadAttention", inputs or ["q", "k", "v"], outputs or ["out"], name="mha",
                            domain=domain, **{"num_heads": 2, **attrs})
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("out", elem, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


def _only(model):
    report = analyze_model(model, ShapeBounds())
    assert len(report.nodes) == 1
    return report.nodes[0]


def test_trailing_inputs_omitted_or_empty_named_read_the_same():
    short, padded = _only(_separate_model()), _only(_separate_model(inputs=["q", "k", "v", "", "", "", "", ""]))
    assert short.hints == padded.hints and short.estimate == padded.estimate and short.estimate.ok
    assert short.inputs == ("q", "k", "v") and short.hints[3:] == (MISSING,) * 7


def test_scale_and_mask_filter_value_do_not_change_the_size():
    plain = _only(_separate_model())
    scaled = _only(_separate_model(scale=0.5, mask_filter_value=-1e4))
    assert scaled.estimate == plain.estimate and scaled.attributes["scale"] == 0.5


def test_unidirectional_counts_only_when_it_is_exactly_one():
    """ORT's kernel compares the attribute with 1: any other value is bidirectional."""
    bidirectional, causal = _only(_separate_model(unidirectional=0)), _only(_separate_model(unidirectional=1))
    assert causal.estimate.problem.is_unidirectional and not bidirectional.estimate.problem.is_unidirectional
    for value in (2, -1):
        odd = _only(_separate_model(unidirectional=value))
        assert odd.estimate == bidirectional.estimate and odd.attributes["unidirectional"] == value


def test_only_one_present_output_is_unavailable_with_the_reason():
    node = _only(_separate_model(outputs=["out", "present_key"]))
    assert not node.estimate.ok and node.estimate.error == "invalid_argument"
    assert "only present_key (output 1)" in node.estimate.message


def test_present_outputs_make_has_present():
    with_present = _only(_separate_model(outputs=["out", "pk", "pv"]))
    assert with_present.estimate.ok and with_present.estimate.problem.has_present


def test_past_sequence_length_is_unsupported_but_shapes_flow_on():
    """A node with input 8 is not sized (the spec's Unsupported), yet its output [B, S, Dv] feeds the
    next MultiHeadAttention, which is."""
    extra = [helper.make_tensor_value_info(n, FP16, [2, 2, 9, 8]) for n in ("pk", "pv")]
    extra.append(helper.make_tensor_value_info("psl", TensorProto.INT32, [1]))
    first = helper.make_node("MultiHeadAttention", ["q", "k", "k", "", "", "", "pk", "pv", "psl"], ["o1", "k1", "v1"],
                             name="first", domain=MS, num_heads=2)
    second = helper.make_node("MultiHeadAttention", ["o1", "o1", "o1"], ["o2"], name="second", domain=MS, num_heads=2)
    inputs = [helper.make_tensor_value_info("q", FP16, [2, 5, 16]), helper.make_tensor_value_info("k", FP16, [2, 5, 16])]
    graph = helper.make_graph([first, second], "g", inputs + extra, [helper.make_tensor_value_info("o2", FP16, None)])
    report = analyze_model(helper.make_model(graph, opset_imports=OPSETS), ShapeBounds())
    first_report, second_report = report.nodes
    assert first_report.estimate.error == "unsupported" and "past_sequence_length" in first_report.estimate.message
    assert second_report.hints[0] == (2, 5, 16) and second_report.estimate.ok


# -- the key/value length L for the solver: read from the graph --------------------------------------------

def _symbolic_model(key_length: str, tie: bool = False):
    """One MultiHeadAttention: query [batch, seq, 16], key and value [batch, KEY_LENGTH, 16] graph
    inputs; with `tie`, an Add of query and key makes the graph require L = S."""
    inputs = [helper.make_tensor_value_info("q", FP16, ["batch", "seq", 16]),
              helper.make_tensor_value_info("k", FP16, ["batch", key_length, 16]),
              helper.make_tensor_value_info("v", FP16, ["batch", key_length, 16])]
    nodes = [helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["out"], name="mha", domain=MS, num_heads=2)]
    outputs = [helper.make_tensor_value_info("out", FP16, None)]
    if tie:
        nodes.append(helper.make_node("Add", ["q", "k"], ["sum"]))
        outputs.append(helper.make_tensor_value_info("sum", FP16, None))
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=OPSETS)


def _target(model, bounds: dict[str, int]):
    from attnws.model.report import node_target, with_exact_dims

    report = with_exact_dims(model, analyze_model(model, ShapeBounds(bounds)), ShapeBounds(bounds))
    (node,) = report.nodes
    return node, node_target(node)


@pytest.mark.parametrize("model, bounds, tied", [
    (_symbolic_model("seq"), {"batch": 2, "seq": 8}, True),
    (_symbolic_model("enc"), {"batch": 2, "seq": 8, "enc": 8}, False),  # one bound, two symbols: apart
    (_symbolic_model("enc"), {"batch": 2, "seq": 8, "enc": 12}, False),
], ids=["key on the query's symbol", "encoder length bound like seq", "encoder length"])
def test_the_key_length_is_tied_to_s_only_where_the_graph_keeps_them_equal(model, bounds, tied):
    """L = S (the target's kv_seq None) where the key's length is the query's own symbol; an
    encoder length of another symbol ranges on its own, even when bound to the same value (the
    symbols moved apart in one more inference part them)."""
    node, target = _target(model, bounds)
    assert (node.tied == {"kv_seq"}) is tied
    assert target.kv_seq == (None if tied else DimRange(1, bounds.get("enc", 8)))
    assert target.seq == DimRange(1, 8)


def test_a_graph_that_equates_two_given_symbols_ties_nothing():
    """Moving the given symbols apart contradicts the graph's own equality (a usage error in that
    run): nothing is tied, the safe reading, and the report is the same otherwise."""
    node, target = _target(_symbolic_model("enc", tie=True), {"batch": 2, "seq": 8, "enc": 8})
    assert node.tied == frozenset() and target.kv_seq == DimRange(1, 8)


@pytest.mark.parametrize("change,message", [
    (dict(outputs=["out", "pk", "pv", "qk", "extra"]), "5 outputs; MultiHeadAttention has at most 4"),
    (dict(inputs=["q", "k", "v"] + [""] * 8), "11 inputs; MultiHeadAttention takes at most 10"),
    (dict(inputs=["", "k", "v"]), "required input 0 (query) is missing"),
    (dict(num_heads=2.0), "attribute num_heads has type FLOAT, expected INT"),
    (dict(unidirectional=1.0), "attribute unidirectional has type FLOAT, expected INT"),
    (dict(qkv_hidden_sizes=[16, 16, 16]), "unknown attribute 'qkv_hidden_sizes'"),
    (dict(domain=""), "is a com.microsoft operator, found in domain ''"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_malformed_nodes_are_bad_models(change, message, tmp_path):
    with pytest.raises(BadModel, match=re.escape(message)):
        load_model(save(_separate_model(**change), tmp_path))


def test_a_custom_domains_multihead_attention_is_not_ours(tmp_path):
    model = _separate_model(domain="com.example")
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    assert analyze_model(model, ShapeBounds()).nodes == ()


def _coherent_shapes(data) -> tuple[list[list[int] | None], int]:
    """Input shapes of one plausible node (B, S, L, P, N, H, Hv drawn; a format; each optional input
    present or not), one dimension sometimes knocked off: mostly valid, sometimes just not."""
    b, s, l, p, n, h, hv = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)),
                            data.draw(st.integers(0, 9)), data.draw(st.integers(1, 3)),
                            data.draw(st.sampled_from([8, 16, 24])), data.draw(st.sampled_from([8, 16, 24])))
    fmt = data.draw(st.sampled_from(["separate", "cross", "packed_kv", "packed_qkv"]))
    t = p + l
    q, k, v = {"separate": ([b, s, n * h], [b, l, n * h], [b, l, n * hv]),
               "cross": ([b, s, n * h], [b, n, l, h], [b, n, l, hv]),
               "packed_kv": ([b, s, n * h], [b, l, n, 2, h], None),
               "packed_qkv": ([b, s, n, 3, h], None, None)}[fmt]
    maybe = lambda shape, odds=3: shape if data.draw(st.integers(0, odds - 1)) == odds - 1 else None  # noqa: E731
    mask = data.draw(st.sampled_from([[b], [3 * b + 2], [b, t], [b, s, t]]))
    shapes = [q, k, v, maybe([2 * n * h + n * hv]), maybe(mask), maybe([b, n, s, t]),
              *([[b, n, p, h]] * 2 if data.draw(st.booleans()) else [None, None]), maybe([1], 8), maybe([b, 1, t], 8)]
    if data.draw(st.booleans()):
        index = data.draw(st.integers(0, 9))
        if shapes[index]:
            axis = data.draw(st.integers(0, len(shapes[index]) - 1))
            shapes[index] = [*shapes[index][:axis], data.draw(st.integers(0, 40)), *shapes[index][axis + 1:]]
    return shapes, n


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_multihead_attention_node_is_reported_or_refused_never_a_crash(data):
    """Random ranks, dimensions, present inputs and outputs, element types and attributes: only a
    WorkspaceError escapes, and a loaded model reports its one node."""
    heads = st.integers(-1, 4)
    if not data.draw(st.booleans()):
        shapes, n = _coherent_shapes(data)
        count = max(i for i, shape in enumerate(shapes) if shape is not None or i == 0) + 1
        heads = st.sampled_from([n, n, n, n + 1])
    else:
        dims = st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 48, 2**31]), min_size=0, max_size=5)
        count = data.draw(st.integers(1, MHA_INPUT_COUNT))
        shapes = [data.draw(st.one_of(st.none(), dims)) if i == 0 or data.draw(st.booleans()) else False
                  for i in range(count)]
    elem = data.draw(st.sampled_from([FP16, FP16, FP32, TensorProto.INT32]))
    graph_inputs, names = [], []
    for i, shape in enumerate(shapes[:count]):
        if shape is False or (shape is None and i > 0 and len(shapes) == MHA_INPUT_COUNT):
            names.append("")
            continue
        kind = TensorProto.INT32 if i in (8, 9) else elem
        graph_inputs.append(helper.make_tensor_value_info(f"i{i}", kind, shape))
        names.append(f"i{i}")
    outputs = data.draw(st.sampled_from([["out"], ["out", "pk", "pv"], ["out", "", "", "qk"]]))
    if data.draw(st.integers(0, 3)) == 3:
        outputs = ["out", *[data.draw(st.sampled_from(["", f"o{i}"])) for i in range(1, data.draw(st.integers(1, 4)))]]
    attrs = data.draw(st.fixed_dictionaries({"num_heads": heads},
                                            optional={"unidirectional": st.integers(0, 1)}))
    if data.draw(st.integers(0, 9)) == 9:
        del attrs["num_heads"]
    node = helper.make_node("MultiHeadAttention", names, outputs, name="mha", domain=MS, **attrs)
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("out", elem, None)])
    model = helper.make_model(graph, opset_imports=OPSETS)
    try:
        report = analyze_model(load_model_bytes(model), ShapeBounds())
    except WorkspaceError:
        return
    assert len(report.nodes) == 1 and report.nodes[0].estimate.op is Op.MHA
    json.dumps(estimate_json(report.nodes[0].estimate))


def load_model_bytes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Load through attnws's own checks, from memory (what `load_model` does after reading)."""
    from attnws.model.load import check_attention_nodes, check_structure, parse_model

    parsed = parse_model(model.SerializeToString(), "fuzzed model")
    check_attention_nodes(parsed)
    check_structure(parsed, "fuzzed model")
    return parsed


# -- attnws depends on none of the generator's packages ----------------------------------------------

def test_attnws_imports_none_of_the_generators_packages():
    banned = {"onnxruntime", "torch", "transformers"}
    for path in (ROOT / "attnws").rglob("*.py"):
        assert not banned & imported_packages(path), f"{path} imports {sorted(banned & imported_packages(path))}"
    code = ("import sys, attnws.model, attnws.model.commands; "
            "print(sorted(m for m in ('onnxruntime', 'torch', 'transformers') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"
