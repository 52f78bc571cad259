"""The symbolic twin of `attnws.spec.domain.ConcreteDomain`: the same methods, building Z3 terms.

Evaluating a spec function (builder, recipe, dispatch gate) with a `SymbolicDomain` returns Z3
terms instead of ints and, instead of raising, records every check the concrete domain would make
as an `Obligation`: "under the current path condition, this holds". The problem is accepted
(or the recipe succeeds) exactly when every obligation recorded while evaluating it holds.

Python values stay Python: connectives short-circuit on Python bools, `ite` with a Python-bool
condition evaluates only the branch it selects, and arithmetic on two ints stays an int, so point
ranges cost the solver nothing. Sizes are unbounded Z3 integers; size_t overflow is an obligation
(`result <= SIZE_MAX`, kind `WorkspaceOverflow`), never a wrap-around.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import z3

from attnws.spec.errors import InvalidArgument, WorkspaceError, WorkspaceOverflow
from attnws.spec.limits import SIZE_MAX


@dataclass(frozen=True)
class Obligation:
    """One check of the spec: `holds` must be true when `guard` (the path condition) is.

    `kind` is the typed error the concrete domain would raise (`InvalidArgument` or
    `WorkspaceOverflow`), `label` what it was checking.
    """

    kind: type
    label: str
    guard: Any
    holds: Any

    @property
    def formula(self) -> Any:
        """Return guard => holds as a Z3 term (or a Python bool when both are concrete)."""
        return implies(self.guard, self.holds)


def is_symbolic(value: Any) -> bool:
    """Return whether value is a Z3 expression (not a Python int or bool)."""
    return isinstance(value, z3.ExprRef)


def as_term(value: Any) -> Any:
    """Return value as a Z3 term (Python bools and ints become Z3 constants)."""
    if is_symbolic(value):
        return value
    if isinstance(value, bool):
        return z3.BoolVal(value)
    return z3.IntVal(value)


def conj(*conds: Any) -> Any:
    """Return the conjunction, short-circuiting Python bools; True when there is nothing left."""
    if any(c is False for c in conds if not is_symbolic(c)):
        return False
    terms = [c for c in conds if is_symbolic(c)]
    return True if not terms else terms[0] if len(terms) == 1 else z3.And(*terms)


def disj(*conds: Any) -> Any:
    """Return the disjunction, short-circuiting Python bools; False when there is nothing left."""
    if any(c is True for c in conds if not is_symbolic(c)):
        return True
    terms = [c for c in conds if is_symbolic(c)]
    return False if not terms else terms[0] if len(terms) == 1 else z3.Or(*terms)


def negate(cond: Any) -> Any:
    """Return not cond (a Python bool stays a Python bool)."""
    return z3.Not(cond) if is_symbolic(cond) else not cond


def implies(guard: Any, cond: Any) -> Any:
    """Return guard => cond, short-circuiting Python bools."""
    return disj(negate(guard), cond)


def choose(cond: Any, then: Any, other: Any) -> Any:
    """Return If(cond, then, other), staying Python where the condition or both values allow."""
    if not is_symbolic(cond):
        return then if cond else other
    if not is_symbolic(then) and not is_symbolic(other) and then == other:
        return then
    return z3.If(cond, as_term(then), as_term(other))


def _short_name(term: Any) -> str:
    return str(term.decl().name()) if z3.is_const(term) else "<term>"


@contextmanager
def _short_printing() -> Iterator[None]:
    """Print Z3 constants by name and compound terms as <term> while a message is built:
    pretty-printing every symbolic product for every check would dominate the encoding time."""
    saved = z3.ExprRef.__str__
    z3.ExprRef.__str__ = _short_name  # type: ignore[method-assign]
    try:
        yield
    finally:
        z3.ExprRef.__str__ = saved  # type: ignore[method-assign]


def _error_kind(make_error: Callable[[], WorkspaceError]) -> tuple[type, str]:
    """Return the type and message of the error the concrete domain would raise."""
    with _short_printing():
        error = make_error()
    return type(error), str(error)


class SymbolicDomain:
    """A domain over Z3 terms that records the spec's checks as obligations (see the module doc).

    `obligations` grows as spec code runs; `mark()` / `since(mark)` slice it per evaluation, and
    `assuming(cond)` pushes a path condition that guards every obligation recorded inside it.
    """

    symbolic = True

    def __init__(self) -> None:
        self.obligations: list[Obligation] = []
        self._path: list[Any] = []

    # -- bookkeeping -------------------------------------------------------------------------
    @property
    def guard(self) -> Any:
        """Return the current path condition (True at top level)."""
        return conj(*self._path)

    @contextmanager
    def assuming(self, cond: Any) -> Iterator[None]:
        """Guard every obligation recorded inside the block by cond."""
        self._path.append(cond)
        try:
            yield
        finally:
            self._path.pop()

    def mark(self) -> int:
        """Return a position in `obligations` for `since`."""
        return len(self.obligations)

    def since(self, mark: int) -> list[Obligation]:
        """Return the obligations recorded after `mark`."""
        return self.obligations[mark:]

    def _record(self, kind: type, label: str, holds: Any) -> None:
        if holds is True:
            return
        self.obligations.append(Obligation(kind, label, self.guard, holds))

    # -- the ConcreteDomain contract ---------------------------------------------------------
    def add(self, left: Any, right: Any, what: str = "a size") -> Any:
        """Return left + right and oblige it to fit size_t."""
        result = left + right
        self._record(WorkspaceOverflow, what, result <= SIZE_MAX)
        return result

    def mul(self, *factors: Any, what: str = "a size") -> Any:
        """Return the product; oblige every partial product (left to right) to fit size_t."""
        result = factors[0]
        for factor in factors[1:]:
            result = result * factor
            self._record(WorkspaceOverflow, what, result <= SIZE_MAX)
        return result

    def align_up(self, value: Any, alignment: int, what: str = "a size") -> Any:
        """Return value rounded up to a multiple of the (concrete, positive) alignment."""
        if alignment == 0:
            raise InvalidArgument(f"alignment must be non-zero (computing {what}): alignment=0")
        numerator = self.add(value, alignment - 1, what=what)
        return self.mul(self.div(numerator, alignment), alignment, what=what)

    def require(self, cond: Any, make_error: Callable[[], WorkspaceError]) -> None:
        """Record cond as an obligation of the error's kind (Python True records nothing)."""
        if cond is True:
            return
        kind, label = _error_kind(make_error)
        self._record(kind, label, cond)

    def ite(self, cond: Any, then: Any, other: Any) -> Any:
        """Return If(cond, then, other); each thunk runs under its branch's path condition."""
        if not is_symbolic(cond):
            branch = then if cond else other
            return branch() if callable(branch) else branch
        with self.assuming(cond):
            then_value = then() if callable(then) else then
        with self.assuming(z3.Not(cond)):
            other_value = other() if callable(other) else other
        return choose(cond, then_value, other_value)

    def all_(self, *conds: Any) -> Any:
        return conj(*conds)

    def any_(self, *conds: Any) -> Any:
        return disj(*conds)

    def not_(self, cond: Any) -> Any:
        return negate(cond)

    def member(self, value: Any, allowed: Iterable[int]) -> Any:
        allowed = tuple(allowed)
        if not is_symbolic(value):
            return value in allowed
        return disj(*(value == a for a in allowed))

    def div(self, numerator: Any, divisor: Any) -> Any:
        """Floor division; SMT-LIB `div` agrees with Python's for the positive divisors used."""
        if not is_symbolic(numerator) and not is_symbolic(divisor):
            return numerator // divisor
        return as_term(numerator) / as_term(divisor)

    def mod(self, numerator: Any, divisor: Any) -> Any:
        if not is_symbolic(numerator) and not is_symbolic(divisor):
            return numerator % divisor
        return as_term(numerator) % as_term(divisor)

    def min_(self, left: Any, right: Any) -> Any:
        return choose(left <= right, left, right)

    def max_(self, left: Any, right: Any) -> Any:
        return choose(left >= right, left, right)


def holds_all(obligations: Iterable[Obligation]) -> Any:
    """Return the conjunction of the obligations' formulas."""
    return conj(*(o.formula for o in obligations))
