"""Theorems on small targets with known answers; results, replay and the commands end to end."""

from __future__ import annotations

import importlib

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from tests.solver.commands import run as _run
from attnws.solver.gateway import Verdict
from attnws.solver.results import (
    NO_ESTIMATE, NO_RUNNING_SHAPE, NO_VALID_SHAPE, SHAPE_FAILS_NO_ESTIMATE, ProofResult, combined_verdict, context,
)
from attnws.solver.theorems import DEFAULT_THEOREMS, FINDINGS, THEOREMS, prove_target
from attnws.solver.tight import tight_policy, tight_report
from attnws.spec.errors import EncodingMismatch
from attnws.solver.ledger import TARGETS_DIR
from attnws.spec.aggregate import aggregate
from attnws.spec.estimate import estimate_exact, estimate_geometry
from attnws.spec.problem import Backend
from attnws.spec.shapes_file import read_shapes_document
from attnws.spec.target import load_target, target_from_dict

LONG_FP32_PA = target_from_dict({"name": "long-fp32-pa", "op": "pa", "dtype": "fp32", "batch": "1..1",
                                 "seq": "1..50000", "heads": "1..1", "head_size": "8..8", "sm": 80})
SMALL_FP32_PMHA = target_from_dict({"name": "small-fp32-pmha", "op": "pmha", "dtype": "fp32", "batch": "1..4",
                                    "seq": "1..300", "heads": "2..2", "head_size": "16..16", "sm": 80})
DIMS = ("batch", "seq", "heads", "head_size", "tokens")


def _geometry(target, record):
    return target.geometry(**{k: record[k] for k in DIMS})


def test_safety_theorems_are_the_default_and_proved_on_a_small_target():
    results = prove_target(SMALL_FP32_PMHA)
    assert [r.theorem for r in results] == list(DEFAULT_THEOREMS)
    assert not set(FINDINGS) & set(DEFAULT_THEOREMS) and len(THEOREMS) == len(DEFAULT_THEOREMS) + len(FINDINGS)
    assert all(r.verdict is Verdict.PROVED for r in results), [r for r in results if r.verdict is not Verdict.PROVED]


@pytest.mark.parametrize("theorem", ["abi_domain", "runtime_success"])
def test_a_failing_shape_behind_an_unavailable_estimate_is_vacuous_and_shown(theorem):
    result = THEOREMS[theorem](context(LONG_FP32_PA))
    assert result.verdict is Verdict.VACUOUS and result.vacuous_because == SHAPE_FAILS_NO_ESTIMATE
    first = result.details["first_failing"]
    assert first["seq"] == 46341 and first["error"] == "invalid_argument" and "S * S" in first["message"]
    assert result.details["estimate"] == "unavailable"
    assert not estimate_exact(_geometry(LONG_FP32_PA, first), LONG_FP32_PA.config).ok
    assert estimate_exact(_geometry(LONG_FP32_PA, {**first, "seq": 46340}), LONG_FP32_PA.config).ok


def test_runtime_success_is_refuted_when_a_shape_fails_under_a_declared_estimate(monkeypatch):
    """A planted runtime-only check (S == 7 fails in the recipe, the maximum still sizes): ORT
    declares an estimate for a target where a shape cannot run."""
    recipe_mod = importlib.import_module("attnws.spec.packed.recipe")
    real = recipe_mod.validate_unfused_geometry

    def planted(d, p):
        real(d, p)
        d.require(p.sequence_length != 7, lambda: recipe_mod.InvalidArgument("planted: S = 7 fails"))

    monkeypatch.setattr(recipe_mod, "validate_unfused_geometry", planted)
    result = THEOREMS["runtime_success"](context(SMALL_FP32_PMHA))
    assert result.verdict is Verdict.REFUTED and result.counterexample["seq"] == 7
    assert result.counterexample["route"] == "unfused" and "planted" in result.counterexample["message"]


def test_safe_bound_and_composition_are_vacuous_without_an_estimate():
    for theorem in ("safe_bound", "composition"):
        result = THEOREMS[theorem](context(LONG_FP32_PA))
        assert result.verdict is Verdict.VACUOUS and result.vacuous_because == NO_ESTIMATE, theorem
        assert result.details["estimate"] == "unavailable" and not result.expected


def test_a_target_where_no_shape_runs_is_vacuous_never_proved():
    target = load_target(TARGETS_DIR / "pa-fp32-sm80-all-shapes-fail.json")
    results = prove_target(target, names=list(THEOREMS))
    verdicts = {r.theorem: r.verdict for r in results}
    assert Verdict.PROVED not in {v for name, v in verdicts.items() if name != "reachability"}, verdicts
    assert {r.theorem for r in results if r.vacuous_because == NO_RUNNING_SHAPE} >= {
        "containment", "kernel_contract", "tightness", "route_monotonicity", "nonmonotonic_dispatch", "naive_cascade"}
    assert combined_verdict(results) is Verdict.VACUOUS


def test_a_target_with_no_valid_shape_is_vacuous():
    empty = target_from_dict({"name": "no-valid", "op": "pmha", "dtype": "fp16", "batch": "1..2", "seq": "1..8",
                              "heads": "3..3", "head_size": "8..8", "v_head_size": "4..4", "format": "separate",
                              "tokens": "17..20"})
    results = prove_target(empty, names=list(THEOREMS))
    assert all(r.verdict is Verdict.VACUOUS and r.vacuous_because in (NO_VALID_SHAPE, NO_ESTIMATE) for r in results), \
        [(r.theorem, r.verdict, r.vacuous_because) for r in results]


def test_a_declared_unavailable_estimate_makes_those_vacuous_results_expected():
    target = load_target(TARGETS_DIR / "long-seq-pmha-fp32-sm80.json")
    results = prove_target(target)
    vacuous = [r for r in results if r.verdict is Verdict.VACUOUS]
    assert vacuous and all(r.expected for r in vacuous) and combined_verdict(results) is Verdict.PROVED


def test_tightness_reports_the_largest_runtime_and_its_witness():
    ctx = context(SMALL_FP32_PMHA)
    details = THEOREMS["tightness"](ctx).details
    witness = _geometry(SMALL_FP32_PMHA, details["witness"])
    assert estimate_exact(witness, SMALL_FP32_PMHA.config).total_workspace_bytes == details["max_runtime_bytes"]
    assert details["ratio"] == pytest.approx(ctx.estimate.total_workspace_bytes / details["max_runtime_bytes"],
                                             rel=1e-5)


def test_reachability_has_a_witness_or_a_proof_per_backend():
    details = THEOREMS["reachability"](context(SMALL_FP32_PMHA)).details
    assert set(details["witnesses"]) | set(details["proven_unreachable"]) == {"flash", "trt", "mea", "unfused"}
    assert {"flash", "trt"} <= set(details["proven_unreachable"])
    for backend, witness in details["witnesses"].items():
        assert backend in [b.value for b in estimate_exact(_geometry(SMALL_FP32_PMHA, witness),
                                                           SMALL_FP32_PMHA.config).backends]


@pytest.mark.parametrize("kwargs", [
    {"verdict": Verdict.REFUTED},
    {"verdict": Verdict.PROVED, "counterexample": {"seq": 1}},
    {"verdict": Verdict.UNKNOWN},
    {"verdict": Verdict.PROVED, "reason": "canceled"},
    {"verdict": Verdict.VACUOUS},
    {"verdict": Verdict.PROVED, "vacuous_because": "no shape"},
], ids=["REFUTED without counterexample", "PROVED with counterexample", "UNKNOWN without reason",
        "PROVED with reason", "VACUOUS without a reason", "PROVED with a vacuity reason"])
def test_result_invariants(kwargs):
    with pytest.raises(EncodingMismatch):
        ProofResult("t", "claim", "target", **kwargs)


def test_tight_policy_sizes_the_kept_routes_at_the_maximum_and_proves_the_bound():
    target = load_target(TARGETS_DIR / "bert-base-pa-fp16-sm75.json")
    policy = tight_policy(target)
    assert policy.proof.verdict is Verdict.PROVED and policy.proof.details["bound_bytes"] == policy.tight_total_bytes
    assert policy.dropped_routes == ("mea", "unfused") and list(policy.kept_routes) == ["trt"]
    estimate = estimate_geometry(target.max_geometry(), target.config)
    assert policy.tight_total_bytes == aggregate(estimate.problem, [Backend.TRT]).total_workspace_bytes
    assert policy.bytes_saved == policy.ort_total_bytes - policy.tight_total_bytes > 0


def test_tight_policy_drops_nothing_ort_does_not_keep_and_is_the_proven_maximum():
    policy = tight_policy(SMALL_FP32_PMHA)
    (tightness,) = prove_target(SMALL_FP32_PMHA, names=["tightness"])
    assert policy.dropped_routes == () and policy.method == "proven maximum"
    assert policy.tight_total_bytes == tightness.details["max_runtime_bytes"] < policy.ort_total_bytes


def test_tight_report_takes_the_estimate_commands_progress():
    messages: list[str] = []
    report = tight_report(SMALL_FP32_PMHA, messages.append)
    assert messages and report["verdict"] == "PROVED" and "proof" not in report


def test_prove_command_exit_codes():
    assert _run("prove", "--target", "bert-base-pmha-fp16-sm80", "--theorem", "safe_bound").exit_code == EXIT_OK
    refuted = _run("prove", "--target", "vit-b16-pa-fp16-sm80-attn-bias", "--theorem", "nonmonotonic_dispatch",
                   "--json")
    assert refuted.exit_code == EXIT_REJECTED
    assert refuted.json["results"][0]["counterexample"]["larger"]["dims"]["seq"] == 16
    assert "counterexample" in refuted.text


def test_prove_all_adds_the_findings():
    result = _run("prove", "--target", "bert-base-pa-fp16-sm75", "--theorem", "all", "--json")
    assert [r["theorem"] for r in result.json["results"]] == list(THEOREMS) and result.exit_code == EXIT_OK


# target, gate that flips, (dimension, smaller value, larger value)
DISCONTINUITIES = [
    ("bert-base-pmha-fp32-sm80", "mea: fp32 sequence threshold", ("seq", 255, 256)),
    ("vit-b16-pa-fp16-sm80-attn-bias", "mea: attention bias alignment", ("seq", 15, 16)),
    ("pa-fp16-sm80-head-bound-1032", "mea: device and head sizes", ("head_size", 7, 8)),
    ("small-head-pmha-fp16-sm80-trt-regime", "trt: runner support", ("seq", 384, 385)),
]


@pytest.mark.parametrize("name, gate, step", DISCONTINUITIES, ids=[d[1] for d in DISCONTINUITIES])
def test_counterexamples_are_minimal_replayed_pairs_at_each_discontinuity(name, gate, step):
    result = _run("counterexamples", "--target", name, "--kind", "nonmonotonic", "--json")
    records = read_shapes_document(result.json)
    for geometry, config, labels in records:
        assert estimate_exact(geometry, config).total_workspace_bytes == labels["runtime_bytes"]
    pairs = {}
    for geometry, _, labels in records:
        pairs.setdefault(labels["pair"], {})[labels["role"]] = (geometry, labels)
    dim, before, after = step
    found = [(p["smaller"], p["larger"]) for p in pairs.values() if gate in p["smaller"][1]["discontinuity"]]
    assert found, f"no pair labelled {gate!r}"
    (small, small_labels), (large, large_labels) = found[0]
    assert (getattr(small, dim), getattr(large, dim)) == (before, after)
    assert small_labels["runtime_bytes"] > large_labels["runtime_bytes"]


def test_counterexamples_kind_and_limit():
    naive = _run("counterexamples", "--target", "bert-base-pmha-fp32-sm80", "--kind", "naive-cascade", "--json")
    labels = [labels for _, _, labels in read_shapes_document(naive.json)]
    assert labels and all(n["label"] == "naive-cascade" and n["runtime_bytes"] > n["naive_bytes"] for n in labels)
    limited = _run("counterexamples", "--target", "pa-fp16-sm80-head-bound-1032", "--kind", "nonmonotonic",
                   "--limit", "1", "--json")
    assert len(limited.json["shapes"]) == 2


def test_prove_exits_1_on_vacuous_results_unless_the_target_expects_them():
    failing = _run("prove", "--target", "pa-fp32-sm80-all-shapes-fail", "--json")
    assert failing.exit_code == EXIT_REJECTED and failing.json["verdict"] == "VACUOUS"
    assert "vacuous: no valid shape of the target runs" in failing.text and "PROVED   containment" not in failing.text
    declared = _run("prove", "--target", "long-seq-pmha-fp32-sm80", "--json")
    assert declared.exit_code == EXIT_OK
    vacuous = [r for r in declared.json["results"] if r["verdict"] == "VACUOUS"]
    assert vacuous and all(r["expected"] and r["vacuous_because"] for r in vacuous)
    assert "vacuous (as the target declares)" in declared.text


def test_a_theorem_a_family_declares_not_applicable_says_why_and_counts_as_proved(monkeypatch):
    """The one engine never leaves a theorem out silently: a family declaring one not applicable
    (the planted declaration below) gets a NOT_APPLICABLE result with its reason, in the same place,
    and `prove` still passes."""
    from attnws.solver.text import result_text
    from attnws.spec.families import op_fields

    monkeypatch.setattr(op_fields(SMALL_FP32_PMHA.op), "NOT_APPLICABLE", {"composition": "planted: no root here"})
    results = prove_target(SMALL_FP32_PMHA)
    assert [r.theorem for r in results] == list(DEFAULT_THEOREMS)
    composition = next(r for r in results if r.theorem == "composition")
    assert composition.verdict is Verdict.NOT_APPLICABLE and composition.reason == "planted: no root here"
    assert combined_verdict(results) is Verdict.PROVED
    assert "not applicable: planted: no root here" in result_text(composition)


def test_a_refutation_the_target_declares_is_a_finding_and_an_undeclared_one_fails():
    """`expect_refuted` marks a true property of ORT: the verdict stays REFUTED with its replayed
    counterexample, the result says why, and it counts as PROVED; without the declaration the same
    refutation fails the target. A declaration naming a theorem that states no property of ORT is
    refused."""
    from dataclasses import replace

    from attnws.spec.documents import DocumentError
    from tests.gqa_targets import gqa_target
    from attnws.spec.options import RuntimeConfig
    from attnws.spec.target import DimRange

    pair = gqa_target("pair", 2, 2, 64, 16384, DimRange(1, 1), DimRange(1, 1), DimRange(13800, 13900),
                      RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0", "ORT_DISABLE_FLASH_DECODE": "1"}),
                      max_total_seq=16384)
    [undeclared] = prove_target(pair, names=["route_monotonicity"])
    [declared] = prove_target(replace(pair, expect_refuted=(("route_monotonicity", "split counts fall"),)),
                              names=["route_monotonicity"])
    assert undeclared.verdict is declared.verdict is Verdict.REFUTED
    assert undeclared.counterexample == declared.counterexample
    assert combined_verdict([undeclared]) is Verdict.REFUTED and combined_verdict([declared]) is Verdict.PROVED
    assert declared.expected and declared.expected_because == "split counts fall"
    with pytest.raises(DocumentError, match="a target may expect only"):
        target_from_dict({**SMALL_FP32_PMHA.as_dict(), "expect_refuted": {"safe_bound": "no"}})
