"""The two finding theorems: `nonmonotonic_dispatch` and `naive_cascade`.

They state properties the runtime does NOT have on most realistic targets, which is why an
estimator must size every reachable route at the maximum geometry instead of replicating the
cascade there. PROVED means "no such shape exists in this target"; REFUTED carries the first
minimal, replayed finding as its counterexample and every finding (up to the limit) in details.
They are not in `attnws prove`'s default set (see README.md); `attnws counterexamples` lists
their findings as shapes.
"""

from __future__ import annotations

from typing import Any

from .counterexamples import (
    DEFAULT_LIMIT, FOUND, NONE, SearchStatus, naive_cascade_shapes, nonmonotonic_pairs, runtime_failure_shapes,
)
from .encode import DIMENSIONS
from .gateway import Verdict
from .results import Context, ProofResult

NAIVE_FAILS = "the route the cascade picks at the maximum geometry fails there, so there is nothing to exceed"


def _verdict(status: SearchStatus) -> tuple[Verdict, dict[str, Any]]:
    """Return the verdict of a findings search and the reason when it was not decided."""
    if status.state == FOUND:
        return Verdict.REFUTED, {}
    if status.state == NONE:
        return Verdict.PROVED, {}
    return Verdict.UNKNOWN, {"reason": status.reason}


def nonmonotonic_dispatch(ctx: Context) -> ProofResult:
    """Theorem 7: no pair p <= q (componentwise, same flags) has runtime(p) > runtime(q).
    REFUTED with the minimal pair of each discontinuity (dispatch gates that flip) otherwise."""
    claim = "the runtime workspace is monotone: p <= q componentwise never needs more bytes at p"
    session = ctx.session("nonmonotonic_dispatch")
    empty = ctx.emptiness(session)
    if empty:
        return ctx.vacuous(session, "nonmonotonic_dispatch", claim, empty)
    pairs, status = nonmonotonic_pairs(ctx.target, session, DEFAULT_LIMIT)
    verdict, extra = _verdict(status)
    return ctx.result(session, "nonmonotonic_dispatch", claim, verdict,
                      counterexample=pairs[0].as_dict() if pairs else None,
                      details={"pairs": [p.as_dict() for p in pairs], "search": status.as_dict()}, **extra)


def naive_cascade(ctx: Context) -> ProofResult:
    """Theorem 8: no valid shape needs more than the cascade's choice at the maximum geometry.
    REFUTED with the minimal such shape; VACUOUS when no shape runs or that choice fails at the
    maximum (a naive estimator would declare nothing to compare with)."""
    claim = "no shape needs more than the route the cascade picks at the maximum geometry"
    session = ctx.session("naive_cascade")
    empty = ctx.emptiness(session)
    if empty:
        return ctx.vacuous(session, "naive_cascade", claim, empty)
    naive_bytes, shapes, status = naive_cascade_shapes(ctx.target, session, DEFAULT_LIMIT)
    if naive_bytes is None:
        return ctx.vacuous(session, "naive_cascade", claim, NAIVE_FAILS)
    verdict, extra = _verdict(status)
    first = min(shapes, key=lambda f: [f.dims[k] or 0 for k in DIMENSIONS]) if shapes else None
    return ctx.result(session, "naive_cascade", claim, verdict,
                      counterexample={**first.as_dict(), "naive_bytes": naive_bytes} if first else None,
                      details={"naive_bytes": naive_bytes, "shapes": [f.as_dict() for f in shapes],
                               "search": status.as_dict()}, **extra)


def no_runtime_failure(ctx: Context) -> ProofResult:
    """No valid shape makes dispatch pick a backend that then has no kernel to launch (ORT's run
    fails after allocating the workspace). REFUTED with the minimal shape per head size."""
    claim = "no valid shape makes ORT pick a backend that then finds no kernel to launch"
    session = ctx.session("no_runtime_failure")
    empty = ctx.emptiness(session)
    if empty:
        return ctx.vacuous(session, "no_runtime_failure", claim, empty)
    shapes, status = runtime_failure_shapes(ctx.target, session, DEFAULT_LIMIT)
    verdict, extra = _verdict(status)
    return ctx.result(session, "no_runtime_failure", claim, verdict,
                      counterexample=shapes[0].as_dict() if shapes else None,
                      details={"shapes": [f.as_dict() for f in shapes], "search": status.as_dict()}, **extra)
