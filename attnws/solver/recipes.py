"""Theorems about the dispatched route's recipe: `containment` and the extra `kernel_contract`.

Each is "for every valid shape whose dispatched recipe succeeds, the recipe satisfies these
conditions", the conditions being evaluated over the symbolic recipe for the query and over the
concrete recipe on replay: the same functions, in the two domains.
"""

from __future__ import annotations

from typing import Any, Callable

from attnws.spec.aggregate import root_layout
from attnws.spec.containment import aligned_quantities, disjoint, view_pairs
from attnws.spec.dispatch import dispatch
from attnws.spec.domain import CONCRETE
from attnws.spec.estimate import runtime_problem
from attnws.spec.layout import ATTENTION, PROJECTION, Recipe, views
from attnws.spec.limits import WORKSPACE_ALIGNMENT
from attnws.spec.recipe import recipe
from attnws.spec.target import Target

from .contract import kernel_conditions
from .domain import SymbolicDomain, conj, holds_all, negate
from .gateway import Verdict
from .claims import claim_of
from .results import Context, ProofResult, mismatch

Conditions = Callable[[Any, Any, Recipe, Target], list[tuple[str, Any]]]


def layout_sound(d: Any, p: Any, r: Recipe, target: Target) -> list[tuple[str, Any]]:
    """Return (name, cond): each view inside its allocation, each live pair disjoint, the unfused
    scratch regions 256-aligned, and in the root (`root_layout`) the attention offset 256-aligned
    and the projection [0, P) disjoint from the attention workspace [offset, offset + A)."""
    sizes = {PROJECTION: r.projection_bytes, ATTENTION: r.attention_workspace_bytes, **dict(r.allocations())}
    conds = [(f"{v.name} inside {v.allocation}", d.all_(v.offset >= 0, v.end <= sizes[v.allocation])) for v in views(r)]
    conds += [(f"{a.name} and {b.name} disjoint", disjoint(d, a, b)) for a, b in view_pairs(r)]
    conds += [(f"{name} is a multiple of {WORKSPACE_ALIGNMENT}", d.mod(value, WORKSPACE_ALIGNMENT) == 0)
              for name, value in aligned_quantities(r)]
    projection, attention = r.projection_bytes, r.attention_workspace_bytes
    offset, total = root_layout(projection, attention, d)
    conds += [
        (f"attention offset is a multiple of {WORKSPACE_ALIGNMENT}", d.mod(offset, WORKSPACE_ALIGNMENT) == 0),
        ("projection and attention disjoint in the root", d.any_(projection == 0, attention == 0, offset >= projection)),
        ("attention inside the root", offset + attention <= total),
    ]
    return conds


def route_property(ctx: Context, theorem: str, conditions: Conditions) -> ProofResult:
    """Decide "the dispatched recipe satisfies conditions" over the target: per route, one query
    for all its conditions, and where that one is not unsat, one query per condition (each small,
    with its own budget); the first violation found is minimized and replayed concretely.
    UNKNOWN names the conditions left undecided."""
    enc, claim = ctx.encoding, claim_of(theorem, ctx.target.op)
    session = ctx.session(theorem)
    empty = ctx.emptiness(session)
    if empty:
        return ctx.vacuous(session, theorem, claim, empty)

    def replay(model: dict[str, Any]) -> dict[str, Any]:
        dims, g = ctx.point(model)
        problem = runtime_problem(g)
        failing: list[str] = []
        for backend in dispatch(problem, ctx.target.config).backends:
            r = recipe(problem, backend, trt_runner_available=True, config=ctx.target.config)
            failing += [f"{backend.value}: {name}" for name, cond in conditions(CONCRETE, problem, r, ctx.target)
                        if not cond]
        if not failing:
            raise mismatch(theorem, dims, "every condition holds concretely")
        return {**dims, "failing": failing}

    undecided: list[str] = []
    for route in enc.routes.values():
        if route.recipe is None:
            continue
        runs = [enc.valid, route.selected, holds_all(route.obligations)]
        named = conditions(SymbolicDomain(), enc.problem, route.recipe, ctx.target)
        if session.search([*runs, negate(conj(*(cond for _, cond in named)))], f"-{route.backend.value}-all").status \
                == "unsat":
            continue
        for name, cond in named:
            violation = [*runs, negate(cond)]
            answer = session.search(violation, f"-{route.backend.value}")
            if answer.status == "unknown":
                undecided.append(f"{route.backend.value}: {name} ({answer.reason})")
            elif answer.status == "sat":
                model = session.minimize(violation, enc.shape.variables, answer.model)
                return ctx.result(session, theorem, claim, Verdict.REFUTED, counterexample=replay(model))
    if undecided:
        return ctx.result(session, theorem, claim, Verdict.UNKNOWN,
                          reason=f"{len(undecided)} condition(s) undecided: " + "; ".join(undecided))
    return ctx.result(session, theorem, claim, Verdict.PROVED)


def containment(ctx: Context) -> ProofResult:
    """Theorem 4: every view of the dispatched recipe lies inside its allocation, live views are
    pairwise disjoint, the unfused regions and the PA attention offset are 256-aligned."""
    return route_property(ctx, "containment", layout_sound)


def kernel_contract(ctx: Context) -> ProofResult:
    """Extra: the dispatched recipe serves the footprint its kernels are stated to touch
    (`attnws.spec.footprint`, independent of the recipes; see `contract.kernel_conditions`)."""
    return route_property(ctx, "kernel_contract", kernel_conditions)
