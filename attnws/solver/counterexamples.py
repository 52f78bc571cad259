"""Counterexample searches behind the two finding theorems and `attnws counterexamples`.

- `nonmonotonic_pairs`: pairs p <= q (componentwise, same flags; both valid and running) with
  runtime(p) > runtime(q). Each pair is minimal: q is the lexicographically smallest shape where
  the drop happens (the discontinuity), then p the closest shape below it (the gaps q - p are
  minimized in turn, so a threshold shows as S - 1 -> S); one pair is reported per discontinuity: the backends picked at p and at q, labelled by the dispatch gates
  whose value flips between them (a sequence threshold, the attention-bias alignment, head-size
  support, a TRT regime).
- `naive_cascade_shapes`: per backend, a minimal valid shape whose runtime exceeds the runtime of
  the maximum geometry: the bytes an estimator would declare by replicating the cascade there.
- `runtime_failure_shapes`: per kind of `attnws.spec.runtime_failures`, a minimal valid shape
  where dispatch picks a route and ORT's run then fails there (after allocating the workspace).
Most discontinuities are one dimension crossing a threshold, so the pair search first asks, per
dimension, for q = p + 1 along it with the others shared (small, fast queries), then the general
componentwise query for what remains. `max_elements` (optional) keeps every shape small enough to
run: B * N * S * (S + 2H + Hv) <= max_elements (MultiHeadAttention: B * N * (S * T + S * H + T * (H + Hv))).
Every shape is replayed through `estimate_exact`; a disagreement raises `EncodingMismatch`.
Each search returns its findings and a `SearchStatus`: found, none exists (proved), or
undecided (with the limit hit and the flag that raises it); "none" is never said of a search
that was not decided. A search whose session a wall clock cut (its `--max-search-seconds`
budget, the gateway's ceiling or `--timeout-ms`) is never "none" and never complete: its status
says so (`cut`) with what it decided and what it left undecided, and a finding whose minimization
the clock cut is kept (it is replayed, so real) but marked not minimal, since another machine
would minimize it further: a cut never reads as a verdict. A cut counts only while what it stopped
is still open: a pair query the clock cut and its per-route cases then settled is decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations_with_replacement
from math import prod
from typing import Any

import z3

from attnws.spec.dispatch import cascade_gates, dispatch, runner_validity
from attnws.spec.domain import CONCRETE
from attnws.spec.estimate import estimate_exact, runtime_problem
from attnws.spec.families import DIMENSIONS, op_fields
from attnws.spec.options import TrtRunner
from attnws.spec.problem import Op
from attnws.spec.runtime_failures import FAILURE_KINDS, NO_ROUTE, route_failures
from attnws.spec.shapes_file import shape_record
from attnws.spec.target import Target

from .domain import conj, is_symbolic, negate
from .encode import Encoding, concrete_dims, concrete_geometry, encode, evaluate
from .results import mismatch
from .gateway import Answer
from .session import Session
from .settings import DEFAULT_LIMIT

PRODUCT_LEMMA_DEGREE = 4  # the deepest product of symbolic dimensions in a recipe: B * N * S * S
FOUND, NONE, UNDECIDED = "found", "none", "undecided"


NOT_MINIMAL = "not minimized: the wall clock cut its minimization"


@dataclass(frozen=True)
class SearchStatus:
    """How a findings search ended: `state` found / none / undecided; `complete` is False when
    a query after the last finding was not decided (more findings may exist); `reason` says what
    was not decided, the limit hit and the flag that raises it. `cut` (non-empty only then) says
    that a wall clock stopped a query whose part is still open (or a finding's minimization), so
    what was decided depends on the machine; `minimal` is False when the clock cut the
    minimization of a finding (marked so itself)."""

    kind: str
    state: str
    complete: bool = True
    reason: str = ""
    cut: str = ""
    minimal: bool = True

    def describe(self) -> str:
        """Return the status in words, as `prove` and `counterexamples` print it."""
        if self.state == NONE:
            return "none exists (proved)"
        if self.state == UNDECIDED:
            return f"undecided ({self.reason})"
        more = "" if self.complete else f"; the search for more was undecided ({self.reason})"
        return "found" + more + ("" if self.minimal else f"; a finding marked so is real but {NOT_MINIMAL}")

    def as_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "status": self.state, "complete": self.complete, "reason": self.reason,
               "text": self.describe()}
        if self.cut:
            out.update(cut=self.cut, minimal=self.minimal)
        return out


@dataclass
class Parts:
    """What a search decided, what it left undecided ("what: why") and the wall-clock cuts that
    count: that of a query whose part is still undecided, or of a finding's minimization. A cut
    a later query settled (a pair query its per-route cases decided) is not kept, and neither is
    one of a query the search did not ask (the session's others), so the search's status does not
    depend on what ran before it."""

    decided: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    cuts: list[str] = field(default_factory=list)

    def left_open(self, what: str, answer: Answer) -> None:
        """Record the part `what` as undecided by the (unknown) answer."""
        self.undecided.append(f"{what}: {answer.reason}")
        if answer.clock:
            self.cuts.append(answer.reason)

    def minimized(self, session: Session, constraints: list[Any], variables: list[Any],
                  model: dict[str, int]) -> tuple[dict[str, int], bool]:
        """Return the minimized model and whether its minimization finished without a wall clock
        stopping one of its queries (else another machine may minimize it further: the cut counts)."""
        before = len(session.cuts)
        best = session.minimize(constraints, variables, model)
        self.cuts += session.cuts[before:before + 1]
        return best, len(session.cuts) == before


def _status(kind: str, found: list[Any], parts: Parts, session: Session) -> SearchStatus:
    """Return the search's status from its findings and parts; when a wall clock cut one of them
    that is still open (`Parts.cuts`), the status says so, with what the search decided and what it
    left undecided (a finding's minimization only where a finding is not minimal)."""
    minimal = all(f.minimal for f in found)
    undecided = list(dict.fromkeys(parts.undecided))
    if parts.cuts:
        left = [part.split(": ", 1)[0] for part in undecided] + ([] if minimal else ["the minimization of a finding"])
        done = f"; decided: {', '.join(dict.fromkeys(parts.decided))}" if parts.decided else ""
        reason = (f"{parts.cuts[0]}; after {session.queries} queries in {session.seconds:.0f} s{done}; "
                  f"left undecided: {', '.join(dict.fromkeys(left))}")
        return SearchStatus(kind, FOUND if found else UNDECIDED, False, reason, parts.cuts[0], minimal)
    reason = "; ".join(undecided)
    if found:
        return SearchStatus(kind, FOUND, not undecided, reason)
    return SearchStatus(kind, UNDECIDED, False, reason) if undecided else SearchStatus(kind, NONE)


def working_set_text(op: Op) -> str:
    """Return the working-set formula `--max-elements` bounds, for the operator's family."""
    return op_fields(op).WORKING_SET_TEXT


def element_bound(enc: Encoding, max_elements: int | None) -> list[Any]:
    """Return "working set <= max_elements" for the encoding's problem (none without a bound): the
    largest working set the kernels touch, in elements: B * N * S * (S + 2H + Hv) for the packed
    operators, B * N * (S * T + S * H + T * (H + Hv)) for MultiHeadAttention (scores over T keys,
    Q, and K and V of T rows)."""
    if max_elements is None or enc.problem is None:
        return []
    return [op_fields(enc.problem.op).working_set(enc.problem) <= max_elements]


@dataclass(frozen=True)
class Found:
    """One replayed shape: its dimensions, runtime root bytes and the backend(s) it takes, and
    why ORT then fails at run time ('' when it runs); `minimal` False when a wall clock cut its
    minimization."""

    dims: dict[str, Any]
    runtime_bytes: int
    backends: tuple[str, ...]
    failure: str = ""
    minimal: bool = True

    def as_dict(self) -> dict[str, Any]:
        out = {"dims": self.dims, "runtime_bytes": self.runtime_bytes, "backends": list(self.backends)}
        if self.failure:
            out["failure"] = self.failure
        return out if self.minimal else {**out, "minimal": False}


@dataclass(frozen=True)
class Pair:
    """A non-monotonic pair: `smaller` <= `larger` componentwise and needs more bytes; `differ`
    names the dimensions that differ, `gates` the dispatch gates whose value flips; `minimal`
    False when a wall clock cut its minimization."""

    differ: tuple[str, ...]
    gates: tuple[str, ...]
    smaller: Found
    larger: Found
    minimal: bool = True

    def as_dict(self) -> dict[str, Any]:
        out = {"differ": list(self.differ), "discontinuity": list(self.gates), "smaller": self.smaller.as_dict(),
               "larger": self.larger.as_dict()}
        return out if self.minimal else {**out, "minimal": False}


def replay(target: Target, dims: dict[str, Any], expected: int | None = None) -> Found:
    """Return the concrete runtime of the dims; raise EncodingMismatch if it is not `expected`."""
    exact = estimate_exact(concrete_geometry(target, dims), target.config)
    if not exact.ok or (expected is not None and exact.total_workspace_bytes != expected):
        raise mismatch("counterexamples", dims, f"concrete runtime {exact.total_workspace_bytes} ({exact.status}) "
                                                f"!= the model's {expected}")
    return Found(dims, exact.total_workspace_bytes, tuple(b.value for b in exact.backends))


def _evaluate(enc: Encoding, model: dict[str, int]) -> int:
    return evaluate(enc.runtime_bytes, enc.shape, model)


def flipped_gates(target: Target, p: Found, q: Found) -> tuple[str, ...]:
    """Return "backend: gate" for each gate of the backends picked at p or q whose value differs
    between the two shapes (concrete dispatch gates of the spec)."""
    values = []
    for found in (p, q):
        problem = estimate_exact(concrete_geometry(target, found.dims), target.config).problem
        runner = True if target.config.trt_runner is TrtRunner.UNKNOWN else runner_validity(CONCRETE, problem, target.config)
        values.append({(b.value, g.name): bool(g.cond) for b, gates in cascade_gates(CONCRETE, problem, target.config, runner)
                       for g in gates})
    involved = set(p.backends) | set(q.backends)
    return tuple(f"{b}: {g}" for (b, g), v in values[0].items() if b in involved and values[1].get((b, g)) != v)


def monotone_products(small: list[Any], large: list[Any], degree: int = PRODUCT_LEMMA_DEGREE) -> list[Any]:
    """Return "m(small) <= m(large)" for every product m of 2..degree of the variables (with
    repetition). Implied lemmas, not assumptions: dimensions are non-negative (the box has
    lo >= 0) and small <= large componentwise, so every such product is monotone; stating them
    turns Z3's nonlinear search into a fast one without changing the set of models."""
    lemmas = []
    for size in range(2, degree + 1):
        for combo in combinations_with_replacement(range(len(small)), size):
            lemmas.append(prod(small[i] for i in combo) <= prod(large[i] for i in combo))
    return lemmas


def nonmonotonic_pairs(target: Target, session: Session, limit: int = DEFAULT_LIMIT,
                       max_elements: int | None = None) -> tuple[list[Pair], SearchStatus]:
    """Return up to `limit` minimal pairs, one per backend transition, and the search status:
    threshold pairs (one dimension, one step) first, then the general componentwise query."""
    kind = "nonmonotonic"
    small, large = encode(target, "_p"), encode(target, "_q")
    if small.problem is None:
        return [], SearchStatus(kind, NONE)
    names = [n for n in DIMENSIONS if is_symbolic(small.shape.dims[n])]
    below = [small.shape.dims[n] for n in names], [large.shape.dims[n] for n in names]
    common = [small.measured, large.measured, *element_bound(small, max_elements),
              *element_bound(large, max_elements), small.runtime_bytes > large.runtime_bytes]
    gaps = [z3.Int(f"gap_{n}") for n in names]
    general = [*common, *(a <= b for a, b in zip(*below)), *monotone_products(*below),
               *(g == b - a for g, a, b in zip(gaps, *below))]
    searches = [([*common, *(b == a + (1 if j == i else 0) for j, (a, b) in enumerate(zip(*below)))],
                 below[1], f"-step-{name}") for i, name in enumerate(names)]
    searches.append((general, [*below[1], *gaps], "-general"))  # the drop's first shape q, then p closest below
    pairs: list[Pair] = []
    blocked: list[Any] = []
    parts = Parts()
    route_pairs = [route_case(small, large, a, b, target) for a in small.routes for b in large.routes]
    for base, variables, tag in searches:
        while len(pairs) < limit:
            constraints = [*base, *blocked]
            answer = session.search(constraints, tag)
            if answer.status == "unknown" and tag == "-general":
                answer, constraints = split_by_routes(session, constraints, route_pairs, tag)
            what = f"the {tag.split('-')[-1]} pair query"
            if answer.status != "sat":
                if answer.status == "unknown":
                    parts.left_open(what, answer)
                else:
                    parts.decided.append(f"{what} (no more pairs)")
                break
            model, minimal = parts.minimized(session, constraints, variables, answer.model)
            p = replay(target, concrete_dims(small.shape, model), _evaluate(small, model))
            q = replay(target, concrete_dims(large.shape, model), _evaluate(large, model))
            differ = tuple(n for n in names if p.dims[n] != q.dims[n])
            pairs.append(Pair(differ, flipped_gates(target, p, q), p, q, minimal))
            parts.decided.append(f"{what} (a pair)")
            blocked.append(negate(conj(*(small.routes[r].selected for r in small.routes if r.value in p.backends),
                                       *(large.routes[r].selected for r in large.routes if r.value in q.backends))))
    return pairs, _status(kind, pairs, parts, session)


def route_case(small: Encoding, large: Encoding, at_p: Any, at_q: Any, target: Target) -> list[Any]:
    """Return the case "p takes route at_p, q takes route at_q" of a pair query. With a known
    runner the runtime of a shape is its route's total, so the drop is stated on the two totals
    directly (implied, and much easier for Z3 than the runtime's case split)."""
    p, q = small.routes[at_p], large.routes[at_q]
    case = [p.selected, q.selected]
    if target.config.trt_runner is not TrtRunner.UNKNOWN:
        case.append(p.total_bytes > q.total_bytes)
    return case


def split_by_routes(session: Session, constraints: list[Any], route_pairs: list[list[Any]],
                    tag: str) -> tuple[Answer, list[Any]]:
    """Ask an undecided pair query again once per (backend at p, backend at q): the cases cover
    every pair of running shapes, and each is a smaller query. Return the first sat answer with
    its constraints, else unsat when every case is, else unknown (`clock` when a wall clock cut a
    case: with the first such case's reason, else the first undecided case's)."""
    unknown = []
    for index, extra in enumerate(route_pairs):
        case = [*constraints, *extra]
        answer = session.search(case, f"{tag}-routes-{index}")
        if answer.status == "sat":
            return answer, case
        if answer.status == "unknown":
            unknown.append(answer)
    if unknown:
        cut = [answer for answer in unknown if answer.clock]
        return Answer("unknown", None, (cut or unknown)[0].reason, 0.0, 0, clock=bool(cut)), constraints
    return Answer("unsat", None, "", 0.0, 0), constraints


def naive_cascade_shapes(target: Target, session: Session, limit: int = DEFAULT_LIMIT,
                         max_elements: int | None = None,
                         enc: Encoding | None = None) -> tuple[int | None, list[Found], SearchStatus]:
    """Return (naive bytes, shapes, status): per backend (up to `limit`), a minimal valid shape
    whose runtime exceeds the runtime at the maximum geometry (None, [], none when the maximum
    itself fails: a naive estimator would declare nothing). `enc`: the target's `encode(target)`
    when the caller has it (the same terms, so the same queries)."""
    kind = "naive-cascade"
    naive = estimate_exact(target.max_geometry(), target.config)
    if not naive.ok:
        return None, [], SearchStatus(kind, NONE)
    enc = enc or encode(target)
    found: list[Found] = []
    parts = Parts()
    for route in enc.routes.values():
        if len(found) >= limit:
            break
        constraints = [enc.measured, route.selected, *element_bound(enc, max_elements),
                       enc.runtime_bytes > naive.total_workspace_bytes]
        answer = session.search(constraints, f"-{route.backend.value}")
        what = f"the {route.backend.value} query"
        if answer.status == "unknown":
            parts.left_open(what, answer)
        if answer.status != "sat":
            parts.decided += [f"{what} (none)"] if answer.status == "unsat" else []
            continue
        model, minimal = parts.minimized(session, constraints, enc.shape.variables, answer.model)
        found.append(replace(replay(target, concrete_dims(enc.shape, model), _evaluate(enc, model)), minimal=minimal))
        parts.decided.append(f"{what} (a shape)")
    return naive.total_workspace_bytes, found, _status(kind, found, parts, session)


def runtime_failure_shapes(target: Target, session: Session, limit: int = DEFAULT_LIMIT,
                           max_elements: int | None = None,
                           enc: Encoding | None = None) -> tuple[list[Found], SearchStatus]:
    """Return, per kind of run-time failure (up to `limit` kinds, in `FAILURE_KINDS` order), the
    minimal valid shape where dispatch picks a route and ORT's run then fails with that error
    (or, for `no_route`, where no backend of the cascade runs it), and the search status. `enc`:
    the target's `encode(target)` when the caller has it."""
    kind = "runtime-failure"
    enc = enc or encode(target)
    if enc.problem is None:
        return [], SearchStatus(kind, NONE)
    found: list[Found] = []
    parts = Parts()
    for failure_kind in [k for k in FAILURE_KINDS if k in enc.failures][:limit]:
        allocated = [] if failure_kind == NO_ROUTE else [enc.ok, enc.sized]
        constraints = [enc.valid, *allocated, enc.failures[failure_kind], *element_bound(enc, max_elements)]
        answer = session.search(constraints, f"-{failure_kind}")
        what = f"the {failure_kind} query"
        if answer.status == "unknown":
            parts.left_open(what, answer)
        if answer.status != "sat":
            parts.decided += [f"{what} (none)"] if answer.status == "unsat" else []
            continue
        model, minimal = parts.minimized(session, constraints, enc.shape.variables, answer.model)
        dims = concrete_dims(enc.shape, model)
        found.append(replace(_replay_failure(target, dims, failure_kind, _evaluate(enc, model)), minimal=minimal))
        parts.decided.append(f"{what} (a shape)")
    return found, _status(kind, found, parts, session)


def _replay_failure(target: Target, dims: dict[str, Any], kind: str, expected: int) -> Found:
    """Return the failing shape replayed: the route ORT picks (none for `no_route`) and its error
    of this kind; raise EncodingMismatch where the concrete dispatch does not fail so."""
    problem = runtime_problem(concrete_geometry(target, dims))
    outcome = dispatch(problem, target.config)
    if kind == NO_ROUTE:
        if outcome.failure_kind != NO_ROUTE:
            raise mismatch("runtime-failure", dims, "the concrete cascade picks a route there")
        return Found(dims, 0, (), f"{kind}: {outcome.failure}")
    failed = [f for b in outcome.backends for f in route_failures(CONCRETE, problem, target.config, b)
              if f.kind == kind and f.cond]
    if not failed:
        raise mismatch("runtime-failure", dims, f"the concrete dispatch does not fail with {kind} there")
    return replace(replay(target, dims, expected), failure=f"{kind}: {failed[0].message()}")


def shapes_document(target: Target, pairs: list[Pair], naive: tuple[int | None, list[Found]],
                    failures: list[Found] = ()) -> dict[str, Any]:
    """Return the shapes document (`attnws.spec.shapes_file`) of the counterexamples."""
    env = dict(target.env)
    records = []
    for index, pair in enumerate(pairs):
        label = f"{target.name}:{'+'.join(pair.differ)}:{index}"
        for role, found in (("smaller", pair.smaller), ("larger", pair.larger)):
            records.append(shape_record(concrete_geometry(target, found.dims), target.config, env,
                                        label="nonmonotonic", pair=label, role=role, discontinuity=list(pair.gates),
                                        runtime_bytes=found.runtime_bytes, backend=",".join(found.backends)))
    naive_bytes, shapes = naive
    for found in shapes:
        records.append(shape_record(concrete_geometry(target, found.dims), target.config, env,
                                    label="naive-cascade", runtime_bytes=found.runtime_bytes,
                                    backend=",".join(found.backends), naive_bytes=naive_bytes))
    for found in failures:
        records.append(shape_record(concrete_geometry(target, found.dims), target.config, env,
                                    label="runtime-failure", runtime_bytes=found.runtime_bytes,
                                    backend=",".join(found.backends), ort_failure=found.failure))
    return {"target": target.name, "shapes": records}
