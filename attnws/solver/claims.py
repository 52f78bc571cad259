"""The theorems by name, in the order they run, each with its claim in words, and which run by
default: what the command line offers and every result says, without loading Z3 (the theorems
themselves are `attnws.solver.theorems`).
"""

from __future__ import annotations

from typing import Any

from attnws.spec.families import op_fields

# Each theorem's claim in words, over every shape of the target's box the builder accepts.
CLAIMS = {
    "safe_bound": "runtime workspace <= the AOT estimate for every valid shape in the target",
    "reachability": "every backend dispatch picks is in the estimate's reachable set; each has a witness or is proven "
                    "unreachable",
    "route_monotonicity": "on every route, growing any one dimension of a valid shape never shrinks its workspace",
    "containment": "every view lies inside its allocation, live views are disjoint, the unfused regions and the "
                   "attention offset are 256-aligned",
    "abi_domain": "every valid shape passes each reachable route's ABI checks, or the estimate is unavailable",
    "runtime_success": "every valid shape's dispatched route succeeds at run time",
    "no_runtime_failure": "no valid shape makes ORT pick a route on which its run then fails",
    "tightness": "the largest runtime workspace over the target is established, with a witness shape",
    "nonmonotonic_dispatch": "the runtime workspace is monotone: p <= q componentwise never needs more bytes at p",
    "naive_cascade": "no shape needs more than the route the cascade picks at the maximum geometry",
    "composition": "the estimate's root is the maximum of what it sizes its routes at (after PackedAttention's "
                   "align256(projection)), never their sum",
    "kernel_contract": "every buffer the kernels touch is inside its allocation, aligned and apart from the buffers "
                       "live with it; no allocation exceeds the kernels' footprint plus ORT's documented slack; every "
                       "kernel argument fits; the backend may launch",
}


def claim_of(theorem: str, op: Any) -> str:
    """Return the theorem's claim for the operator: its family's words where it has its own
    (`fields.CLAIMS`), else the shared `CLAIMS`."""
    return op_fields(op).CLAIMS.get(theorem, CLAIMS[theorem])

THEOREM_NAMES = tuple(CLAIMS)
# The findings: properties the runtime does not have on most realistic targets (run with --theorem).
FINDINGS = ("nonmonotonic_dispatch", "naive_cascade")
DEFAULT_THEOREMS = tuple(name for name in THEOREM_NAMES if name not in FINDINGS)
