"""The tight policy is the proven maximum (issue: "the reservation a user can trust"), and each
memory pattern gets its own, decided on its own box."""

from __future__ import annotations

import pytest

from attnws.solver import tight
from attnws.solver.bounds import bound_holds
from attnws.solver.gateway import Verdict
from attnws.solver.ledger import TARGETS_DIR
from attnws.solver.results import context
from attnws.spec.errors import EncodingMismatch
from attnws.spec.target import Pattern, Target, load_target

BERT_FP32 = "bert-base-pmha-fp32-sm80"


def committed(name: str) -> Target:
    return load_target(TARGETS_DIR / f"{name}.json")


def test_the_tight_root_is_the_proven_maximum_with_its_witness():
    policy = tight.tight_policy(committed(BERT_FP32))
    assert policy.method == tight.PROVEN_MAXIMUM and policy.proof.verdict is Verdict.PROVED
    assert policy.tight_total_bytes == 549_918_720 and policy.ort_total_bytes == 1_912_602_624
    assert (policy.witness["batch"], policy.witness["seq"], policy.witness["backends"]) == (64, 255, ["unfused"])
    assert round(policy.ratio, 2) == 3.48


def test_a_root_one_byte_below_the_maximum_is_refuted():
    """The planted bug: a tight root one byte short is caught, with the shape that needs it."""
    target = committed(BERT_FP32)
    maximum = tight.tight_policy(target).tight_total_bytes
    short = bound_holds(context(target), maximum - 1, "tight_bound", tight.CLAIM)
    assert short.verdict is Verdict.REFUTED and short.counterexample["runtime_bytes"] == maximum
    assert bound_holds(context(target), maximum, "tight_bound", tight.CLAIM).verdict is Verdict.PROVED


def test_an_undecided_maximum_falls_back_to_the_route_dropping_bound(monkeypatch):
    monkeypatch.setattr(tight, "max_runtime", lambda ctx, session: None)
    policy = tight.tight_policy(committed(BERT_FP32))
    assert policy.method == tight.ROUTE_DROPPING and policy.proof.verdict is Verdict.PROVED
    assert policy.tight_total_bytes == policy.ort_total_bytes  # ORT keeps MEA and unfused, both dispatched


DECODER = "mha-decoder-past-fp32-sm80"


def test_each_pattern_has_its_own_proven_maximum():
    target = committed(DECODER)
    decode = tight.pattern_maximum(target, Pattern.parse("decode:seq=1"))
    assert decode.verdict is Verdict.PROVED
    assert decode.details["max_runtime_bytes"] == 1_254_400 and decode.details["witness"]["seq"] == 1
    assert decode.details["ratio"] > 10


def test_a_pattern_proof_that_ignores_a_dimension_of_its_box_is_caught(monkeypatch):
    """The planted bug: restricting the target to the pattern forgets its seq range; the witness
    of the maximum then lies outside the pattern, and the check refuses it."""
    monkeypatch.setattr(Target, "restrict", lambda self, pattern: self)
    with pytest.raises(EncodingMismatch, match="outside pattern decode"):
        tight.pattern_maximum(committed(DECODER), Pattern.parse("decode:seq=1"))


def test_a_shape_outside_every_pattern_is_reported():
    target = committed(DECODER)
    status, witness = tight.uncovered_shape(target.__class__(**{**target.__dict__, "patterns": (
        Pattern.parse("decode:seq=1"), Pattern.parse("prefill:past=0"))}))
    assert status == "found" and witness["seq"] > 1 and witness["past"] > 0
    whole = target.__class__(**{**target.__dict__, "patterns": (Pattern.parse("all:seq=1..512"),)})
    assert tight.uncovered_shape(whole) == ("none", None)
