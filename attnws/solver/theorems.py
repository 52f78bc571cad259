"""The theorem registry: the issue's eight theorems, two extras, and which run by default.

1. safe_bound (bounds): the runtime workspace never exceeds ORT's estimate E.
2. reachability (routes): per backend a witness or a proof none exists; dispatch stays inside R.
3. route_monotonicity (routes): each route's bytes grow with every dimension.
4. containment (recipes): views inside allocations, disjoint, 256-aligned regions and offset.
5. abi_domain (routes): every shape passes R's ABI checks, or the estimate is unavailable.
5b. runtime_success (routes): every valid shape's dispatched route succeeds, or the estimate is
    unavailable and the first failing shape is shown.
5c. no_runtime_failure (findings): no valid shape makes dispatch pick the TRT runner and then find
    no kernel (ORT's run fails); REFUTED with the minimal shape per head size.
6. tightness (bounds): the true maximum runtime, its witness and E / maximum.
7. nonmonotonic_dispatch (findings): no p <= q with runtime(p) > runtime(q).
8. naive_cascade (findings): no shape needs more than the cascade's choice at the maximum.
Extras: composition (bounds: E is align256(projection) + max, never a sum, of its routes) and
kernel_contract (recipes: the recipe places every buffer of the kernels' footprint, stated
independently in `attnws.spec.footprint`, inside its allocation, aligned and apart from every
buffer live with it, reserves no more than the footprint plus ORT's documented slack, and the
kernels' integer arguments fit). Every theorem is VACUOUS, never PROVED, when it holds only
because no shape is valid, none runs, or ORT declares no estimate.

`DEFAULT_THEOREMS` (what `attnws prove` runs without --theorem) are the safety claims, 1-6 and the
extras; 7 and 8 are findings, REFUTED on most realistic targets, run with `--theorem NAME` or
`--theorem all` and listed as shapes by `attnws counterexamples`.
"""

from __future__ import annotations

from typing import Callable, Iterator

from attnws.spec.errors import InternalError
from attnws.spec.families import op_fields
from attnws.spec.target import Target

from .bounds import composition, safe_bound, tightness
from .findings import naive_cascade, no_runtime_failure, nonmonotonic_dispatch
from .gateway import Limits, Verdict
from .recipes import containment, kernel_contract
from .claims import DEFAULT_THEOREMS, FINDINGS, THEOREM_NAMES, claim_of
from .results import Context, ProofResult, combined_verdict, context
from .routes import abi_domain, reachability, route_monotonicity, runtime_success

THEOREMS: dict[str, Callable[[Context], ProofResult]] = {
    "safe_bound": safe_bound,
    "reachability": reachability,
    "route_monotonicity": route_monotonicity,
    "containment": containment,
    "abi_domain": abi_domain,
    "runtime_success": runtime_success,
    "no_runtime_failure": no_runtime_failure,
    "tightness": tightness,
    "nonmonotonic_dispatch": nonmonotonic_dispatch,
    "naive_cascade": naive_cascade,
    "composition": composition,
    "kernel_contract": kernel_contract,
}
if tuple(THEOREMS) != THEOREM_NAMES:
    raise InternalError("the theorems and their claims (attnws.solver.claims) name different theorems")


def run_theorems(target: Target, limits: Limits | None = None, names: list[str] | None = None,
                 ctx: Context | None = None) -> Iterator[ProofResult]:
    """Yield the result of each named theorem (DEFAULT_THEOREMS when None) on the target as it is
    decided, in THEOREMS order (`ctx`: the target's context, when the caller keeps it for the
    patterns). Each decides its own queries: its verdict does not depend on which theorems ran
    before it."""
    wanted = set(DEFAULT_THEOREMS if names is None else names)
    ctx = ctx or context(target, limits)
    exempt = op_fields(target.op).NOT_APPLICABLE
    for name in THEOREMS:
        if name in exempt and name in wanted:
            yield ProofResult(name, claim_of(name, target.op), target.name, Verdict.NOT_APPLICABLE, reason=exempt[name],
                              op=target.op.value)
        elif name in wanted:
            yield THEOREMS[name](ctx)


def prove_target(target: Target, limits: Limits | None = None, names: list[str] | None = None) -> list[ProofResult]:
    """Return the results of the named theorems (DEFAULT_THEOREMS when None) on the target, in
    THEOREMS order."""
    return list(run_theorems(target, limits, names))


__all__ = ["DEFAULT_THEOREMS", "FINDINGS", "THEOREMS", "Context", "ProofResult", "combined_verdict", "context",
           "prove_target", "run_theorems"]
