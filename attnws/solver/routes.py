"""Theorems about the routes: `reachability`, `route_monotonicity` and `abi_domain`.

A route is one backend of the cascade (PA: TRT, MEA, unfused; PMHA: Flash first). "Dispatch
picks b at p" is the encoding's `selected` term: the spec's own `cascade_gates` over the
symbolic problem (with an unknown TRT runner, both outcomes count, so TRT's fallbacks stay
reachable). R is the set ORT's AOT reachability keeps.
"""

from __future__ import annotations

from typing import Any

from attnws.spec.dispatch import dispatch
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument, WorkspaceError, WorkspaceOverflow
from attnws.spec.estimate import runtime_problem
from attnws.spec.problem import Backend
from attnws.spec.reachability import abi_scope
from attnws.spec.recipe import recipe, unsized_routes
from attnws.spec.runtime_failures import NO_ROUTE
from attnws.spec.target import Target

from .domain import conj, disj, holds_all, negate
from .counterexamples import monotone_products
from .encode import Build, build, one_dimension_apart, recipe_root_bytes, route_recipe
from .gateway import Limits, Verdict
from .claims import claim_of
from .results import SHAPE_FAILS_NO_ESTIMATE, Context, ProofResult, context, mismatch
from .session import Session


def route_witnesses(ctx: Context, session: Session) -> dict[Backend, dict[str, Any] | str | None]:
    """Return, per backend of the cascade, a minimal valid shape where dispatch picks it
    (replayed through `dispatch`), None when none exists (unsat: proven unreachable), or
    "unknown" when the query is undecided."""
    enc = ctx.encoding
    out: dict[Backend, dict[str, Any] | str | None] = {}
    for backend, route in enc.routes.items():
        premises = [enc.valid, route.selected]
        answer = session.search(premises, f"-{backend.value}")
        if answer.status != "sat":
            out[backend] = None if answer.status == "unsat" else "unknown"
            continue
        model = session.minimize(premises, enc.shape.variables, answer.model)
        dims, g = ctx.point(model)
        if backend not in dispatch(runtime_problem(g), ctx.target.config).backends:
            raise mismatch("reachability", dims, f"dispatch does not pick {backend.value}")
        out[backend] = dims
    return out


def reachability(ctx: Context) -> ProofResult:
    """Theorem 2: per backend, a witness where dispatch picks it or a proof none exists. REFUTED
    when dispatch picks a backend outside R (ORT would under-size: the witness is the
    counterexample); routes in R proven unreachable are reported as `over_approximation`."""
    claim = claim_of("reachability", ctx.target.op)
    session = ctx.session("reachability")
    empty = ctx.emptiness(session, running=False)
    if empty:
        return ctx.vacuous(session, "reachability", claim, empty)
    witnesses = route_witnesses(ctx, session)
    kept = set(ctx.reachable)
    details = {
        "ort_reachable": [b.value for b in ctx.reachable],
        "witnesses": {b.value: w for b, w in witnesses.items() if isinstance(w, dict)},
        "proven_unreachable": [b.value for b, w in witnesses.items() if w is None],
        "over_approximation": [b.value for b, w in witnesses.items() if w is None and b in kept],
    }
    missed = [b for b, w in witnesses.items() if isinstance(w, dict) and b not in kept]
    if ctx.estimate.reachability and missed:
        first = missed[0]
        counterexample = {**witnesses[first], "backend": first.value, "unreachable_in_ort": [b.value for b in missed]}
        return ctx.result(session, "reachability", claim, Verdict.REFUTED, counterexample=counterexample,
                          details=details)
    undecided = [b.value for b, w in witnesses.items() if w == "unknown"]
    if undecided:
        return ctx.result(session, "reachability", claim, Verdict.UNKNOWN,
                          reason=f"witness queries undecided for {undecided}", details=details)
    return ctx.result(session, "reachability", claim, Verdict.PROVED, details=details)


def route_monotonicity(ctx: Context) -> ProofResult:
    """Theorem 3: for every route and every dimension x: p and q equal but for x_p <= x_q (both
    valid, both built on the route) implies root_b(p) <= root_b(q): the lemma that justifies
    sizing each route at the maximum geometry. One dimension per query keeps the product terms
    linear in the varying dimension, which keeps Z3 fast and its answer stable; any p <= q
    follows by raising one dimension at a time. Each dimension is first asked for a drop one
    step long (q = p + 1, fewer free variables: where a route drops, this finds the smallest such
    step quickly), then for any drop. A query left undecided is asked again with the
    implied lemmas "every product of dimensions is monotone" (p <= q componentwise, all
    non-negative), which shorten Z3's nonlinear search where the plain query does not finish."""
    claim = claim_of("route_monotonicity", ctx.target.op)
    session = ctx.session("route_monotonicity")
    small, large = build(ctx.target, "_p"), build(ctx.target, "_q")
    empty = ctx.emptiness(session)
    if empty:
        return ctx.vacuous(session, "route_monotonicity", claim, empty)
    variables = [*small.shape.variables, *large.shape.variables]
    checked: list[str] = []
    for backend in ctx.encoding.routes:
        sides = [_route_total(side, backend, ctx.target.config) for side in (small, large)]
        if any(s is None for s in sides):
            continue
        (total_p, ok_p), (total_q, ok_q) = sides
        checked.append(backend.value)
        lemmas = monotone_products(small.shape.variables, large.shape.variables)
        for dim, a, b, same in one_dimension_apart(small.shape, large.shape):
            drop = [small.valid, large.valid, *same, ok_p, ok_q, total_p > total_q]
            step = [*drop, b == a + 1]
            answer = session.search(step, f"-{backend.value}-{dim}-step")
            if answer.status == "sat":
                model = session.minimize(step, small.shape.variables, answer.model)
                counterexample = {"dimension": dim, **_replay_pair(ctx, small, large, backend, model)}
                return ctx.result(session, "route_monotonicity", claim, Verdict.REFUTED, counterexample=counterexample)
            violation = [*drop, a <= b]
            answer = session.search(violation, f"-{backend.value}-{dim}")
            if answer.status == "unknown":
                violation += lemmas
                answer = session.search(violation, f"-{backend.value}-{dim}-lemmas")
            if answer.status == "unknown":
                return ctx.result(session, "route_monotonicity", claim, Verdict.UNKNOWN, reason=answer.reason)
            if answer.status == "sat":
                model = session.minimize(violation, variables, answer.model)
                counterexample = {"dimension": dim, **_replay_pair(ctx, small, large, backend, model)}
                return ctx.result(session, "route_monotonicity", claim, Verdict.REFUTED, counterexample=counterexample)
    return ctx.result(session, "route_monotonicity", claim, Verdict.PROVED, details={"routes": checked})


def _route_total(side: Build, backend: Backend, config: Any) -> tuple[Any, Any] | None:
    r, obligations = route_recipe(side.domain, side.problem, backend, True, config)
    if r is None:
        return None
    start = side.domain.mark()
    total = recipe_root_bytes(side.domain, r)
    return total, holds_all([*obligations, *side.domain.since(start)])


def _replay_pair(ctx: Context, small: Build, large: Build, backend: Backend, model: dict[str, Any]) -> dict[str, Any]:
    sides = []
    for side in (small, large):
        dims, g = ctx.point(model, side.shape)
        r = recipe(runtime_problem(g), backend, trt_runner_available=True, config=ctx.target.config)
        sides.append((dims, recipe_root_bytes(CONCRETE, r)))
    (p_dims, p_bytes), (q_dims, q_bytes) = sides
    if p_bytes <= q_bytes:
        raise mismatch("route_monotonicity", p_dims, f"{backend.value}: {p_bytes} <= {q_bytes} at {q_dims}")
    return {"backend": backend.value, "smaller": {**p_dims, "bytes": p_bytes}, "larger": {**q_dims, "bytes": q_bytes}}


# The estimate errors that are a check failing (an int32 / size_t limit), not a route ORT cannot size.
ABI_ERRORS = (InvalidArgument.status, WorkspaceOverflow.status)


def abi_domain(ctx: Context) -> ProofResult:
    """Theorem 5: every valid shape passes the checks (int32 / int64 / gridDim / size_t) of every
    route in R, sized as ORT's bounds aggregate sizes it (no route gates), wherever the family
    says the estimate sizes the route (`attnws.spec.reachability.abi_scope`: every shape for the
    packed operators and MultiHeadAttention; where the route's own gates admit it for
    GroupQueryAttention); or the first failing shape (lexicographically minimal, replayed) is
    returned and ORT's estimate is unavailable.
    The first is PROVED; the second holds only because the estimate is unavailable: VACUOUS,
    with the failing shape in the details. REFUTED when a shape fails and ORT still declares an
    estimate, or when ORT's estimate fails a check although no shape of the target does."""
    claim = claim_of("abi_domain", ctx.target.op)
    session = ctx.session("abi_domain")
    empty = ctx.emptiness(session, running=False)
    if empty:
        return ctx.vacuous(session, "abi_domain", claim, empty)
    side = build(ctx.target)
    failing: list[Any] = []
    unsized = unsized_routes(ctx.target.op)
    for backend in ctx.reachable:
        if backend in unsized:
            continue
        if side.problem is None:
            failing.append(True)
            continue
        scope = abi_scope(side.domain, side.problem, ctx.target.config, backend)
        r, obligations = route_recipe(side.domain, side.problem, backend, scope, ctx.target.config, route_gates=False)
        failing.append(scope if r is None else conj(scope, negate(holds_all(obligations))))
    violation = [side.valid, disj(*failing)]
    answer = session.search(violation)
    if answer.status == "unknown":
        return ctx.result(session, "abi_domain", claim, Verdict.UNKNOWN, reason=answer.reason)
    est = ctx.estimate
    if answer.status == "unsat":
        if not est.ok and est.error in ABI_ERRORS:
            counterexample = {**ctx.max_dims(), "estimate": est.error, "message": est.message}
            return ctx.result(session, "abi_domain", claim, Verdict.REFUTED, counterexample=counterexample)
        return ctx.result(session, "abi_domain", claim, Verdict.PROVED, details={"first_failing": None})
    model = session.minimize(violation, side.shape.variables, answer.model)
    first = _replay_failure(ctx, model)
    if est.ok:
        return ctx.result(session, "abi_domain", claim, Verdict.REFUTED,
                          counterexample={**first, "estimate_bytes": est.total_workspace_bytes})
    return ctx.vacuous(session, "abi_domain", claim, SHAPE_FAILS_NO_ESTIMATE, details={"first_failing": first})


def _replay_failure(ctx: Context, model: dict[str, Any]) -> dict[str, Any]:
    """Return the first route of R whose concrete recipe fails at the model, and its error."""
    dims, g = ctx.point(model)
    problem = runtime_problem(g)
    unsized = unsized_routes(ctx.target.op)
    for backend in ctx.reachable:
        if backend in unsized or not abi_scope(CONCRETE, problem, ctx.target.config, backend):
            continue
        try:
            recipe(problem, backend, trt_runner_available=True, route_gates=False, config=ctx.target.config)
        except WorkspaceError as error:
            return {**dims, "route": backend.value, "error": error.status, "message": str(error)}
    raise mismatch("abi_domain", dims, "every reachable route's recipe succeeds concretely")


def runtime_success(ctx: Context) -> ProofResult:
    """Every valid shape's dispatched route succeeds (its recipe passes every check ORT makes at
    run time). REFUTED with the first failing shape (minimal, replayed) while ORT declares an
    estimate for the target; when ORT declares none, the failing shape is why: VACUOUS (the
    claim holds only because nothing is estimated), with the shape in the details."""
    claim = claim_of("runtime_success", ctx.target.op)
    session = ctx.session("runtime_success")
    empty = ctx.emptiness(session, running=False)
    if empty:
        return ctx.vacuous(session, "runtime_success", claim, empty)
    enc = ctx.encoding
    violation = [enc.valid, negate(enc.ok)]
    answer = session.search(violation)
    if answer.status == "unsat":
        return ctx.result(session, "runtime_success", claim, Verdict.PROVED)
    if answer.status == "unknown":
        return ctx.result(session, "runtime_success", claim, Verdict.UNKNOWN, reason=answer.reason)
    model = session.minimize(violation, enc.shape.variables, answer.model)
    first = _replay_runtime_failure(ctx, model)
    if ctx.estimate.ok:
        return ctx.result(session, "runtime_success", claim, Verdict.REFUTED,
                          counterexample={**first, "estimate_bytes": ctx.estimate.total_workspace_bytes})
    return ctx.vacuous(session, "runtime_success", claim, SHAPE_FAILS_NO_ESTIMATE,
                       details={"first_failing": first})


def _replay_runtime_failure(ctx: Context, model: dict[str, Any]) -> dict[str, Any]:
    """Return the dispatched route whose concrete recipe fails at the model, and its error."""
    dims, g = ctx.point(model)
    problem = runtime_problem(g)
    outcome = dispatch(problem, ctx.target.config)
    if outcome.failure_kind == NO_ROUTE:
        return {**dims, "route": None, "error": NO_ROUTE, "message": outcome.failure}
    for backend in outcome.backends:
        try:
            recipe(problem, backend, trt_runner_available=True, config=ctx.target.config)
        except WorkspaceError as error:
            return {**dims, "route": backend.value, "error": error.status, "message": str(error)}
    raise mismatch("runtime_success", dims, "the dispatched route's recipe succeeds concretely")


def dispatch_report(target: Target, limits: Limits | None = None) -> dict[str, dict[str, Any]]:
    """Return, per backend of the target's cascade, whether dispatch picks it for some valid shape
    of the box: {"dispatched": true, "witness": dims} (a minimal shape, replayed through
    `dispatch`), {"dispatched": false} (proven: no shape), or {"dispatched": null} (undecided).
    What `attnws estimate` shows beside the routes ORT's estimate sizes."""
    ctx = context(target, limits)
    session = ctx.session("dispatch")
    if ctx.encoding.problem is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for backend, witness in route_witnesses(ctx, session).items():
        if isinstance(witness, dict):
            out[backend.value] = {"dispatched": True, "witness": witness}
        else:
            out[backend.value] = {"dispatched": None if witness == "unknown" else False}
    return out
