"""Theorems about the size of the root: `safe_bound`, `tightness` and the extra `composition`.

Bytes throughout. The runtime workspace of a shape is what ORT allocates there: the spec's
`root_layout` total of the route `dispatch` picks (the larger of both outcomes when the TRT
runner is unknown), 0 when the output is empty.
"""

from __future__ import annotations

from typing import Any

import z3

from attnws.spec.aggregate import root_layout
from attnws.spec.domain import CONCRETE
from attnws.spec.estimate import estimate_exact
from attnws.spec.limits import SIZE_MAX

from .domain import conj, negate
from .encode import corner_models, evaluate
from .gateway import Verdict
from .claims import claim_of
from .results import NO_ESTIMATE, Context, ProofResult, decide, decide_unless_empty, mismatch
from .session import Session


def bound_holds(ctx: Context, bound: int, theorem: str, claim: str) -> ProofResult:
    """Decide "runtime root <= bound bytes for every valid shape whose dispatched recipe
    succeeds"; a counterexample is the minimal shape needing more, replayed with `estimate_exact`."""
    enc = ctx.encoding

    def replay(model: dict[str, Any]) -> dict[str, Any]:
        dims, g = ctx.point(model)
        exact = estimate_exact(g, ctx.target.config)
        if not exact.ok or exact.total_workspace_bytes <= bound \
                or exact.total_workspace_bytes != evaluate(enc.runtime_bytes, enc.shape, model):
            raise mismatch(theorem, dims, f"runtime {exact.total_workspace_bytes} ({exact.status})")
        return {**dims, "runtime_bytes": exact.total_workspace_bytes, "bound_bytes": bound,
                "backends": [b.value for b in exact.backends]}

    return decide_unless_empty(ctx, theorem, claim, [enc.measured, enc.runtime_bytes > bound],
                               enc.shape.variables, replay, details={"bound_bytes": bound}, measured=True)


def safe_bound(ctx: Context) -> ProofResult:
    """Theorem 1: every valid shape's runtime root is <= ORT's estimate E. VACUOUS when ORT
    declares no estimate (nothing is bounded) or no valid shape runs."""
    claim = claim_of("safe_bound", ctx.target.op)
    if not ctx.estimate.ok:
        return ctx.vacuous(ctx.session("safe_bound"), "safe_bound", claim, NO_ESTIMATE)
    return bound_holds(ctx, ctx.estimate.total_workspace_bytes, "safe_bound", claim)


def max_runtime(ctx: Context, session: Session) -> tuple[int, dict[str, Any]] | None:
    """Return (the largest runtime root over the valid shapes of the target, a minimal shape
    attaining it, replayed), or None when the target has no valid shape or a query is undecided.
    The search runs once per context (`tightness`, the tight policy and the patterns share it;
    its answer is a function of the target and the limits alone, so reusing it changes nothing
    but the time): the session that ran it carries its cost."""
    if "maximum" not in ctx.memo:
        ctx.memo["maximum"] = _search_maximum(ctx, session)
    return ctx.memo["maximum"]


def _search_maximum(ctx: Context, session: Session) -> tuple[int, dict[str, Any]] | None:
    enc = ctx.encoding
    premises = [enc.measured]
    uppers = [ctx.estimate.total_workspace_bytes] if ctx.estimate.ok else []
    found = session.maximize(enc.runtime_bytes, premises, [*uppers, SIZE_MAX], lambda t, m: evaluate(t, enc.shape, m),
                             seeds=corner_models(enc.shape))
    if found is None:
        return None
    value, model = found
    model = session.minimize([*premises, enc.runtime_bytes == value], enc.shape.variables, model)
    dims, g = ctx.point(model)
    exact = estimate_exact(g, ctx.target.config)
    if exact.total_workspace_bytes != value:
        raise mismatch("tightness", dims, f"runtime {exact.total_workspace_bytes} != {value}")
    return value, {**dims, "backends": [b.value for b in exact.backends]}


def tightness(ctx: Context) -> ProofResult:
    """Theorem 6: the true maximum runtime root over the target, with a minimal witness, and the
    ratio E / maximum. PROVED when the maximum is established ("runtime > maximum" is unsat and
    the witness attains it); UNKNOWN when a query is undecided; VACUOUS when no valid shape runs."""
    claim = claim_of("tightness", ctx.target.op)
    session = ctx.session("tightness")
    empty = ctx.emptiness(session, measured=True)
    left_out = ctx.unsized_details(session)
    if empty:
        return ctx.vacuous(session, "tightness", claim, empty, details=left_out)
    found = max_runtime(ctx, session)
    if found is None:
        return ctx.result(session, "tightness", claim, Verdict.UNKNOWN, reason="the maximum search was not decided",
                          details=left_out)
    value, witness = found
    estimate = ctx.estimate.total_workspace_bytes if ctx.estimate.ok else None
    ratio = round(estimate / value, 6) if estimate is not None and value else None
    return ctx.result(session, "tightness", claim, Verdict.PROVED, details={
        "max_runtime_bytes": value, "witness": witness, "estimate_bytes": estimate, "ratio": ratio, **left_out})


def composition(ctx: Context) -> ProofResult:
    """Extra: E = align256(projection) + max over its routes' attention bytes, every route
    agreeing on the projection (a maximum, never a sum: the routes are mutually exclusive).
    Recomputed from the route recipes the estimate reports, not by the aggregate's own max."""
    claim = claim_of("composition", ctx.target.op)
    est = ctx.estimate
    if not est.ok:
        return ctx.vacuous(ctx.session("composition"), "composition", claim, NO_ESTIMATE)
    routes = est.route_bytes()
    attention = max(routes.values(), default=0)
    expected = root_layout(est.projection_bytes, attention, CONCRETE)[1]
    holds = conj(*(z3.IntVal(r.projection_bytes) == est.projection_bytes for r in est.routes),
                 z3.IntVal(est.attention_workspace_bytes) == attention, z3.IntVal(est.total_workspace_bytes) == expected)

    def replay(model: dict[str, Any]) -> dict[str, Any]:
        return {**ctx.max_dims(), "ort_total_bytes": est.total_workspace_bytes, "expected_total_bytes": expected,
                "routes": routes}

    return decide(ctx, "composition", claim, [negate(holds)], [], replay,
                  details={"ort_total_bytes": est.total_workspace_bytes, "routes": list(routes),
                           "route_bytes": routes})
