"""MultiHeadAttention targets through the solver: the theorems decided on the committed targets,
the findings (non-monotonic pairs, run-time failures) replayed, and planted bugs in the family's
estimate that the theorems must catch."""

from __future__ import annotations

import pytest

from attnws.solver.gateway import Verdict
from attnws.solver.theorems import prove_target
from attnws.spec.estimate import estimate_exact
from attnws.spec.mha import reachability as mha_reachability
from attnws.spec.problem import Backend
from attnws.spec.shapes_file import read_shapes_document
from attnws.spec.target import target_from_dict

from tests.solver.commands import run

SAFETY = ["safe_bound", "reachability", "route_monotonicity", "containment", "abi_domain", "runtime_success",
          "tightness", "composition"]
# A small decoder with a cache: fp32, so MEA takes S or L >= 256 and unfused (two S x T regions) the rest.
DECODER = target_from_dict({"name": "small-mha-decoder", "op": "mha", "dtype": "fp32", "batch": "1..2",
                            "seq": "1..300", "past": "0..64", "heads": "2..2", "head_size": "16..16",
                            "qkv_bias": True, "with_past": True, "with_present": True, "sm": 80})
# Cross attention on sm75 (no Flash): TRT cross while L <= 128, MEA above.
CROSS = target_from_dict({"name": "small-mha-cross", "op": "mha", "dtype": "fp16", "batch": "1..2",
                          "seq": "1..64", "kv_seq": "1..200", "heads": "2..2", "head_size": "32..32", "sm": 75})


@pytest.mark.parametrize("target", [DECODER, CROSS], ids=lambda t: t.name)
def test_the_safety_theorems_are_proved_on_small_mha_targets(target):
    results = prove_target(target, names=SAFETY)
    assert {r.theorem: r.verdict for r in results} == {name: Verdict.PROVED for name in SAFETY}


def test_reachability_finds_a_witness_for_each_route_the_cascade_takes():
    (result,) = prove_target(CROSS, names=["reachability"])
    witnesses = result.details["witnesses"]
    assert set(witnesses) == {"trt_cross", "mea"}
    assert witnesses["trt_cross"]["kv_seq"] <= 128 < witnesses["mea"]["kv_seq"]
    # The fused runner needs S == L <= 64 here, where the cross kernel (L <= 128) is tried first.
    assert "trt" in result.details["proven_unreachable"]


def test_the_decoder_threshold_pair_is_found_and_replayed():
    result = run("counterexamples", "--target", "mha-decoder-past-fp32-sm80", "--kind", "nonmonotonic", "--json")
    records = read_shapes_document(result.json)
    assert records
    for geometry, config, labels in records:
        assert estimate_exact(geometry, config).total_workspace_bytes == labels["runtime_bytes"]
    roles = {labels["role"]: (geometry, labels) for geometry, _, labels in records}
    (small, small_labels), (large, large_labels) = roles["smaller"], roles["larger"]
    assert (small.seq, large.seq) == (255, 256)
    assert small_labels["runtime_bytes"] > large_labels["runtime_bytes"]
    assert "mea: fp32 sequence threshold" in small_labels["discontinuity"]


def test_the_key_length_mask_target_runs_trt_with_head_size_32():
    (result,) = prove_target(target_from_dict({
        "name": "h32", "op": "mha", "dtype": "fp16", "batch": "1..2", "seq": "1..400", "heads": "1..1",
        "head_size": "32..32", "mask": "1d_key_seq_len", "sm": 80}), names=["no_runtime_failure"])
    assert result.verdict is Verdict.PROVED


def test_a_causal_key_length_mask_over_long_caches_refutes_no_runtime_failure_with_a_replayed_shape():
    (result,) = prove_target(target_from_dict({
        "name": "causal", "op": "mha", "dtype": "fp16", "batch": "1..2", "seq": "1..2", "kv_seq": "1..1100",
        "heads": "1..1", "head_size": "32..32", "mask": "1d_key_seq_len", "unidirectional": True, "sm": 80}),
        names=["no_runtime_failure"])
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["dims"]["kv_seq"] == 1025 and result.counterexample["backends"] == ["unfused"]


def test_planted_bug_an_estimate_that_drops_the_unfused_route_is_refuted(monkeypatch):
    real = mha_reachability.reachability

    def without_unfused(p, config, domain):
        return [v for v in real(p, config, domain) if v.backend is not Backend.UNFUSED]

    monkeypatch.setattr(mha_reachability, "reachability", without_unfused)
    (result,) = prove_target(DECODER, names=["safe_bound"])
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["seq"] < 256  # where unfused, not MEA, runs


def test_planted_bug_scores_sized_with_the_new_length_instead_of_the_total_is_refuted(monkeypatch):
    from attnws.spec.mha import recipe as mha_recipe

    def scores_without_past(d, p):
        return d.mul(p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.kv_sequence_length,
                     what="planted: scores over L")

    assert prove_target(DECODER, names=["kernel_contract"])[0].verdict is Verdict.PROVED
    monkeypatch.setattr(mha_recipe, "scores_used_bytes", scores_without_past)
    (result,) = prove_target(DECODER, names=["kernel_contract"])
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["past"] > 0


@pytest.mark.parametrize("bound, found", [(1_300_000, False), (1_400_000, True)])
def test_the_element_bound_counts_the_mha_working_set_over_t(bound, found):
    # The pair S = 255 -> 256 at B = 1, N = 12, H = 64, P = 0 has working sets B*N*(S*T + S*H + T*(H + Hv))
    # of 1,367,820 and 1,376,256 elements.
    result = run("counterexamples", "--target", "mha-decoder-past-fp32-sm80", "--kind", "nonmonotonic",
                 "--max-elements", str(bound), "--json")
    assert bool(result.json["shapes"]) is found
    assert "B*N*(S*T+S*H+T*(H+Hv))" in run("counterexamples", "--target", "mha-decoder-past-fp32-sm80", "--kind",
                                            "nonmonotonic", "--max-elements", str(bound)).text
