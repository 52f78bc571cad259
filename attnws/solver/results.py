"""What every theorem shares: the result record, the per-target context and the decision step.

A theorem is "for every shape in the target's box that the builder accepts, ...", decided by
asking the gateway for a shape violating it: unsat is PROVED, sat is REFUTED and the (minimized)
shape is replayed through the concrete spec before it is reported (a disagreement raises
`EncodingMismatch`), unknown is UNKNOWN with Z3's reason. ORT's estimate E is the concrete
`estimate_geometry(target.max_geometry(), target.config)`; R is its reachable route set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from attnws.spec.errors import EncodingMismatch
from attnws.spec.estimate import Estimate, estimate_geometry
from attnws.spec.hints import Geometry
from attnws.spec.problem import Backend
from attnws.spec.target import Target

from .encode import Encoding, Shape, concrete_dims, concrete_geometry, encode
from .gateway import Limits, Verdict
from .session import Session


@dataclass(frozen=True, slots=True)
class ProofResult:
    """One theorem on one target. `counterexample` (dimensions plus replayed bytes) is present
    exactly when REFUTED, `reason` (Z3's) exactly when UNKNOWN; seconds are wall time, rlimit
    Z3 resource units; `details` holds witnesses, byte counts and ratios."""

    theorem: str
    claim: str
    target: str
    verdict: Verdict
    counterexample: dict[str, Any] | None = None
    reason: str = ""
    seconds: float = 0.0
    rlimit: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.counterexample is not None) != (self.verdict is Verdict.REFUTED):
            raise EncodingMismatch(f"{self.theorem}: a counterexample must come exactly with REFUTED")
        if bool(self.reason) != (self.verdict is Verdict.UNKNOWN):
            raise EncodingMismatch(f"{self.theorem}: a reason must come exactly with UNKNOWN")

    def as_dict(self, timing: bool = True) -> dict[str, Any]:
        """Return the result as JSON data (without seconds and rlimit when timing is False)."""
        out = {
            "theorem": self.theorem, "claim": self.claim, "target": self.target,
            "verdict": self.verdict.value, "counterexample": self.counterexample, "reason": self.reason,
            "details": self.details,
        }
        if timing:
            out.update(seconds=round(self.seconds, 3), rlimit=self.rlimit)
        return out


def combined_verdict(results: list[ProofResult]) -> Verdict:
    """Return the worst verdict of the results (PROVED for none)."""
    return Verdict.worst(r.verdict for r in results)


@dataclass(frozen=True)
class Context:
    """What every theorem on one target shares: the encoding, ORT's estimate E, the limits."""

    target: Target
    encoding: Encoding
    estimate: Estimate
    limits: Limits

    @property
    def reachable(self) -> tuple[Backend, ...]:
        """R: the backends ORT's AOT reachability keeps for the target."""
        return tuple(v.backend for v in self.estimate.reachability if v.reachable)

    def max_dims(self) -> dict[str, Any]:
        """Return the dimensions of the maximum geometry, keyed as counterexamples are."""
        g = self.target.max_geometry()
        return {"batch": g.batch, "seq": g.seq, "heads": g.heads, "head_size": g.head_size,
                "v_head_size": g.v_head_size, "tokens": g.t, "input_hidden": g.input_hidden}

    def session(self, theorem: str) -> Session:
        """Return a fresh session named after the target and theorem."""
        return Session(f"{self.target.name}/{theorem}", self.limits)

    def point(self, model: dict[str, Any], shape: Shape | None = None) -> tuple[dict[str, Any], Geometry]:
        """Return (dimensions, concrete geometry) of a model of the shape (default: the encoding's)."""
        dims = concrete_dims(shape or self.encoding.shape, model)
        return dims, concrete_geometry(self.target, dims)

    def result(self, session: Session, theorem: str, claim: str, verdict: Verdict, **extra: Any) -> ProofResult:
        """Return a result carrying the session's time and rlimit."""
        return ProofResult(theorem, claim, self.target.name, verdict, seconds=session.seconds,
                           rlimit=session.rlimit, **extra)


def context(target: Target, limits: Limits | None = None) -> Context:
    """Return the shared context of the theorems for the target."""
    return Context(target, encode(target), estimate_geometry(target.max_geometry(), target.config), limits or Limits())


Replay = Callable[[dict[str, Any]], dict[str, Any]]


def mismatch(theorem: str, dims: dict[str, Any], what: str) -> EncodingMismatch:
    """Return the error raised when the concrete spec disagrees with a model."""
    return EncodingMismatch(f"{theorem}: the concrete spec disagrees with the model at {dims}: {what}")


def decide(ctx: Context, theorem: str, claim: str, violation: list[Any], variables: list[Any], replay: Replay,
           session: Session | None = None, details: dict[str, Any] | None = None) -> ProofResult:
    """Search for a shape satisfying `violation`; return PROVED, UNKNOWN or the replayed,
    minimized counterexample. `replay(model)` returns the counterexample record or raises
    EncodingMismatch when the concrete spec disagrees."""
    session = session or ctx.session(theorem)
    answer = session.search(violation)
    if answer.status == "unsat":
        return ctx.result(session, theorem, claim, Verdict.PROVED, details=details or {})
    if answer.status == "unknown":
        return ctx.result(session, theorem, claim, Verdict.UNKNOWN, reason=answer.reason, details=details or {})
    model = session.minimize(violation, variables, answer.model)
    return ctx.result(session, theorem, claim, Verdict.REFUTED, counterexample=replay(model), details=details or {})


def no_estimate(ctx: Context) -> dict[str, Any]:
    """Return the details of a claim that is vacuous because ORT declares no estimate (status
    unavailable: ORT returns nullopt and nothing is bounded); `abi_domain` decides whether the
    unavailability is justified."""
    return {"vacuous": True, "estimate": ctx.estimate.status, "error": ctx.estimate.error,
            "message": ctx.estimate.message}
