"""The tight policy: the smallest reservation proven safe for every valid shape of a target.

That reservation is the proven maximum of the runtime workspace over the target (the
`tightness` search: the largest root any valid shape's dispatched route allocates, with a
minimal shape attaining it, replayed through the concrete runtime; "runtime > maximum" is unsat,
which is the safety proof). When that search is not decided the policy falls back, and says so,
to the route-dropping bound: ORT's aggregate without the routes `reachability` proves no valid
shape dispatches to (an unknown TRT runner counts both outcomes; an undecided route is kept),
sized as ORT sizes them, and proven with `safe_bound`'s query. A bound that is not PROVED is
never reported: then the reservation stays ORT's. Bytes throughout.

Memory patterns (`Target.patterns`, named sub-boxes such as decode and prefill) get a proven
maximum each, decided on the pattern's own box by the same search; `uncovered_shape` says
whether some valid shape of the target lies outside every pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from attnws.spec.estimate import estimate_over
from attnws.spec.target import Pattern, Target

from .bounds import bound_holds, max_runtime
from .domain import conj, negate
from .encode import concrete_dims, encode
from .gateway import Limits, Verdict
from .results import NO_ESTIMATE, Context, ProofResult, context, mismatch
from .routes import route_witnesses
from .session import Session

CLAIM = "runtime workspace <= the tight policy's root for every valid shape in the target"
PROVEN_MAXIMUM = "proven maximum"
ROUTE_DROPPING = "route-dropping bound"
ORT_ESTIMATE = "the estimate"


@dataclass(frozen=True)
class TightPolicy:
    """The estimate's root and the tight one (None where unavailable), how the tight one was
    found (`method`), the shape that needs it (a proven maximum is attained there), the routes
    kept (attention bytes each at the maximum geometry), dropped and undecided, and the proof."""

    ort_total_bytes: int | None
    tight_total_bytes: int | None
    method: str
    witness: dict[str, Any] | None
    kept_routes: dict[str, int]
    dropped_routes: tuple[str, ...]
    undecided_routes: tuple[str, ...]
    proof: ProofResult

    @property
    def bytes_saved(self) -> int | None:
        """The estimate's root minus the tight root, in bytes (None when either is unavailable)."""
        if self.ort_total_bytes is None or self.tight_total_bytes is None:
            return None
        return self.ort_total_bytes - self.tight_total_bytes

    @property
    def ratio(self) -> float | None:
        """The estimate's root over the tight root (None when either is unavailable or 0)."""
        if not self.ort_total_bytes or not self.tight_total_bytes:
            return None
        return round(self.ort_total_bytes / self.tight_total_bytes, 6)

    def as_dict(self, timing: bool = True) -> dict[str, Any]:
        return {
            "ort_total_bytes": self.ort_total_bytes, "tight_total_bytes": self.tight_total_bytes,
            "method": self.method, "witness": self.witness, "ratio": self.ratio, "bytes_saved": self.bytes_saved,
            "kept_routes": self.kept_routes, "dropped_routes": list(self.dropped_routes),
            "undecided_routes": list(self.undecided_routes), "verdict": self.proof.verdict.value,
            "proof": self.proof.as_dict(timing),
        }


def tight_policy(target: Target, limits: Limits | None = None, ctx: Context | None = None) -> TightPolicy:
    """Return the tight policy of the target (see the module docstring); `ctx`, the target's
    context when the caller has one (its proven maximum is then searched once)."""
    ctx = ctx or context(target, limits)
    witnesses = route_witnesses(ctx, ctx.session("tight_bound"))
    dropped = tuple(b.value for b in ctx.reachable if witnesses.get(b) is None)
    undecided = tuple(b.value for b in ctx.reachable if witnesses.get(b) == "unknown")
    kept = [b for b in ctx.reachable if b.value not in dropped]
    est = ctx.estimate
    ort = est.total_workspace_bytes if est.ok else None
    over = estimate_over(target.max_geometry(), target.config, kept) if est.ok else None
    agg = over if over is not None and over.ok else None
    routes = agg.route_bytes() if agg is not None else {}
    session = ctx.session("tight_maximum")
    empty = ctx.emptiness(session, measured=True)
    maximum = None if empty else max_runtime(ctx, session)
    if maximum is not None:
        value, witness = maximum
        proof = ctx.result(session, "tight_bound", CLAIM, Verdict.PROVED,
                           details={"bound_bytes": value, "witness": witness})
        return TightPolicy(ort, value, PROVEN_MAXIMUM, witness, routes, dropped, undecided, proof)
    if agg is None:
        proof = ctx.vacuous(ctx.session("tight_bound"), "tight_bound", CLAIM, empty or NO_ESTIMATE)
        return TightPolicy(ort, None, ORT_ESTIMATE, None, routes, dropped, undecided, proof)
    proof = bound_holds(ctx, agg.total_workspace_bytes, "tight_bound", CLAIM)
    if proof.verdict is not Verdict.PROVED:
        return TightPolicy(ort, ort, ORT_ESTIMATE, None, routes, dropped, undecided, proof)
    return TightPolicy(ort, agg.total_workspace_bytes, ROUTE_DROPPING, None, routes, dropped, undecided, proof)


def tight_report(target: Target, progress: Callable[[str], None] = lambda _: None,
                 limits: Limits | None = None) -> dict[str, Any]:
    """Return the tight policy as the JSON fields `attnws estimate --policy tight` shows beside
    the estimate's: ort_total_bytes, tight_total_bytes, method, witness, ratio, bytes_saved,
    kept / dropped routes, verdict; with `patterns` when the target declares memory patterns."""
    progress(f"tight policy: proving the largest workspace of {target.name}")
    ctx = context(target, limits)
    report = tight_policy(target, limits, ctx).as_dict()
    del report["proof"]
    if target.patterns:
        progress(f"proving the largest workspace of each memory pattern of {target.name}")
        report.update(pattern_report(target, limits, whole=ctx))
    return report


PATTERN_CLAIM = "the largest runtime workspace over the pattern's shapes is established, with a witness shape"


def pattern_maximum(target: Target, pattern: Pattern, limits: Limits | None = None,
                    whole: Context | None = None) -> ProofResult:
    """Return the proven maximum runtime workspace over one memory pattern's box (theorem
    `pattern_maximum`: the search of `tightness`, decided by the solver on the narrowed box, not by
    enumeration), with the estimate's root over the whole target beside it and the ratio.
    `whole`, the whole target's context, lends its proven maximum when a theorem already found
    it and its witness lies in the pattern: the pattern's maximum is then the same bytes at the
    same (lexicographically least) witness, which the pattern's own search would find."""
    estimate = (whole or context(target, limits)).estimate
    ctx = context(target.restrict(pattern), limits)
    session = ctx.session("pattern")
    details: dict[str, Any] = {"pattern": pattern.name, "dims": pattern.as_dict(),
                               "estimate_bytes": estimate.total_workspace_bytes if estimate.ok else None}
    empty = ctx.emptiness(session, measured=True)
    details.update(ctx.unsized_details(session))
    if empty:
        return ctx.vacuous(session, "pattern_maximum", PATTERN_CLAIM, empty, details=details)
    known = whole.memo.get("maximum") if whole is not None else None
    if known is not None and _inside(pattern, known[1]):
        ctx.memo["maximum"] = known
    found = max_runtime(ctx, session)
    if found is None:
        return ctx.result(session, "pattern_maximum", PATTERN_CLAIM, Verdict.UNKNOWN, details=details,
                          reason="the maximum search was not decided (raise --rlimit or --timeout-ms)")
    value, witness = found
    if not _inside(pattern, witness):
        raise mismatch("pattern_maximum", witness, f"the witness lies outside pattern {pattern.name}")
    estimate = details["estimate_bytes"]
    details.update(max_runtime_bytes=value, witness=witness,
                   ratio=round(estimate / value, 6) if estimate and value else None)
    return ctx.result(session, "pattern_maximum", PATTERN_CLAIM, Verdict.PROVED, details=details)


def _inside(pattern: Pattern, dims: dict[str, Any]) -> bool:
    """Whether the shape lies in the pattern's box."""
    return all(r.lo <= (dims.get(dim) or 0) <= r.hi for dim, r in pattern.dims)


def uncovered_shape(target: Target, limits: Limits | None = None) -> tuple[str, dict[str, Any] | None]:
    """Return ("none", None) when every valid running shape of the target lies in some pattern,
    ("found", dims) with a minimal shape outside all of them, or ("undecided", None)."""
    enc = encode(target)
    if enc.problem is None:
        return "none", None
    outside = [negate(conj(*(r.lo <= enc.shape.dims[dim] for dim, r in p.dims),
                           *(enc.shape.dims[dim] <= r.hi for dim, r in p.dims))) for p in target.patterns]
    constraints = [enc.valid, enc.ok, *outside]
    session = Session(f"{target.name}/patterns-cover", limits or Limits())
    answer = session.search(constraints, "-outside")
    if answer.status == "unsat":
        return "none", None
    if answer.status == "unknown":
        return "undecided", None
    model = session.minimize(constraints, enc.shape.variables, answer.model)
    return "found", concrete_dims(enc.shape, model)


def pattern_report(target: Target, limits: Limits | None = None, timing: bool = True,
                   whole: Context | None = None) -> dict[str, Any]:
    """Return `patterns` (each pattern's `pattern_maximum` result; `whole` as there) and
    `uncovered` (a shape outside every pattern, or none) as JSON fields."""
    status, witness = uncovered_shape(target, limits)
    return {"patterns": [pattern_maximum(target, p, limits, whole).as_dict(timing) for p in target.patterns],
            "uncovered": {"status": status, "witness": witness}}
