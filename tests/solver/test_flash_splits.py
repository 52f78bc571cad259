"""The solver's view of Flash's split heuristic: the symbolic unrolling equals the concrete
heuristic, the key-length drop of #32453 is found on its own, ORT's envelope is proved to cover
the recipe, and a planted envelope-breaking bug is refuted with a replayed key length."""

from __future__ import annotations

import z3

from attnws.solver.domain import SymbolicDomain
from attnws.solver.gateway import Limits, Verdict
from attnws.solver.splits import KeyLengthCase, envelope_dominates, nonmonotonic_pairs
from attnws.spec.backends import flash
from attnws.spec.domain import CONCRETE as D
from attnws.spec.gqa.problem import GqaWorkspaceProblem

LIMITS = Limits(rlimit=200_000_000)
PAIR_PROBLEM = GqaWorkspaceProblem(2, 2, 1, 1, 2, 2, 64, 16384)  # #32453: B 1, S 1, N 2, H 64


def _value(term, **values):
    subs = [(z3.Int(name), z3.IntVal(v)) for name, v in values.items()]
    return z3.simplify(z3.substitute(z3.IntVal(term) if isinstance(term, int) else term, *subs)).as_long()


def test_symbolic_split_count_equals_the_concrete_heuristic():
    sym = SymbolicDomain()
    blocks, rows = z3.Int("blocks"), z3.Int("rows")
    fixed_rows = flash.split_count(sym, 2, blocks, 108)
    both = flash.split_count(sym, rows, blocks, 108)
    stepped = flash.split_count(sym, rows, blocks, 108, rows_step=3)
    for r in (3, 48, 84, 87, 300):
        for b in (1, 54, 55, 129):
            assert _value(stepped, blocks=b, rows=r) == flash.split_count(D, r, b, 108)
    for b in [*range(1, 140), 1000, 16256, 20000]:
        assert _value(fixed_rows, blocks=b) == flash.split_count(D, 2, b, 108)
    for r in (1, 3, 50, 86, 87, 500):
        for b in (1, 7, 54, 55, 128, 300):
            assert _value(both, blocks=b, rows=r) == flash.split_count(D, r, b, 108)


def test_the_32453_drop_is_found_and_is_the_only_one_from_12800_to_16384():
    case = KeyLengthCase(PAIR_PROBLEM, 108, 12800, 16384)
    drops, status = nonmonotonic_pairs(case, LIMITS)
    assert status.state == "found" and status.complete
    assert [(d.total, d.splits_before, d.splits_after) for d in drops] == [(13824, 54, 28)]
    assert drops[0].bytes_after < drops[0].bytes_before == case.workspace(13824)


def test_a_range_without_a_drop_is_proved_to_have_none():
    drops, status = nonmonotonic_pairs(KeyLengthCase(PAIR_PROBLEM, 108, 1, 4096), LIMITS)
    assert drops == [] and status.state == "none"


def test_the_envelope_covers_the_recipe_at_every_key_length():
    assert envelope_dominates(KeyLengthCase(PAIR_PROBLEM, 108, 1, 16384), LIMITS).verdict is Verdict.PROVED


def test_a_split_count_past_the_key_blocks_breaks_the_envelope(monkeypatch):
    """The planted bug: the heuristic's cap forgets the key blocks (min(128, SMs) only)."""
    honest = flash.split_count

    def uncapped(d, rows, key_blocks, sm_count, rows_step=1):
        return d.ite(honest(d, rows, key_blocks, sm_count, rows_step) > 1, min(flash.MAX_SPLITS, sm_count), 1)

    monkeypatch.setattr(flash, "split_count", uncapped)
    result = envelope_dominates(KeyLengthCase(PAIR_PROBLEM, 108, 1, 16384), LIMITS)
    assert result.verdict is Verdict.REFUTED
    case = KeyLengthCase(PAIR_PROBLEM, 108, 1, 16384)
    assert case.envelope(result.counterexample) < case.workspace(result.counterexample)
