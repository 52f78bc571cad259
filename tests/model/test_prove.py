"""`attnws model --prove` and `--policy tight`: per-node solver checks on each node's target."""

from __future__ import annotations

import subprocess
import sys

import pytest
from onnx import helper

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.model import ShapeBounds, analyze_model
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.spec.problem import Op

from .builders import FP16, MS, node_model, pmha_separate_inputs, run, save

DIMS = ["--dim", "token_count=24", "--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=5"]


@pytest.mark.parametrize("spec", [
    EncoderSpec(layers=2, hidden=64, heads=4, ffn=64),
    EncoderSpec(layers=1, hidden=64, heads=4, ffn=64, op=Op.PA, qkv_hidden_sizes=True, attention_bias=(True, False)),
], ids=["pmha-packed", "pa-qkv-hidden-sizes-bias"])
def test_prove_gives_proved_safe_bound_and_containment_per_node(spec, tmp_path):
    result = run(save(packed_encoder(spec), tmp_path), *DIMS, "--prove")
    assert result.exit_code == EXIT_OK and result.json["verdict"] == "PROVED"
    checks = result.json["checks"]
    assert len(checks) == spec.layers
    for check in checks.values():
        assert [(p["theorem"], p["verdict"]) for p in check["proofs"]] == [("safe_bound", "PROVED"),
                                                                              ("containment", "PROVED")]
    assert result.json["totals"] == {"ort": {"peak": result.json["peak_total_bytes"], "sum": result.json["sum_total_bytes"]},
                                     "proven": None, "patterns": {}}  # no --policy tight: nothing else ran


def test_identical_layers_share_one_run(tmp_path):
    result = run(save(packed_encoder(EncoderSpec(layers=3, hidden=64, heads=4, ffn=64)), tmp_path), *DIMS, "--prove")
    assert {c["shared_from"] for c in result.json["checks"].values()} == {"main/attention_0"}
    assert "main/attention_0, main/attention_1, main/attention_2 (x3, one target)" in result.text


def test_tight_policy_is_proved_and_never_above_ort(tmp_path):
    result = run(save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path), *DIMS,
                 "--policy", "tight")
    doc = result.json
    tights = [c["tight"] for c in doc["checks"].values()]
    assert result.exit_code == EXIT_OK and all(t["verdict"] == "PROVED" for t in tights)
    assert all(t["tight_total_bytes"] <= t["ort_total_bytes"] == doc["peak_total_bytes"] for t in tights)
    assert doc["totals"]["proven"] == {"sum": sum(t["tight_total_bytes"] for t in tights),
                                       "peak": max(t["tight_total_bytes"] for t in tights)}
    assert all(t["method"] == "proven maximum" and t["witness"] for t in tights)


def test_model_layer_does_not_load_the_solver():
    code = "import sys, attnws.model, attnws.model.commands; print('z3' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def _mha(query: int, value: int, heads: int):
    """One MultiHeadAttention: query and key [2, 8, query], value [2, 8, value]."""
    shapes = [("q", FP16, [2, 8, query]), ("k", FP16, [2, 8, query]), ("v", FP16, [2, 8, value])]
    return node_model("MultiHeadAttention", shapes, num_heads=heads)


@pytest.mark.parametrize("build,status,message", [
    (lambda: _mha(16, 16, 17), "unsupported",
     "hidden size D = 16 is not a multiple of num_heads = 17: ORT floors the head size and its kernels then read "
     "only part of each row"),
    (lambda: _mha(34, 34, 4), "unsupported", "hidden size D = 34 is not a multiple of num_heads = 4"),
    (lambda: _mha(32, 34, 4), "unsupported", "value hidden size Dv = 34 is not a multiple of num_heads = 4"),
    (lambda: node_model("PackedMultiHeadAttention", pmha_separate_inputs(n=1, h=16), num_heads=17), "invalid_argument",
     "hidden sizes 16 (Q/K) and 16 (V) must be divisible by num_heads = 17"),
], ids=["mha-h0", "mha-query", "mha-value", "pmha"])
def test_hidden_not_a_multiple_of_num_heads_gets_one_answer_with_and_without_prove(build, status, message, tmp_path):
    """`model` and `model --prove` agree: the node is not sized, for the same reason, and nothing is
    proved about a target that would stand for another shape (it was VACUOUS)."""
    path = save(build(), tmp_path)
    plain, proved = run(path), run(path, "--prove")
    for result in (plain, proved):
        assert result.exit_code == EXIT_REJECTED and not result.json["complete"]
        estimate = result.json["nodes"][0]["estimate"]
        assert estimate["status"] == status and message in estimate["message"]
    assert proved.json["checks"] == {} and proved.json["verdict"] == "PROVED"  # nothing sized: nothing run
    assert "solver checks: none (no attention node was sized)" in proved.text and "VACUOUS" not in proved.text


def test_an_indivisible_nodes_output_shape_is_left_unknown_not_guessed():
    """ORT's output is [B, S, Dv]; attnws's rule would give [B, S, N*Hv]: it gives nothing instead,
    so a node reading it is unavailable for a shape it does not know, never sized on a wrong one."""
    model = _mha(16, 16, 17)
    model.graph.node.append(helper.make_node("MultiHeadAttention", ["out", "out", "out"], ["out2"], name="next",
                                             domain=MS, num_heads=4))
    model.graph.output[0].name = "out2"
    report = analyze_model(model, ShapeBounds())
    assert "input 0 (query 'out') is present without a known shape" in report.nodes[1].estimate.message


def test_a_node_whose_target_its_own_checks_refuse_keeps_its_estimate_and_says_why(tmp_path, monkeypatch):
    """A target refused by its own checks (InvalidArgument) is no crash and no proof: the node keeps
    its estimate's bound, for the whole and for each pattern, and the text and JSON say why."""
    import attnws.model.prove as prove
    from attnws.spec.errors import InvalidArgument

    def refused(node):
        raise InvalidArgument("planted: the target refuses this node")

    monkeypatch.setattr(prove, "node_target", refused)
    result = run(save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path), *DIMS,
                 "--policy", "tight", "--pattern", "short:seq=1..4")
    doc = result.json
    assert result.exit_code == EXIT_OK and doc["totals"]["proven"] == doc["totals"]["ort"] == \
        doc["totals"]["patterns"]["short"]
    checks = list(doc["checks"].values())
    assert [c["unprovable"] for c in checks] == ["planted: the target refuses this node"] * 2
    assert checks[1]["shared_from"] == "main/attention_0" and checks[0]["tight"] is None
    assert checks[0]["patterns"]["short"]["reason"] == ("the solver's target cannot state the node (planted: the "
                                                        "target refuses this node)")
    assert "solver: not run: the solver's target cannot state the node (planted: the target refuses this node)" \
        in result.text and "(x2, identical)" in result.text
