"""A proof session: the gateway's queries for one theorem, with their cost added up.

Theorems, counterexample searches and the tight policy run several queries each (the main one,
minimization, witnesses); a `Session` forwards them to `gateway` under one `Limits` and keeps the
total rlimit spent, the wall time since it started and every answer (for a second opinion).

A session may have a wall-clock budget of its own (`seconds`: `attnws counterexamples` gives each
search one, `--max-search-seconds`): a query running at its end is cancelled, and every query
asked after it is answered unknown without being run, so the search ends promptly. Every answer a
wall clock stopped (that budget, the gateway's ceiling or --timeout-ms) is kept in `cuts`: what
the search decided then depends on the machine, and its caller must say so rather than report a
verdict. With `progress`, the session tells it, before each query and about once a second while
one runs, how many queries it has asked and the seconds since it started.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from . import gateway
from .domain import conj
from .gateway import Answer, Deadline, Limits

CLIMB_STEPS = 12  # "term > best" questions before the maximum search bisects instead
# A minimization query only makes a witness canonical (one not sat keeps the current value), so it
# gets this share of a decision's rlimit and no second seed: on Gemma's nonmonotonic pair the
# undecided ones cost 63 of the theorem's 83 s at the full budget.
MINIMIZE_SHARE = 4


def budget_reason(seconds: float, flag: str) -> str:
    """Return why a search cut by its wall-clock budget is undecided, naming the flag that moves it."""
    return (f"cut by the wall-clock limit of {seconds:g} s per search (raise {flag}, or give inf; a search "
            "cut by the clock depends on the machine's speed and load)")


class Session:
    """Forward queries to the gateway under fixed limits; tally rlimit and time (see the module
    docstring for `seconds`, `flag`, `progress` and `label`)."""

    def __init__(self, name: str, limits: Limits, *, seconds: float | None = None,
                 flag: str = "--max-search-seconds", progress: Callable[[str], None] | None = None,
                 label: str = "") -> None:
        self.name = name
        self.limits = limits
        self.rlimit = 0
        self.answers: list[Answer] = []
        self.cuts: list[str] = []  # the reasons of the answers a wall clock stopped
        self.skipped = 0  # queries asked past the budget, answered unknown without being run
        self.budget = None if seconds is None or math.isinf(seconds) else seconds
        self._start = time.perf_counter()
        self.deadline = (None if self.budget is None else
                         Deadline(time.monotonic() + self.budget, budget_reason(self.budget, flag)))
        self.progress = progress
        self.label = label or name

    @property
    def seconds(self) -> float:
        """Wall seconds since the session started."""
        return time.perf_counter() - self._start

    @property
    def queries(self) -> int:
        """The queries run so far (not those asked past the budget, which are not run)."""
        return len(self.answers) - self.skipped

    @property
    def cut(self) -> str:
        """Why a wall clock stopped one of the session's queries ('' when none was)."""
        return self.cuts[0] if self.cuts else ""

    def _tell(self, minimizing: bool, running: float | None = None) -> None:
        if self.progress is None:
            return
        of = f" of {self.budget:g} s" if self.budget is not None else ""
        what = " (minimizing a finding)" if minimizing else ""
        now = f", running {running:.0f} s" if running is not None else ""
        self.progress(f"{self.label}: {self.seconds:.0f} s{of} elapsed, query {self.queries + 1}{what}{now}")

    def search(self, constraints: Sequence[Any], tag: str = "", *, minimizing: bool = False) -> Answer:
        """Return whether the constraints are satisfiable (see `gateway.search`); a `minimizing`
        query runs on a share of the rlimit with one seed (MINIMIZE_SHARE). Past the session's
        wall-clock budget the answer is unknown (`clock`) and the query is not run."""
        if self.deadline is not None and self.deadline.remaining() <= 0:
            answer = Answer("unknown", None, self.deadline.reason, 0.0, 0, f"{self.name}{tag}", clock=True)
            self.skipped += 1
            self.answers.append(answer)
            self.cuts.append(answer.reason)
            return answer
        self._tell(minimizing)
        clocks: dict[str, Any] = {}  # only what this session has: a session without them asks as it always did
        if self.deadline is not None:
            clocks["deadline"] = self.deadline
        if self.progress is not None:
            clocks["waiting"] = lambda running: self._tell(minimizing, running)
        if minimizing:
            limits = replace(self.limits, rlimit=max(1, self.limits.rlimit // MINIMIZE_SHARE))
            answer = gateway.search(f"{self.name}{tag}", constraints, limits, retry=False, **clocks)
        else:
            answer = gateway.search(f"{self.name}{tag}", constraints, self.limits, **clocks)
        self.rlimit += answer.rlimit
        self.answers.append(answer)
        if answer.status == "unknown" and answer.clock:
            self.cuts.append(answer.reason)
        return answer

    def minimize(self, constraints: Sequence[Any], variables: Sequence[Any], model: dict[str, int]) -> dict[str, int]:
        """Return a model of the constraints whose variables are lexicographically minimal (each
        in turn: first whether any smaller value is possible, which settles a variable the ones
        before it fix in one query, then a binary search), starting from a known model; a query
        that is not sat keeps the current value. Makes counterexamples canonical rather than
        whatever Z3 found first."""
        fixed: list[Any] = []
        best = dict(model)
        for var in variables:
            name = var.decl().name()
            if name not in best:
                continue
            lo, hi = 0, best[name]
            if hi > 0:
                answer = self.search([*constraints, *fixed, var <= hi - 1], "-min", minimizing=True)
                if answer.status == "sat":
                    best, hi = answer.model, answer.model[name]
                else:
                    lo = hi
            while lo < hi:
                mid = (lo + hi) // 2
                answer = self.search([*constraints, *fixed, var <= mid], "-min", minimizing=True)
                if answer.status == "sat":
                    best, hi = answer.model, answer.model[name]
                else:
                    lo = mid + 1
            fixed.append(var == hi)
        return best

    def maximize(self, term: Any, constraints: Sequence[Any], uppers: Sequence[int],
                 evaluate: Callable[[Any, dict[str, int]], Any],
                 seeds: Sequence[dict[str, int]] = ()) -> tuple[int, dict[str, int]] | None:
        """Return (the maximum of term subject to the constraints, a model attaining it), or None
        when the constraints are unsatisfiable or a query is not decided. The maximum is
        established, not guessed: starting from the best of a first model and the `seeds` that
        satisfy the constraints (models tried concretely, such as the box's corners), "term >
        best" is asked a few times, each sat answer raising best, until it is unsat (the
        proof); where the values climb slowly, or a step is undecided, the first of `uppers` that
        "term > upper" is unsat bounds the maximum and a binary search below it ends with
        "term > max" unsat.
        `evaluate(term, model)` reads a value (or a condition's truth) off a model."""
        first = self.search(constraints, "-max")
        if first.status != "sat":
            return None
        lo, best = evaluate(term, first.model), first.model
        whole = conj(*constraints)
        for seed in seeds:
            if evaluate(whole, seed) is True and evaluate(term, seed) > lo:
                lo, best = evaluate(term, seed), dict(seed)
        for _ in range(CLIMB_STEPS):
            answer = self.search([*constraints, term > lo], "-climb")
            if answer.status == "unsat":
                return lo, best
            if answer.status != "sat":
                break  # a hard step: the bisection's questions may be decided where this one was not
            lo, best = evaluate(term, answer.model), answer.model
        hi = None
        for upper in uppers:
            answer = self.search([*constraints, term > upper], "-max")
            if answer.status == "unsat":
                hi = upper
                break
        if hi is None:
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            answer = self.search([*constraints, term >= mid], "-max")
            if answer.status == "sat":
                lo, best = evaluate(term, answer.model), answer.model
            elif answer.status == "unsat":
                hi = mid - 1
            else:
                return None
        return lo, best
