"""The GroupQueryAttention ledger (`attnws/proofs/gqa-ledger.json`): it covers exactly the
committed GQA targets, every target is PROVED, and the fastest target reproduces its entry here. `attnws prove --op gqa --check-ledger` re-proves
every target (about two minutes); `--write-ledger` rewrites the ledger after an intended change."""

from __future__ import annotations

import json

from attnws.solver.gateway import Limits
from attnws.solver.gqa_commands import GQA_LEDGER, SPLIT_RLIMIT, committed_gqa_targets, ledger_facts, prove_box

LEDGER = json.loads(GQA_LEDGER.read_text())
BOXES = {target.name: target for target in committed_gqa_targets()}


def test_the_ledger_covers_exactly_the_committed_targets():
    assert sorted(LEDGER["targets"]) == sorted(BOXES) and len(BOXES) >= 7


def test_every_target_is_proved():
    for name, entry in LEDGER["targets"].items():
        assert entry["verdict"] == "PROVED", name
        assert entry["kernel_contract"]["verdict"] == "PROVED", name
        assert all(m["bytes"] or m["expected"] for m in entry["maxima"]), name


def test_the_fastest_target_reproduces_its_entry():
    fresh = prove_box(BOXES["phi-3-mini-fp16-sm89"], Limits(rlimit=LEDGER["rlimit"]))
    stored = LEDGER["targets"]["phi-3-mini-fp16-sm89"]
    assert LEDGER["rlimit"] == SPLIT_RLIMIT
    assert ledger_facts(fresh) == ledger_facts(stored)
    planted = {**stored, "maxima": [{**m, "bytes": (m["bytes"] or 0) + 1} for m in stored["maxima"]]}
    assert ledger_facts(planted) != ledger_facts(stored)
