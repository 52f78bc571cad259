"""SymbolicDomain against ConcreteDomain: same values, checks become guarded obligations."""

from __future__ import annotations

import pytest
import z3
from hypothesis import given, strategies as st

from attnws.solver.domain import SymbolicDomain, holds_all
from attnws.spec.aggregate import root_layout
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument, WorkspaceError, WorkspaceOverflow
from attnws.spec.limits import SIZE_MAX

sizes = st.integers(0, 2**66)


def _value(term, **values):
    subst = [(z3.Int(k), z3.IntVal(v)) for k, v in values.items()]
    simplified = z3.simplify(z3.substitute(term, *subst)) if isinstance(term, z3.ExprRef) else term
    if isinstance(simplified, z3.BoolRef):
        return z3.is_true(simplified)
    return simplified.as_long() if isinstance(simplified, z3.ExprRef) else simplified


def _concrete(call):
    try:
        return call(), None
    except WorkspaceError as error:
        return None, type(error)


@given(a=sizes, b=sizes, align=st.sampled_from([1, 8, 256]))
def test_arithmetic_agrees_with_the_concrete_domain(a, b, align):
    d = SymbolicDomain()
    x, y = z3.Int("a"), z3.Int("b")
    terms = {"add": d.add(x, y), "mul": d.mul(x, y, 3), "align": d.align_up(x, align)}
    calls = {"add": lambda: CONCRETE.add(a, b), "mul": lambda: CONCRETE.mul(a, b, 3),
             "align": lambda: CONCRETE.align_up(a, align)}
    ok = _value(holds_all(d.obligations), a=a, b=b)
    results = {k: _concrete(c) for k, c in calls.items()}
    assert ok == all(error is None for _, error in results.values())
    for name, (value, error) in results.items():
        if error is None:
            assert _value(terms[name], a=a, b=b) == value


def test_overflow_is_an_obligation_of_kind_workspace_overflow():
    d = SymbolicDomain()
    d.mul(z3.Int("a"), 2**40, what="twice")
    (obligation,) = d.obligations
    assert obligation.kind is WorkspaceOverflow and obligation.label == "twice"
    assert _value(obligation.formula, a=2**23) is True
    assert _value(obligation.formula, a=SIZE_MAX) is False


def test_require_inside_ite_is_guarded_by_the_branch():
    d = SymbolicDomain()
    s = z3.Int("s")

    def branch():
        d.require(s < 10, lambda: InvalidArgument("s too large"))
        return 1

    value = d.ite(s > 100, 0, branch)
    (obligation,) = d.obligations
    assert obligation.kind is InvalidArgument
    assert _value(obligation.formula, s=500) is True  # the other branch: nothing required
    assert _value(obligation.formula, s=50) is False
    assert _value(value, s=5) == 1 and _value(value, s=500) == 0


def test_python_conditions_short_circuit():
    d = SymbolicDomain()
    assert d.all_(True, True) is True and d.all_(False, z3.Bool("b")) is False
    assert d.any_(True, z3.Bool("b")) is True and d.not_(False) is True
    assert d.ite(True, 3, lambda: pytest.fail("other branch evaluated")) == 3
    d.require(True, lambda: InvalidArgument("never"))
    assert d.obligations == [] and d.member(4, (1, 2, 4)) is True


@given(projection=st.integers(0, 2**40), attention=st.integers(0, 2**40))
def test_root_layout_evaluates_in_both_domains(projection, attention):
    d = SymbolicDomain()
    p, a = z3.Int("p"), z3.Int("a")
    offset, total = root_layout(p, a, d)
    assert (_value(offset, p=projection, a=attention), _value(total, p=projection, a=attention)) \
        == root_layout(projection, attention, CONCRETE)
