"""The one place that creates Z3 solvers and calls `check()`.

Every query runs with a fixed random seed and its own resource limit (`rlimit`, deterministic,
unlike wall-clock timeouts; an optional timeout can be added on top), in a fresh Z3 context that
reads the query from its SMT-LIB 2 text: a query in the shared context can be decided alone and
not after other queries (Z3's search depends on its context's state), and even one translated
from it was seen to be (a hard query decided alone, not after the gate-coverage searches had run
in the same process); read from its text, it holds nothing of the shared context. `prove` decides validity by refuting the
negation: unsat is PROVED, sat is REFUTED with the model, anything else is UNKNOWN with the
solver's reason and what would raise the limit it hit: UNKNOWN is never reported as a proof.
`search` asks for a witness. Ctrl-C is never swallowed: the check runs in a worker thread, an
interrupt in the main thread cancels it and KeyboardInterrupt is raised again. Some of Z3's
nonlinear procedures do not count resource units, so the rlimit alone can leave a query running
for ever; every query therefore also has a wall-clock ceiling (`--timeout-ms` when given, else
one proportional to its rlimit, `SECONDS_PER_RLIMIT`), past which it is cancelled and UNKNOWN, its
reason naming the flag. It is a safety net that a query within its rlimit never reaches. A search
(`session.Session`) may also give a query a `Deadline`, the end of its own wall-clock budget: the
query is then cancelled there, and one asked after it is not run. An answer a wall clock stopped
(the deadline, the ceiling or `--timeout-ms`) says so (`Answer.clock`): it depends on the machine's
speed and load, so a caller never reads it as a verdict. With `Limits.smt2_dir` set, each query is
also written as a standalone SMT-LIB2 file.
"""

from __future__ import annotations

import enum
import hashlib
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import z3

from attnws.spec.errors import UsageError

from .domain import as_term, is_symbolic
from .settings import DEFAULT_RLIMIT, DEFAULT_SECOND_RLIMIT, MAX_RLIMIT

DEFAULT_SEED = 0
POLL_SECONDS = 0.05  # how often the main thread looks up from a running check (to take Ctrl-C)
WAITING_SECONDS = 1.0  # how often a running check tells its `waiting` callback the time it has taken
# The wall-clock ceiling of a query without --timeout-ms: Z3 spends about 0.5 to 1 million
# resource units a second on these queries alone, and about 0.7 million when the tests of other
# engineers share a 2-core machine (measured: a minimization query spent its 5,000,000 units in
# 7.4 s at a load of 4.7); the default 20,000,000 units are allowed 60 seconds, twice what a query
# needs even then, so that one sharing the machine is still decided by its rlimit, never by the clock.
SECONDS_PER_RLIMIT = 3e-6


@dataclass(frozen=True)
class Deadline:
    """The end of a search's wall-clock budget: `at` on `time.monotonic()`'s clock, and the reason
    an answer cut there gives (naming the flag that moves it)."""

    at: float
    reason: str

    def remaining(self) -> float:
        """Return the seconds left (negative once past)."""
        return self.at - time.monotonic()


class Verdict(enum.Enum):
    """A theorem's outcome. VACUOUS: the claim holds only because no shape is valid, none runs, or
    ORT declares no estimate, so nothing was shown. NOT_APPLICABLE: the theorem states nothing
    about the operator's family (its fields say why); it counts as PROVED for the exit code.
    Combining verdicts keeps the worst: REFUTED > VACUOUS > UNKNOWN > NOT_APPLICABLE > PROVED."""

    PROVED = "PROVED"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    UNKNOWN = "UNKNOWN"
    VACUOUS = "VACUOUS"
    REFUTED = "REFUTED"

    @staticmethod
    def worst(verdicts: Iterable["Verdict"]) -> "Verdict":
        """Return the worst verdict (PROVED for none)."""
        order = [Verdict.PROVED, Verdict.NOT_APPLICABLE, Verdict.UNKNOWN, Verdict.VACUOUS, Verdict.REFUTED]
        return max(verdicts, key=order.index, default=Verdict.PROVED)


@dataclass(frozen=True)
class Limits:
    """Per-query limits: rlimit in Z3 resource units, optional timeout in milliseconds."""

    rlimit: int = DEFAULT_RLIMIT
    timeout_ms: int | None = None
    seed: int = DEFAULT_SEED
    smt2_dir: Path | None = None
    second_opinion: str | None = None  # a second solver re-decides the queries (their SMT-LIB text is kept)
    second_rlimit: int = DEFAULT_SECOND_RLIMIT  # the second solver's own resource units per query

    def __post_init__(self) -> None:
        if not isinstance(self.rlimit, int) or not 0 < self.rlimit <= MAX_RLIMIT:
            raise UsageError(f"rlimit = {self.rlimit!r} must be a positive integer of at most {MAX_RLIMIT:,} "
                             "(Z3 keeps it in 32 bits)")
        if not isinstance(self.second_rlimit, int) or not 0 < self.second_rlimit <= MAX_RLIMIT:
            raise UsageError(f"second_rlimit = {self.second_rlimit!r} must be a positive integer of at most "
                             f"{MAX_RLIMIT:,}")
        if self.timeout_ms is not None and (not isinstance(self.timeout_ms, int) or not 0 < self.timeout_ms <= MAX_RLIMIT):
            raise UsageError(f"timeout_ms = {self.timeout_ms!r} must be a positive integer of at most {MAX_RLIMIT:,} "
                             "(Z3 keeps it in an unsigned 32-bit parameter) or None")


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's outcome: `status` is sat / unsat / unknown; `model` maps each integer constant
    to its value when sat; `reason` (unknown only) is Z3's reason_unknown with the limit that was
    hit and the flag that raises it; `rlimit` the resource units spent; `smt2` the query as a
    standalone SMT-LIB 2 script when the limits ask to keep it; `clock` (unknown only) whether a
    wall clock stopped it (a search's deadline, the ceiling or --timeout-ms), so that another run on
    a faster or idler machine may decide it."""

    status: str
    model: dict[str, int] | None
    reason: str
    seconds: float
    rlimit: int
    name: str = ""
    smt2: str = ""
    clock: bool = False

    @property
    def verdict(self) -> Verdict:
        """The verdict when the query was the negation of a claim."""
        return {"unsat": Verdict.PROVED, "sat": Verdict.REFUTED}.get(self.status, Verdict.UNKNOWN)


def _model_values(model: z3.ModelRef) -> dict[str, int]:
    values: dict[str, int] = {}
    for decl in model.decls():
        value = model[decl]
        if z3.is_int_value(value):
            values[decl.name()] = value.as_long()
    return dict(sorted(values.items()))


def _rlimit_spent(solver: z3.Solver) -> int:
    stats = solver.statistics()
    return int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0


def write_smt2(directory: Path, name: str, text: str) -> Path:
    """Write a query's SMT-LIB text as a standalone file named after the query; return its path."""
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120]
    path = directory / f"{safe}-{digest}.smt2"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(f"; attnws query {name}\n{text}")
    except OSError as error:
        raise UsageError(f"--smt2-dir: cannot write the query file {path} ({error.strerror or error})") from None
    return path


def timed_out(seconds: float, limits: Limits) -> bool:
    """Return whether an undecided query ran into its --timeout-ms (a wall clock, not its rlimit)."""
    return limits.timeout_ms is not None and seconds * 1000 >= limits.timeout_ms * 0.95


def explain_unknown(reason: str, spent: int, seconds: float, limits: Limits) -> str:
    """Return Z3's reason with the limit it hit and the flag that raises it."""
    if timed_out(seconds, limits):
        return (f"{reason}: the time limit of {limits.timeout_ms:,} ms per query was reached "
                "(raise --timeout-ms, or drop it)")
    if spent >= limits.rlimit * 0.95 or "resource" in reason:
        return (f"{reason}: the resource limit of {limits.rlimit:,} units per query was reached "
                f"(raise --rlimit, at most {MAX_RLIMIT:,})")
    return f"{reason}: Z3 gave up before any limit (nonlinear arithmetic is incomplete; a larger --rlimit may not help)"


def _check(solver: z3.Solver, ctx: z3.Context, ceiling: float,
           waiting: Callable[[float], None] | None = None) -> tuple[Any, bool]:
    """Run solver.check() in a worker thread; return (its result, whether the wall-clock ceiling
    in seconds cancelled it). `waiting(seconds)` is told, about once a second, how long the check
    has run (from this, the main thread). An interrupt of the main thread cancels the search
    (Z3_interrupt) and is raised again once the worker has stopped."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = solver.check()
        except BaseException as error:  # re-raised in the main thread below
            outcome["error"] = error

    worker = threading.Thread(target=work, name="z3-check", daemon=True)
    start = time.perf_counter()
    worker.start()
    ceiling_hit = False
    told = 0.0
    try:
        while worker.is_alive():
            worker.join(POLL_SECONDS)
            elapsed = time.perf_counter() - start
            if worker.is_alive() and not ceiling_hit and elapsed > ceiling:
                ceiling_hit = True
                ctx.interrupt()
            if waiting is not None and worker.is_alive() and elapsed - told >= WAITING_SECONDS:
                told = elapsed
                waiting(elapsed)
    except KeyboardInterrupt:
        ctx.interrupt()
        worker.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], ceiling_hit


def wall_ceiling(limits: "Limits") -> float:
    """Return a query's wall-clock ceiling in seconds: its --timeout-ms with a second of grace
    (Z3 applies it itself; the ceiling only catches a procedure that ignores it), else one
    proportional to its rlimit."""
    if limits.timeout_ms is not None:
        return limits.timeout_ms / 1000 + 1
    return limits.rlimit * SECONDS_PER_RLIMIT


def search(name: str, constraints: Sequence[Any], limits: Limits, retry: bool = True, *,
           deadline: Deadline | None = None, waiting: Callable[[float], None] | None = None) -> Answer:
    """Return whether the constraints are satisfiable (sat with the model, unsat, or unknown).

    The query is read into a fresh context, so its answer does not depend on any query before
    it, and is decided by Z3's SMT core alone (`_solver`), so it does not depend on the machine's
    load either. A query left undecided is asked once more with a second budget as large as the
    first and the next random seed (Z3's search is seed-sensitive near its limit); it is UNKNOWN
    only when both are undecided, and the rlimit spent counts both (`retry=False`: asked once).
    With a `deadline` the query is cancelled there (unknown, `clock`, the deadline's reason) and
    not asked again; `waiting(seconds)` hears about once a second how long a check has run."""
    first = _search_once(name, constraints, limits, limits.seed, deadline, waiting)
    if first.status != "unknown" or not retry or (deadline is not None and deadline.remaining() <= 0):
        return first
    second = _search_once(name, constraints, replace(limits, smt2_dir=None), limits.seed + 1, deadline, waiting)
    spent = first.rlimit + second.rlimit
    chosen = second if second.status != "unknown" else first
    return replace(chosen, rlimit=spent, seconds=first.seconds + second.seconds, smt2=first.smt2 or chosen.smt2,
                   clock=chosen.clock or (chosen.status == "unknown" and second.clock))


def canonical_terms(constraints: Sequence[Any], ctx: z3.Context) -> list[Any]:
    """Return the constraints as terms of the fresh context `ctx`, read from their SMT-LIB 2 text:
    nothing of the shared context they were built in comes with them (module docstring)."""
    kept = [as_term(c) for c in constraints if is_symbolic(c)]
    if any(c is False for c in constraints if not is_symbolic(c)):
        kept.append(z3.BoolVal(False))
    if not kept:
        return []
    text = z3.Solver(ctx=kept[0].ctx)
    text.add(*kept)
    return list(z3.parse_smt2_string(text.to_smt2(), ctx=ctx))


def _solver(ctx: z3.Context) -> z3.Solver:
    """Return a solver that is Z3's SMT core alone (the `smt` tactic). Z3's own strategies for a
    logic are not deterministic: QF_NIA's switches sub-solvers after fixed wall-clock periods
    (`try_for`: 2 s, then 3 s) and caps some steps by the whole process's memory, so a query near
    such a switch was decided on an idle machine and not on a loaded one (a route_monotonicity
    witness changed with the load). The core counts its work in rlimit units only."""
    return z3.Tactic("smt", ctx=ctx).solver()


def _search_once(name: str, constraints: Sequence[Any], limits: Limits, seed: int,
                 deadline: Deadline | None = None, waiting: Callable[[float], None] | None = None) -> Answer:
    if deadline is not None and deadline.remaining() <= 0:
        return Answer("unknown", None, deadline.reason, 0.0, 0, name, clock=True)
    ctx = z3.Context()
    terms = canonical_terms(constraints, ctx)
    solver = _solver(ctx)
    solver.set("random_seed", seed)
    solver.set("rlimit", limits.rlimit)
    solver.set("ctrl_c", False)
    if limits.timeout_ms is not None:
        solver.set("timeout", limits.timeout_ms)
    solver.add(*terms)
    text = solver.to_smt2() if limits.smt2_dir is not None or limits.second_opinion else ""
    if limits.smt2_dir is not None:
        write_smt2(limits.smt2_dir, name, text)
    kept = text if limits.second_opinion else ""
    ceiling = wall_ceiling(limits)
    by_deadline = deadline is not None and deadline.remaining() < ceiling
    start = time.perf_counter()
    result, ceiling_hit = _check(solver, ctx, deadline.remaining() if by_deadline else ceiling, waiting)
    seconds = time.perf_counter() - start
    spent = _rlimit_spent(solver)
    if ceiling_hit and result not in (z3.sat, z3.unsat):
        if by_deadline:
            return Answer("unknown", None, deadline.reason, seconds, spent, name, kept, clock=True)
        reason = (f"Z3 did not stop at its resource limit and was cancelled after {seconds:.0f} s of wall-clock time "
                  f"(raise --timeout-ms to give it longer, or --rlimit, which scales this ceiling)")
        return Answer("unknown", None, reason, seconds, spent, name, kept, clock=True)
    if result == z3.sat:
        return Answer("sat", _model_values(solver.model()), "", seconds, spent, name, kept)
    if result == z3.unsat:
        return Answer("unsat", None, "", seconds, spent, name, kept)
    reason = explain_unknown(solver.reason_unknown() or "unknown", spent, seconds, limits)
    return Answer("unknown", None, reason, seconds, spent, name, kept, clock=timed_out(seconds, limits))


def prove(name: str, premises: Sequence[Any], claim: Any, limits: Limits) -> Answer:
    """Return the answer to "premises imply claim": unsat of premises and not claim is a proof."""
    negated = z3.Not(claim) if is_symbolic(claim) else (not claim)
    return search(name, [*premises, negated], limits)
