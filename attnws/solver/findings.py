"""The two finding theorems: `nonmonotonic_dispatch` and `naive_cascade`.

They state properties the runtime does NOT have on most realistic targets, which is why an
estimator must size every reachable route at the maximum geometry instead of replicating the
cascade there. PROVED means "no such shape exists in this target"; REFUTED carries the first
minimal, replayed finding as its counterexample and every finding (up to the limit) in details.
They are not in `attnws prove`'s default set (see README.md); `attnws counterexamples` lists
their findings as shapes.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from attnws.spec.families import DIMENSIONS

from .counterexamples import (
    DEFAULT_LIMIT, FOUND, NONE, SearchStatus, naive_cascade_shapes, nonmonotonic_pairs, runtime_failure_shapes,
)
from .gateway import Verdict
from .claims import claim_of
from .results import Context, ProofResult
from .session import Session

NAIVE_FAILS = "the route the cascade picks at the maximum geometry fails there, so there is nothing to exceed"


def _verdict(status: SearchStatus) -> tuple[Verdict, dict[str, Any]]:
    """Return the verdict of a findings search and the reason when it was not decided."""
    if status.state == FOUND:
        return Verdict.REFUTED, {}
    if status.state == NONE:
        return Verdict.PROVED, {}
    return Verdict.UNKNOWN, {"reason": status.reason}


Outcome = Union[str, tuple[Optional[dict[str, Any]], dict[str, Any], SearchStatus]]


def _finding(ctx: Context, theorem: str, search: Callable[[Session], Outcome]) -> ProofResult:
    """Decide a finding: VACUOUS when no shape runs (or `search` returns a vacuity reason), else
    the search's counterexample, details and status as the verdict."""
    session, claim = ctx.session(theorem), claim_of(theorem, ctx.target.op)
    outcome = ctx.emptiness(session) or search(session)
    if isinstance(outcome, str):
        return ctx.vacuous(session, theorem, claim, outcome)
    counterexample, details, status = outcome
    verdict, extra = _verdict(status)
    return ctx.result(session, theorem, claim, verdict, counterexample=counterexample,
                      details={**details, "search": status.as_dict()}, **extra)


def nonmonotonic_dispatch(ctx: Context) -> ProofResult:
    """Theorem 7: no pair p <= q (componentwise, same flags) has runtime(p) > runtime(q).
    REFUTED with the minimal pair of each discontinuity (dispatch gates that flip) otherwise."""
    def search(session: Session) -> Outcome:
        pairs, status = nonmonotonic_pairs(ctx.target, session, DEFAULT_LIMIT)
        return pairs[0].as_dict() if pairs else None, {"pairs": [p.as_dict() for p in pairs]}, status

    return _finding(ctx, "nonmonotonic_dispatch", search)


def naive_cascade(ctx: Context) -> ProofResult:
    """Theorem 8: no valid shape needs more than the cascade's choice at the maximum geometry.
    REFUTED with the minimal such shape; VACUOUS when no shape runs or that choice fails at the
    maximum (a naive estimator would declare nothing to compare with)."""
    def search(session: Session) -> Outcome:
        naive_bytes, shapes, status = naive_cascade_shapes(ctx.target, session, DEFAULT_LIMIT)
        if naive_bytes is None:
            return NAIVE_FAILS
        first = min(shapes, key=lambda f: [f.dims.get(k) or 0 for k in DIMENSIONS]) if shapes else None
        return ({**first.as_dict(), "naive_bytes": naive_bytes} if first else None,
                {"naive_bytes": naive_bytes, "shapes": [f.as_dict() for f in shapes]}, status)

    return _finding(ctx, "naive_cascade", search)


def no_runtime_failure(ctx: Context) -> ProofResult:
    """No valid shape makes dispatch pick a route on which ORT's run then fails (after allocating
    the workspace; the kinds of `attnws.spec.runtime_failures`). REFUTED with the minimal shape
    per kind."""
    def search(session: Session) -> Outcome:
        shapes, status = runtime_failure_shapes(ctx.target, session, DEFAULT_LIMIT)
        return shapes[0].as_dict() if shapes else None, {"shapes": [f.as_dict() for f in shapes]}, status

    return _finding(ctx, "no_runtime_failure", search)
