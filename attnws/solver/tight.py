"""The tight policy: ORT's aggregate without the routes proven unreachable, proven safe.

ORT sizes every route its AOT predicates keep (R), each at the maximum geometry. The tight policy
drops the routes of R that `reachability` proves no valid shape of the target dispatches to under
the declared device, build and options (an unknown TRT runner counts both outcomes, so TRT's
fallbacks are kept; an undecided route is kept), sizes the rest exactly as ORT's aggregate does
(the spec's `aggregate` at the maximum geometry, bounds mode), and proves the smaller root safe
with `safe_bound`'s query. A tight root that is not PROVED is not used: the policy falls back to
ORT's. Bytes throughout; ORT's policy stays the default of `attnws estimate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from attnws.spec.aggregate import aggregate
from attnws.spec.errors import WorkspaceError
from attnws.spec.target import Target

from .bounds import bound_holds
from .gateway import Limits, Verdict
from .results import NO_ESTIMATE, ProofResult, context
from .routes import route_witnesses

CLAIM = "runtime workspace <= the tight policy's root for every valid shape in the target"


@dataclass(frozen=True)
class TightPolicy:
    """ORT's declared root and the tight one (None where either is unavailable), the routes kept
    (attention bytes each at the maximum geometry), dropped and undecided, and the proof."""

    ort_total_bytes: int | None
    tight_total_bytes: int | None
    kept_routes: dict[str, int]
    dropped_routes: tuple[str, ...]
    undecided_routes: tuple[str, ...]
    proof: ProofResult

    @property
    def bytes_saved(self) -> int | None:
        """ORT's root minus the tight root, in bytes (None when either is unavailable)."""
        if self.ort_total_bytes is None or self.tight_total_bytes is None:
            return None
        return self.ort_total_bytes - self.tight_total_bytes

    def as_dict(self, timing: bool = True) -> dict[str, Any]:
        return {
            "ort_total_bytes": self.ort_total_bytes, "tight_total_bytes": self.tight_total_bytes,
            "bytes_saved": self.bytes_saved, "kept_routes": self.kept_routes,
            "dropped_routes": list(self.dropped_routes), "undecided_routes": list(self.undecided_routes),
            "verdict": self.proof.verdict.value, "proof": self.proof.as_dict(timing),
        }


def tight_policy(target: Target, limits: Limits | None = None) -> TightPolicy:
    """Return the tight policy of the target (see the module docstring)."""
    ctx = context(target, limits)
    witnesses = route_witnesses(ctx, ctx.session("tight_bound"))
    dropped = tuple(b.value for b in ctx.reachable if witnesses.get(b) is None)
    undecided = tuple(b.value for b in ctx.reachable if witnesses.get(b) == "unknown")
    kept = [b for b in ctx.reachable if b.value not in dropped]
    est = ctx.estimate
    ort = est.total_workspace_bytes if est.ok else None
    try:
        agg = aggregate(est.problem, kept, bounds=True) if est.ok else None
    except WorkspaceError:
        agg = None
    if agg is None:
        proof = ctx.vacuous(ctx.session("tight_bound"), "tight_bound", CLAIM, NO_ESTIMATE)
        return TightPolicy(ort, None, {}, dropped, undecided, proof)
    proof = bound_holds(ctx, agg.total_workspace_bytes, "tight_bound", CLAIM)
    tight = agg.total_workspace_bytes if proof.verdict is Verdict.PROVED else ort
    routes = {r.backend.value: r.attention_workspace_bytes for r in agg.routes}
    return TightPolicy(ort, tight, routes, dropped, undecided, proof)


def tight_report(target: Target, progress: Callable[[str], None] = lambda _: None,
                 limits: Limits | None = None) -> dict[str, Any]:
    """Return the tight policy as the JSON fields `attnws estimate --policy tight` shows beside
    ORT's: ort_total_bytes, tight_total_bytes, bytes_saved, kept / dropped routes, verdict."""
    progress(f"tight policy: proving routes unreachable in {target.name}")
    report = tight_policy(target, limits).as_dict()
    del report["proof"]
    return report
