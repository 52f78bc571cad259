"""What every theorem shares: the result record, the per-target context and the decision step.

A theorem is "for every shape in the target's box that the builder accepts, ...", decided by
asking the gateway for a shape violating it: unsat is PROVED, sat is REFUTED and the (minimized)
shape is replayed through the concrete spec before it is reported (a disagreement raises
`EncodingMismatch`), unknown is UNKNOWN with Z3's reason. A claim that holds only because no
shape of the target is valid, none runs, or ORT declares no estimate is VACUOUS (never PROVED),
with the reason in `vacuous_because`. ORT's estimate E is the concrete
`estimate_geometry(target.max_geometry(), target.config)`; R is its reachable route set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from attnws.spec.errors import EncodingMismatch
from attnws.spec.dispatch import dispatch
from attnws.spec.estimate import Estimate, estimate_geometry, runtime_problem
from attnws.spec.families import op_dimensions
from attnws.spec.hints import Geometry
from attnws.spec.problem import Backend
from attnws.spec.target import Target

from .encode import Encoding, Shape, concrete_dims, concrete_geometry, encode
from .gateway import Limits, Verdict
from .second_opinion import DISAGREEMENT, Opinion, second_opinion
from .session import Session
from attnws.spec.families import shape_words


@dataclass(frozen=True, slots=True)
class ProofResult:
    """One theorem on one target. `counterexample` (dimensions plus replayed bytes) is present
    exactly when REFUTED, `reason` exactly when UNKNOWN (Z3's) or NOT_APPLICABLE (why the theorem
    says nothing of the family), `vacuous_because` exactly when VACUOUS. `expected` (with `expected_because`, the target's words) when the target declares
    the outcome: its estimate unavailable and that is why the result is VACUOUS, or the theorem
    REFUTED by a true property of ORT (`Target.expect_refuted`: a finding, not a failure);
    seconds are wall time, rlimit Z3 resource units; `details` holds witnesses, byte counts and
    ratios."""

    theorem: str
    claim: str
    target: str
    verdict: Verdict
    counterexample: dict[str, Any] | None = None
    reason: str = ""
    seconds: float = 0.0
    rlimit: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    vacuous_because: str = ""
    expected: bool = False
    opinion: Opinion | None = None
    op: str = ""
    expected_because: str = ""

    def __post_init__(self) -> None:
        if (self.counterexample is not None) != (self.verdict is Verdict.REFUTED):
            raise EncodingMismatch(f"{self.theorem}: a counterexample must come exactly with REFUTED")
        if bool(self.reason) != (self.verdict in (Verdict.UNKNOWN, Verdict.NOT_APPLICABLE)):
            raise EncodingMismatch(f"{self.theorem}: a reason must come exactly with UNKNOWN or NOT_APPLICABLE")
        if bool(self.vacuous_because) != (self.verdict is Verdict.VACUOUS):
            raise EncodingMismatch(f"{self.theorem}: a vacuity reason must come exactly with VACUOUS")
        if self.expected != bool(self.expected_because) or (self.expected and self.verdict not in EXPECTABLE):
            raise EncodingMismatch(f"{self.theorem}: only a VACUOUS or REFUTED result is expected, and with why")

    @property
    def failing_verdict(self) -> Verdict:
        """The verdict for the exit code: an expected VACUOUS or REFUTED counts as PROVED, a
        disagreement of the second solver as REFUTED."""
        if self.opinion is not None and self.opinion.verdict == DISAGREEMENT:
            return Verdict.REFUTED
        return Verdict.PROVED if self.expected or self.verdict is Verdict.NOT_APPLICABLE else self.verdict

    def as_dict(self, timing: bool = True) -> dict[str, Any]:
        """Return the result as JSON data (without seconds and rlimit when timing is False)."""
        out = {
            "theorem": self.theorem, "claim": self.claim, "target": self.target,
            "verdict": self.verdict.value, "counterexample": self.counterexample, "reason": self.reason,
            "vacuous_because": self.vacuous_because, "expected": self.expected,
            "expected_because": self.expected_because, "details": self.details,
        }
        if self.opinion is not None:
            out["second_opinion"] = self.opinion.as_dict(timing)
        if timing:
            out.update(seconds=round(self.seconds, 3), rlimit=self.rlimit)
        return out


EXPECTABLE = (Verdict.VACUOUS, Verdict.REFUTED)
DECLARED_UNAVAILABLE = "the target declares ORT's estimate unavailable"


def combined_verdict(results: list[ProofResult]) -> Verdict:
    """Return the worst verdict of the results for the exit code (PROVED for none; an expected
    VACUOUS counts as PROVED)."""
    return Verdict.worst(r.failing_verdict for r in results)


NO_VALID_SHAPE = "no shape of the target is valid (the builder rejects every one)"
NO_RUNNING_SHAPE = "no valid shape of the target runs (every dispatched route fails its checks)"
UNSIZED_ONLY = "every valid shape that runs takes a route whose workspace no recipe states"
NO_ESTIMATE = "ORT declares no estimate for the target (unavailable), so there is no bound to check"
SHAPE_FAILS_NO_ESTIMATE = ("a valid shape fails its checks, which is why ORT declares no estimate (unavailable): "
                           "the claim holds only through that")
# The reasons a target that declares its estimate unavailable expects (ORT's estimate is
# unavailable exactly where a route it keeps has no recipe, or a shape fails).
ESTIMATE_REASONS = (NO_ESTIMATE, SHAPE_FAILS_NO_ESTIMATE, UNSIZED_ONLY)


@dataclass(frozen=True)
class Context:
    """What every theorem on one target shares: the encoding, ORT's estimate E, the limits."""

    target: Target
    encoding: Encoding
    estimate: Estimate
    limits: Limits
    memo: dict[str, Any] = field(default_factory=dict, compare=False)  # searches several theorems share

    @property
    def reachable(self) -> tuple[Backend, ...]:
        """R: the backends ORT's AOT reachability keeps for the target."""
        return tuple(v.backend for v in self.estimate.reachability if v.reachable)

    def max_dims(self) -> dict[str, Any]:
        """Return the dimensions of the maximum geometry, keyed as counterexamples are."""
        g = self.target.max_geometry()
        every = {"tokens": g.t, "kv_seq": g.l}
        return {name: every[name] if name in every else getattr(g, name) for name in op_dimensions(self.target.op)}

    def session(self, theorem: str) -> Session:
        """Return a fresh session named after the target and theorem."""
        return Session(f"{self.target.name}/{theorem}", self.limits)

    def point(self, model: dict[str, Any], shape: Shape | None = None) -> tuple[dict[str, Any], Geometry]:
        """Return (dimensions, concrete geometry) of a model of the shape (default: the encoding's)."""
        dims = concrete_dims(shape or self.encoding.shape, model)
        return dims, concrete_geometry(self.target, dims)

    def result(self, session: Session, theorem: str, claim: str, verdict: Verdict, **extra: Any) -> ProofResult:
        """Return a result carrying the session's time and rlimit, and the second solver's
        opinion of its decided queries when the limits ask for one."""
        seconds, rlimit, opinion = session.seconds, session.rlimit, None
        if self.limits.second_opinion:
            opinion = second_opinion(session.answers, self.limits, self.limits.second_opinion)
        why = self.target.expected_refutation(theorem) if verdict is Verdict.REFUTED else ""
        if why:
            extra.update(expected=True, expected_because=why)
        return ProofResult(theorem, claim, self.target.name, verdict, seconds=seconds, rlimit=rlimit,
                           opinion=opinion, op=self.target.op.value, **extra)

    def vacuous(self, session: Session, theorem: str, claim: str, because: str, **extra: Any) -> ProofResult:
        """Return a VACUOUS result; expected when the target declares its estimate unavailable
        and that is why."""
        expected = because in ESTIMATE_REASONS and self.target.expect_unavailable_estimate
        details = {**extra.pop("details", {}), "estimate": self.estimate.status}
        if not self.estimate.ok:
            details.update(estimate_error=self.estimate.error, estimate_message=self.estimate.message)
        return self.result(session, theorem, claim, Verdict.VACUOUS, vacuous_because=because, expected=expected,
                           expected_because=DECLARED_UNAVAILABLE if expected else "", details=details, **extra)

    def emptiness(self, session: Session, running: bool = True, measured: bool = False) -> str:
        """Return why the target has nothing to claim about ('' when it has): no valid shape, or
        (with `running`) no valid shape whose dispatched route succeeds, or (with `measured`) none
        whose route has a recipe (`UNSIZED_ONLY`). An undecided query returns '' (the theorem's
        own query then decides, or is UNKNOWN)."""
        enc = self.encoding
        if session.search([enc.valid], "-valid").status == "unsat":
            return NO_VALID_SHAPE
        if running and session.search([enc.valid, enc.ok], "-runs").status == "unsat":
            return NO_RUNNING_SHAPE
        if measured and enc.unsized_routes() and session.search([enc.measured], "-sized").status == "unsat":
            return UNSIZED_ONLY
        return ""

    def unsized_details(self, session: Session) -> dict[str, Any]:
        """Return, when the target has routes no recipe sizes, each with why and a minimal valid
        shape that takes it (replayed through `dispatch`; None: proven that none does): the shapes
        every bound of the target leaves out."""
        enc = self.encoding
        out: dict[str, Any] = {}
        for backend, why in enc.unsized_routes().items():
            premises = [enc.valid, enc.routes[backend].selected]
            answer = session.search(premises, f"-unsized-{backend.value}")
            if answer.status == "unsat":
                continue
            shape = None
            if answer.status == "sat":
                shape, g = self.point(session.minimize(premises, enc.shape.variables, answer.model))
                if backend not in dispatch(runtime_problem(g), self.target.config).backends:
                    raise mismatch("unsized routes", shape, f"dispatch does not pick {backend.value}")
            out[backend.value] = {"why": why, "witness": shape}
        return {"left_out": out} if out else {}


def context(target: Target, limits: Limits | None = None) -> Context:
    """Return the shared context of the theorems for the target."""
    return Context(target, encode(target), estimate_geometry(target.max_geometry(), target.config), limits or Limits())


Replay = Callable[[dict[str, Any]], dict[str, Any]]


def mismatch(theorem: str, dims: dict[str, Any], what: str) -> EncodingMismatch:
    """Return the error raised when the concrete spec disagrees with a model: our bug, named by
    the shape, never a result."""
    return EncodingMismatch(f"{theorem}: the concrete specification disagrees with the Z3 encoding at "
                            f"{shape_words(dims)}: {what}. This is a bug in attnws; please report it with this line")


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


def decide_unless_empty(ctx: Context, theorem: str, claim: str, violation: list[Any], variables: list[Any],
                        replay: Replay, details: dict[str, Any] | None = None, running: bool = True,
                        measured: bool = False) -> ProofResult:
    """`decide`, but VACUOUS when the target has no valid (or, with `running`, no running; with
    `measured`, no sized) shape; with `measured`, the details name the shapes left out."""
    session = ctx.session(theorem)
    empty = ctx.emptiness(session, running, measured)
    details = {**(details or {}), **(ctx.unsized_details(session) if measured else {})}
    if empty:
        return ctx.vacuous(session, theorem, claim, empty, details=details)
    return decide(ctx, theorem, claim, violation, variables, replay, session, details)
