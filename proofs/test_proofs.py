"""Every theorem on every committed target, compared with the committed ledger.

Regenerate the ledger with `attnws prove --write-ledger` (or `attnws.solver.ledger`'s
`write_ledger(compute_ledger(committed_targets()))`) after an intended change, and review the diff.
"""

from __future__ import annotations

import pytest

from attnws.solver.ledger import committed_targets, ledger_differences, read_ledger, target_entry

LEDGER = read_ledger()
TARGETS = committed_targets()


def test_the_ledger_covers_exactly_the_committed_targets():
    assert sorted(LEDGER["targets"]) == sorted(t.name for t in TARGETS)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_target_matches_the_ledger(target):
    fresh = {"targets": {target.name: target_entry(target)}}
    stored = {"targets": {target.name: LEDGER["targets"][target.name]}}
    assert not ledger_differences(stored, fresh), "\n".join(ledger_differences(stored, fresh))


def test_every_refutation_a_target_declares_is_in_the_ledger():
    """A target's `expect_refuted` names a true property of ORT; a declaration the ledger no longer
    bears out (the theorem proved, or never run) is stale."""
    for target in TARGETS:
        theorems = LEDGER["targets"][target.name]["theorems"]
        for theorem, why in target.expect_refuted:
            assert theorems[theorem]["verdict"] == "REFUTED", f"{target.name}: {theorem} is declared refuted ({why})"
            assert theorems[theorem]["expected_because"] == why
