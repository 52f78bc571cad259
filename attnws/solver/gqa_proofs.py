"""GroupQueryAttention's proofs over a box of shapes, while the family is in progress
(`attnws.spec.families.IN_PROGRESS`): the spec's builder, cascade and recipes evaluated over
symbolic B, S and T, the rest of the node fixed.

A `GqaBox` (`attnws.spec.gqa.node`) is one decoder node; every shape the builder accepts in the box
is a valid shape. Theorems:

- `runtime_cases`: per backend of the cascade, when it is picked and its complete workspace.
- `ort_bound`: ORT 1.31.1's own estimate for the box (its maxima), or why it is unavailable.
- `maximum`: the proven maximum runtime workspace over the box (or a pattern of it), with a
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
from attnws.spec.gqa.dispatch import cascade_gates, fast_decode, select, xqa_kv_type
from attnws.spec.gqa.estimate import ort_estimate
from attnws.spec.gqa.footprint import contract
from attnws.spec.gqa.node import GqaBox
from attnws.spec.gqa.recipe import Route, complete
from attnws.spec.problem import Backend
from attnws.spec.target import DimRange

from .domain import SymbolicDomain, conj, disj, holds_all, negate
from .gateway import Limits, Verdict
from .session import Session
from .splits import drops_smallest_first

DIMS = ("batch", "seq", "total_seq")
@dataclass(frozen=True)
class Case:
    """One backend of the cascade over the box: when it is picked, its workspace (bytes; None
    for cuDNN, which no recipe sizes) and the recipe's checks."""

    backend: Backend
    picked: Any
    workspace: Any
    valid: Any
    contract: Any = True  # every buffer the kernels touch fits its region (with `with_contract`)


@dataclass(frozen=True)
class Encoded:
    """The box over symbolic dimensions: the variables, the premises (inside the box, accepted by
    the builder), the cascade's cases, and the condition that no route runs."""

    variables: dict[str, Any]
    premises: list[Any]
    cases: list[Case]
    no_route: Any


def encode(box: GqaBox, pattern: dict[str, DimRange] | None = None, variables: dict[str, Any] | None = None,
           with_contract: bool = False) -> Encoded:
    """Evaluate the builder, the cascade and each route's complete recipe over symbolic B, S, T
    (`variables`: the terms to use, by dimension name; fresh constants by default); with
    `with_contract`, also whether the kernels' footprint fits the recipe (`footprint.contract`)."""
    d = SymbolicDomain()
    variables = variables or {name: z3.Int(name) for name in DIMS}
    ranges = {"batch": box.batch, "seq": box.seq, "total_seq": box.total_seq, **(pattern or {})}
    premises = [c for name, r in ranges.items() for c in (variables[name] >= r.lo, variables[name] <= r.hi)]
    mark = d.mark()
    p = box.problem(d, variables["batch"], variables["seq"], variables["total_seq"])
    premises.append(holds_all(d.since(mark)))
    cases, none_before = [], True
    for backend, gates in cascade_gates(d, p, box.config):
        ok = conj(*(g.cond for g in gates))
        picked = conj(none_before, ok)
        none_before = conj(none_before, negate(ok))
        if backend is Backend.CUDNN:
            cases.append(Case(backend, picked, None, True))
            continue
        mark = d.mark()
        route = Route(backend, box.config.device.sm, box.config.device.sm_count, p.total_sequence_length,
                      box.local_window_size, fast_decode(d, p, box.config) if backend is Backend.FLASH else False,
                      xqa_kv_type(p), is_bf16=box.is_bf16)
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


def runtime_bytes(box: GqaBox, dims: dict[str, int]) -> tuple[Backend | None, int | None, str]:
    """The concrete run: (backend, workspace bytes, ORT's failure text) at these dimensions."""
    p = box.problem(CONCRETE, dims["batch"], dims["seq"], dims["total_seq"])
    chosen = select(p, box.config)
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


def maximum(box: GqaBox, limits: Limits, pattern: dict[str, DimRange] | None = None,
            sessions: list[Session] | None = None) -> Maximum:
    """The largest workspace a valid shape of the box (or pattern) needs on the route ORT picks."""
    enc = encode(box, pattern)
    session = _session(f"gqa-maximum-{box.name}", limits, sessions)
    cudnn = [c.picked for c in enc.cases if c.workspace is None]
    probe = session.search([*enc.premises, conj(*cudnn) if len(cudnn) == 1 else z3.Or(*cudnn)], "-cudnn",
                           logic=None) if cudnn else None
    cudnn_shape = _dims(probe.model) if probe is not None and probe.status == "sat" else None
    term = _workspace(enc)
    constraints = [*enc.premises, _sized(enc)]

    first = session.search(constraints, "-sized", logic=None)
    if first.status == "unsat":
        why = ("every valid shape takes cuDNN, whose frontend sizes its own workspace" if cudnn_shape is not None
               else "no shape of the box is valid")
        return Maximum(None, None, reason=why, cudnn_shape=cudnn_shape, vacuous=True)
    found = _climb(box, session, term, constraints, first.model, pattern) if first.status == "sat" else None
    if found is None:
        return Maximum(None, None, reason="the maximum was not decided (raise --rlimit)", cudnn_shape=cudnn_shape)
    best, model = found
    backend, replayed, failure = runtime_bytes(box, _dims(model))
    if replayed != best:
        raise EncodingMismatch(f"{box.name}: the solver's maximum {best} at {_dims(model)} replays as {replayed} "
                               f"({backend}, {failure})")
    return Maximum(best, _dims(model), backend.value if backend else "", cudnn_shape=cudnn_shape)


def _corners(box: GqaBox, pattern: dict[str, DimRange] | None) -> list[dict[str, int]]:
    """The shapes at the ends of every dimension's range (a first guess at the maximum)."""
    ranges = {"batch": box.batch, "seq": box.seq, "total_seq": box.total_seq, **(pattern or {})}
    ends = [sorted({ranges[name].lo, ranges[name].hi}) for name in DIMS]
    return [dict(zip(DIMS, values)) for values in itertools.product(*ends)]


def _climb(box: GqaBox, session: Session, term: Any, constraints: list[Any], model: dict[str, int],
           pattern: dict[str, DimRange] | None) -> tuple[int, dict[str, int]] | None:
    """The maximum of term: start at the best of a model and the corners that run a sized route,
    then ask for more until "term > best" is unsat (the proof); each answer raises best to the
    replayed bytes of the shape found. None when a query is not decided."""
    candidates = [_dims(model), *_corners(box, pattern)]
    best_bytes, best = -1, _dims(model)
    for shape in candidates:
        try:
            bytes_ = runtime_bytes(box, shape)[1]
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
        best_bytes = runtime_bytes(box, best)[1]


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


def ort_bound(box: GqaBox) -> tuple[int | None, str]:
    """ORT 1.31.1's estimate for the box's node, or (None, why it declares none)."""
    try:
        return ort_estimate(box.at_maxima(), box.config, box.max_total_sequence_length).total_workspace_bytes, ""
    except WorkspaceError as error:
        return None, str(error)


def safe_bound(box: GqaBox, limits: Limits, sessions: list[Session] | None = None) -> BoundVerdict:
    """Prove that no valid shape of the box needs more than ORT's estimate."""
    bound, why = ort_bound(box)
    if bound is None:
        return BoundVerdict(Verdict.VACUOUS, None, vacuous_because=f"ORT declares no estimate: {why}")
    enc = encode(box)
    session = _session(f"gqa-safe-bound-{box.name}", limits, sessions)
    violation = [*enc.premises, _sized(enc), _workspace(enc) > bound]
    answer = session.search(violation, logic=None)
    if answer.status == "unsat":
        return BoundVerdict(Verdict.PROVED, bound)
    if answer.status != "sat":
        return BoundVerdict(Verdict.UNKNOWN, bound, reason=answer.reason)
    shape = _dims(answer.model)
    backend, replayed, _ = runtime_bytes(box, shape)
    if replayed is None or replayed <= bound:
        raise EncodingMismatch(f"{box.name}: {shape} exceeds ORT's estimate in the solver but replays as {replayed}")
    return BoundVerdict(Verdict.REFUTED, bound, counterexample={**shape, "bytes": replayed,
                                                                  "backend": backend.value})


def key_length_drops(box: GqaBox, limits: Limits, limit: int | None = None) -> tuple[list[dict[str, Any]], Any]:
    """Shapes (B, S, T) of the box whose workspace on the route ORT picks exceeds that of
    (B, S, T + 1), smallest T first (at most `limit`), each replayed; and how the search ended."""
    now = encode(box)
    nxt = encode(box, None, {**now.variables, "total_seq": now.variables["total_seq"] + 1})
    base = [*now.premises, *nxt.premises, _sized(now), _sized(nxt), _workspace(nxt) < _workspace(now)]
    session = Session(f"gqa-key-length-drops-{box.name}", limits)
    return drops_smallest_first(session, base, now.variables["total_seq"], box.total_seq.lo,
                                lambda model: _replay_drop(box, _dims(model)), limit)


def _replay_drop(box: GqaBox, shape: dict[str, int]) -> dict[str, Any]:
    backend, before, _ = runtime_bytes(box, shape)
    next_backend, after, _ = runtime_bytes(box, {**shape, "total_seq": shape["total_seq"] + 1})
    if before is None or after is None or not after < before:
        raise EncodingMismatch(f"{box.name}: {shape} is no key-length drop in the concrete spec ({before}, {after})")
    return {**shape, "bytes": before, "next_bytes": after, "backend": backend.value, "next_backend": next_backend.value}


@dataclass(frozen=True)
class ContractVerdict:
    """Whether every buffer the kernels touch fits the recipe's region at every valid shape: the
    smallest violating shape (replayed: the buffers that do not fit) exactly when REFUTED."""

    verdict: Verdict
    counterexample: dict[str, Any] | None = None
    reason: str = ""


def kernel_contract(box: GqaBox, limits: Limits, sessions: list[Session] | None = None) -> ContractVerdict:
    """Prove that at every valid shape of the box the picked route's kernels stay inside the
    regions the recipe gives them (`attnws.spec.gqa.footprint`, stated from the kernels)."""
    enc = encode(box, with_contract=True)
    broken = disj(*(conj(c.picked, c.valid, negate(c.contract)) for c in enc.cases if c.workspace is not None))
    session = _session(f"gqa-kernel-contract-{box.name}", limits, sessions)
    answer = session.search([*enc.premises, broken], logic=None)
    if answer.status == "unsat":
        return ContractVerdict(Verdict.PROVED)
    if answer.status != "sat":
        return ContractVerdict(Verdict.UNKNOWN, reason=answer.reason)
    shape = _dims(answer.model)
    violations = contract_violations(box, shape)
    if not violations:
        raise EncodingMismatch(f"{box.name}: {shape} breaks the kernel contract in the solver only")
    return ContractVerdict(Verdict.REFUTED, {**shape, "violations": violations})


def contract_violations(box: GqaBox, shape: dict[str, int]) -> list[str]:
    """The buffers that do not fit their regions at a concrete shape, in words."""
    p = box.problem(CONCRETE, shape["batch"], shape["seq"], shape["total_seq"])
    chosen = select(p, box.config)
    if chosen.route is None or chosen.route.backend is Backend.CUDNN:
        return []
    wp = p.workspace_problem(CONCRETE)
    run = complete(wp, chosen.route)
    return [f"{t.writer} touches {t.nbytes:,} B from {t.region}, past the room the recipe gives it"
            for t, ok in contract(wp, run, chosen.route) if not ok]
