"""GroupQueryAttention's proofs over a target's box of shapes: the spec's builder, cascade and
recipes evaluated over symbolic B, S and T, the rest of the node fixed. The family estimates with
ORT's own estimator, not the shared aggregate, so it brings these theorems instead of the shared
ones (`attnws.solver.gqa_commands` runs them for `prove --op gqa`).

A GroupQueryAttention `Target` is one decoder node; every shape the builder accepts in its box is
a valid shape. Theorems:

- `runtime_cases`: per backend of the cascade, when it is picked and its complete workspace.
- `ort_bound`: ORT 1.31.1's own estimate for the target (its maxima), or why it is unavailable.
- `maximum`: the proven maximum runtime workspace over the target (or a pattern of it), with a
  shape attaining it (replayed), and the shapes that take cuDNN (whose workspace no recipe
  states: excluded, and said).
- `safe_bound`: runtime <= ORT's estimate for every valid shape: PROVED, REFUTED with a replayed
  minimal shape, UNKNOWN, or VACUOUS when ORT declares no estimate.
Bytes throughout; every query goes through the gateway with its limits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import z3

from attnws.spec.domain import CONCRETE
from attnws.spec.errors import EncodingMismatch, WorkspaceError
from attnws.spec.gqa.dispatch import cascade_gates, route_of, select
from attnws.spec.gqa.estimate import node_at_maxima, ort_estimate
from attnws.spec.gqa.footprint import contract
from attnws.spec.gqa.inputs import runtime_problem, target_geometry
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.gqa.recipe import complete
from attnws.spec.problem import Backend
from attnws.spec.target import DimRange, Target

from .domain import SymbolicDomain, conj, disj, holds_all, negate
from .gateway import Limits, Verdict
from .session import Session
from .splits import drops_smallest_first

DIMS = ("batch", "seq", "total_seq")


def problem_at(target: Target, d: Any, batch: Any, seq: Any, total: Any) -> GqaProblem:
    """The builder's problem of the target's node at B, S and T (ints, or terms under the solver's
    domain, where ORT's checks become obligations)."""
    return runtime_problem(target_geometry(target, batch, seq, total), d)


@dataclass(frozen=True)
class Case:
    """One backend of the cascade over the target: when it is picked, its workspace (bytes; None
    for cuDNN, which no recipe sizes) and the recipe's checks."""

    backend: Backend
    picked: Any
    workspace: Any
    valid: Any
    contract: Any = True  # every buffer the kernels touch fits its region (with `with_contract`)


@dataclass(frozen=True)
class Encoded:
    """The target over symbolic dimensions: the variables, the premises (inside the target, accepted by
    the builder), the cascade's cases, and the condition that no route runs."""

    variables: dict[str, Any]
    premises: list[Any]
    cases: list[Case]
    no_route: Any


def encode(target: Target, pattern: dict[str, DimRange] | None = None, variables: dict[str, Any] | None = None,
           with_contract: bool = False) -> Encoded:
    """Evaluate the builder, the cascade and each route's complete recipe over symbolic B, S, T
    (`variables`: the terms to use, by dimension name; fresh constants by default); with
    `with_contract`, also whether the kernels' footprint fits the recipe (`footprint.contract`)."""
    d = SymbolicDomain()
    variables = variables or {name: z3.Int(name) for name in DIMS}
    ranges = {"batch": target.batch, "seq": target.seq, "total_seq": target.total_seq, **(pattern or {})}
    premises = [c for name, r in ranges.items() for c in (variables[name] >= r.lo, variables[name] <= r.hi)]
    mark = d.mark()
    p = problem_at(target, d, variables["batch"], variables["seq"], variables["total_seq"])
    premises.append(holds_all(d.since(mark)))
    cases, none_before = [], True
    for backend, gates in cascade_gates(d, p, target.config):
        ok = conj(*(g.cond for g in gates))
        picked = conj(none_before, ok)
        none_before = conj(none_before, negate(ok))
        if backend is Backend.CUDNN:
            cases.append(Case(backend, picked, None, True))
            continue
        mark = d.mark()
        route = route_of(d, p, target.config, backend)
        with d.assuming(picked):
            wp = p.workspace_problem(d)
            run = complete(wp, route, d)
            fits = conj(*(ok for _, ok in contract(wp, run, route, d))) if with_contract else True
        cases.append(Case(backend, picked, run.total_workspace_bytes, holds_all(d.since(mark)), fits))
    return Encoded(variables, premises, cases, none_before)


def _session(name: str, limits: Limits, sessions: list[Session] | None) -> Session:
    """A new session, kept in `sessions` when given (for a second solver's opinion of its answers)."""
    session = Session(name, limits)
    if sessions is not None:
        sessions.append(session)
    return session


def runtime_bytes(target: Target, dims: dict[str, int]) -> tuple[Backend | None, int | None, str]:
    """The concrete run: (backend, workspace bytes, ORT's failure text) at these dimensions."""
    p = problem_at(target, CONCRETE, dims["batch"], dims["seq"], dims["total_seq"])
    chosen = select(p, target.config)
    if chosen.route is None:
        return None, None, chosen.failure
    if chosen.route.backend is Backend.CUDNN:
        return Backend.CUDNN, None, ""
    return chosen.route.backend, complete(p.workspace_problem(CONCRETE), chosen.route).total_workspace_bytes, ""


def _workspace(enc: Encoded) -> Any:
    """The picked route's workspace as one term (0 for cuDNN and for no route)."""
    term: Any = 0
    for case in reversed(enc.cases):
        if case.workspace is not None:
            term = z3.If(case.picked, case.workspace, term) if isinstance(case.picked, z3.ExprRef) else \
                (case.workspace if case.picked else term)
    return term


def _sized(enc: Encoded) -> Any:
    """The shape runs a route whose recipe sizes it (not cuDNN, not none) and the recipe's checks hold."""
    return conj(*(negate(c.picked) for c in enc.cases if c.workspace is None),
                *(negate(conj(c.picked, negate(c.valid))) for c in enc.cases if c.workspace is not None),
                negate(enc.no_route))


def _dims(model: dict[str, int]) -> dict[str, int]:
    return {name: model[name] for name in DIMS if name in model}


@dataclass(frozen=True)
class Maximum:
    """A proven maximum (bytes) and a shape attaining it (replayed), or why there is none (decided,
    `vacuous`) or why it is not decided; `cudnn_shape`: a valid shape that takes cuDNN (excluded
    from the maximum), if any."""

    bytes: int | None
    witness: dict[str, int] | None
    backend: str = ""
    reason: str = ""
    cudnn_shape: dict[str, int] | None = None
    vacuous: bool = False  # decided: no shape runs a route a recipe sizes (`reason` says why)


def maximum(target: Target, limits: Limits, pattern: dict[str, DimRange] | None = None,
            sessions: list[Session] | None = None) -> Maximum:
    """The largest workspace a valid shape of the target (or pattern) needs on the route ORT picks."""
    enc = encode(target, pattern)
    session = _session(f"gqa-maximum-{target.name}", limits, sessions)
    cudnn = [c.picked for c in enc.cases if c.workspace is None]
    probe = session.search([*enc.premises, conj(*cudnn) if len(cudnn) == 1 else z3.Or(*cudnn)], "-cudnn",
                           logic=None) if cudnn else None
    cudnn_shape = _dims(probe.model) if probe is not None and probe.status == "sat" else None
    term = _workspace(enc)
    constraints = [*enc.premises, _sized(enc)]

    first = session.search(constraints, "-sized", logic=None)
    if first.status == "unsat":
        why = ("every valid shape takes cuDNN, whose frontend sizes its own workspace" if cudnn_shape is not None
               else "no shape of the target is valid")
        return Maximum(None, None, reason=why, cudnn_shape=cudnn_shape, vacuous=True)
    found = _climb(target, session, term, constraints, first.model, pattern) if first.status == "sat" else None
    if found is None:
        return Maximum(None, None, reason="the maximum was not decided (raise --rlimit)", cudnn_shape=cudnn_shape)
    best, model = found
    backend, replayed, failure = runtime_bytes(target, _dims(model))
    if replayed != best:
        raise EncodingMismatch(f"{target.name}: the solver's maximum {best} at {_dims(model)} replays as {replayed} "
                               f"({backend}, {failure})")
    return Maximum(best, _dims(model), backend.value if backend else "", cudnn_shape=cudnn_shape)


def _corners(target: Target, pattern: dict[str, DimRange] | None) -> list[dict[str, int]]:
    """The shapes at the ends of every dimension's range (a first guess at the maximum)."""
    ranges = {"batch": target.batch, "seq": target.seq, "total_seq": target.total_seq, **(pattern or {})}
    ends = [sorted({ranges[name].lo, ranges[name].hi}) for name in DIMS]
    return [dict(zip(DIMS, values)) for values in itertools.product(*ends)]


def _climb(target: Target, session: Session, term: Any, constraints: list[Any], model: dict[str, int],
           pattern: dict[str, DimRange] | None) -> tuple[int, dict[str, int]] | None:
    """The maximum of term: start at the best of a model and the corners that run a sized route,
    then ask for more until "term > best" is unsat (the proof); each answer raises best to the
    replayed bytes of the shape found. None when a query is not decided."""
    candidates = [_dims(model), *_corners(target, pattern)]
    best_bytes, best = -1, _dims(model)
    for shape in candidates:
        try:
            bytes_ = runtime_bytes(target, shape)[1]
        except WorkspaceError:
            continue
        if bytes_ is not None and bytes_ > best_bytes and _inside(session, constraints, shape):
            best_bytes, best = bytes_, shape
    while True:
        answer = session.search([*constraints, term > best_bytes], "-max", logic=None)
        if answer.status == "unsat":
            return best_bytes, best
        if answer.status != "sat":
            return None
        best = _dims(answer.model)
        best_bytes = runtime_bytes(target, best)[1]


def _inside(session: Session, constraints: list[Any], shape: dict[str, int]) -> bool:
    """Whether the concrete shape satisfies the constraints (inside the pattern, valid, sized)."""
    fixed = [z3.Int(name) == value for name, value in shape.items()]
    return session.search([*constraints, *fixed], "-corner", logic=None).status == "sat"


@dataclass(frozen=True)
class BoundVerdict:
    """ORT's estimate (bytes, or why it is unavailable) and whether it covers every valid shape."""

    verdict: Verdict
    ort_bytes: int | None
    counterexample: dict[str, int] | None = None
    reason: str = ""
    vacuous_because: str = ""


def ort_bound(target: Target) -> tuple[int | None, str]:
    """ORT 1.31.1's estimate for the target's node, or (None, why it declares none)."""
    try:
        return ort_estimate(node_at_maxima(target.max_geometry()), target.config,
                            target.max_total_seq or 0).total_workspace_bytes, ""
    except WorkspaceError as error:
        return None, str(error)


def safe_bound(target: Target, limits: Limits, sessions: list[Session] | None = None) -> BoundVerdict:
    """Prove that no valid shape of the target needs more than ORT's estimate."""
    bound, why = ort_bound(target)
    if bound is None:
        return BoundVerdict(Verdict.VACUOUS, None, vacuous_because=f"ORT declares no estimate: {why}")
    enc = encode(target)
    session = _session(f"gqa-safe-bound-{target.name}", limits, sessions)
    violation = [*enc.premises, _sized(enc), _workspace(enc) > bound]
    answer = session.search(violation, logic=None)
    if answer.status == "unsat":
        return BoundVerdict(Verdict.PROVED, bound)
    if answer.status != "sat":
        return BoundVerdict(Verdict.UNKNOWN, bound, reason=answer.reason)
    shape = _dims(answer.model)
    backend, replayed, _ = runtime_bytes(target, shape)
    if replayed is None or replayed <= bound:
        raise EncodingMismatch(f"{target.name}: {shape} exceeds ORT's estimate in the solver but replays as {replayed}")
    return BoundVerdict(Verdict.REFUTED, bound, counterexample={**shape, "bytes": replayed,
                                                                  "backend": backend.value})


def key_length_drops(target: Target, limits: Limits, limit: int | None = None) -> tuple[list[dict[str, Any]], Any]:
    """Shapes (B, S, T) of the target whose workspace on the route ORT picks exceeds that of
    (B, S, T + 1), smallest T first (at most `limit`), each replayed; and how the search ended."""
    now = encode(target)
    nxt = encode(target, None, {**now.variables, "total_seq": now.variables["total_seq"] + 1})
    base = [*now.premises, *nxt.premises, _sized(now), _sized(nxt), _workspace(nxt) < _workspace(now)]
    session = Session(f"gqa-key-length-drops-{target.name}", limits)
    return drops_smallest_first(session, base, now.variables["total_seq"], target.total_seq.lo,
                                lambda model: _replay_drop(target, _dims(model)), limit)


def _replay_drop(target: Target, shape: dict[str, int]) -> dict[str, Any]:
    backend, before, _ = runtime_bytes(target, shape)
    next_backend, after, _ = runtime_bytes(target, {**shape, "total_seq": shape["total_seq"] + 1})
    if before is None or after is None or not after < before:
        raise EncodingMismatch(f"{target.name}: {shape} is no key-length drop in the concrete spec ({before}, {after})")
    return {**shape, "bytes": before, "next_bytes": after, "backend": backend.value, "next_backend": next_backend.value}


@dataclass(frozen=True)
class ContractVerdict:
    """Whether every buffer the kernels touch fits the recipe's region at every valid shape: the
    smallest violating shape (replayed: the buffers that do not fit) exactly when REFUTED."""

    verdict: Verdict
    counterexample: dict[str, Any] | None = None
    reason: str = ""


def kernel_contract(target: Target, limits: Limits, sessions: list[Session] | None = None) -> ContractVerdict:
    """Prove that at every valid shape of the target the picked route's kernels stay inside the
    regions the recipe gives them (`attnws.spec.gqa.footprint`, stated from the kernels)."""
    enc = encode(target, with_contract=True)
    broken = disj(*(conj(c.picked, c.valid, negate(c.contract)) for c in enc.cases if c.workspace is not None))
    session = _session(f"gqa-kernel-contract-{target.name}", limits, sessions)
    answer = session.search([*enc.premises, broken], logic=None)
    if answer.status == "unsat":
        return ContractVerdict(Verdict.PROVED)
    if answer.status != "sat":
        return ContractVerdict(Verdict.UNKNOWN, reason=answer.reason)
    shape = _dims(answer.model)
    violations = contract_violations(target, shape)
    if not violations:
        raise EncodingMismatch(f"{target.name}: {shape} breaks the kernel contract in the solver only")
    return ContractVerdict(Verdict.REFUTED, {**shape, "violations": violations})


def contract_violations(target: Target, shape: dict[str, int]) -> list[str]:
    """The buffers that do not fit their regions at a concrete shape, in words."""
    p = problem_at(target, CONCRETE, shape["batch"], shape["seq"], shape["total_seq"])
    chosen = select(p, target.config)
    if chosen.route is None or chosen.route.backend is Backend.CUDNN:
        return []
    wp = p.workspace_problem(CONCRETE)
    run = complete(wp, chosen.route)
    return [f"{t.writer} touches {t.nbytes:,} B from {t.region}, past the room the recipe gives it"
            for t, ok in contract(wp, run, chosen.route) if not ok]
