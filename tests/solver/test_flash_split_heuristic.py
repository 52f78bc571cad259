"""The solver's view of Flash's split heuristic: the symbolic unrolling equals the concrete
heuristic (the searches over it are the shared theorems': tests/solver/test_gqa_theorems.py)."""

from __future__ import annotations

import z3

from attnws.solver.domain import SymbolicDomain
from attnws.spec.backends import flash
from attnws.spec.domain import CONCRETE as D


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
