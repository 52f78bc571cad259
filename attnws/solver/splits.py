"""Flash's split-KV workspace over the key length: the searches and the proof ORT's authors
could only sweep (#32453, #32617).

A `KeyLengthCase` fixes everything of one GroupQueryAttention Flash route but the key length
T (the total sequence length), which ranges over [lo, hi]. The spec's own recipe
(`attnws.spec.gqa.recipe.complete`, whose split count is `attnws.spec.backends.flash.split_count`,
the heuristic's float decisions unrolled) is evaluated over a symbolic T:

- `nonmonotonic_pairs`: every T with workspace(T + 1) < workspace(T), smallest first; each is
  replayed through the concrete spec.
- `envelope_dominates`: ORT's FlashBackendEnvelope (the split count's structural ceiling
  min(128, SMs, key blocks)) is at least the recipe's workspace at every T: PROVED, or REFUTED
  with the smallest T.
Every answer is the gateway's: sat, unsat, or unknown with the limit hit (never "none" for a
search that was not decided).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import z3

from attnws.spec.domain import CONCRETE
from attnws.spec.errors import EncodingMismatch
from attnws.spec.gqa.estimate import flash_envelope
from attnws.spec.gqa.problem import GqaWorkspaceProblem, Preprocess
from attnws.spec.gqa.recipe import Route, complete, compose, preparation
from attnws.spec.problem import Backend

from .counterexamples import FOUND, NONE, UNDECIDED, SearchStatus
from .domain import SymbolicDomain, holds_all
from .gateway import Limits, Verdict
from .session import Session

KEY_LENGTH = "total_seq"


@dataclass(frozen=True)
class KeyLengthCase:
    """A GroupQueryAttention Flash route with every dimension fixed but the key length T in
    [lo, hi]; `sm_count` is the device's multiprocessor count."""

    problem: GqaWorkspaceProblem
    sm_count: int
    lo: int
    hi: int
    sm: int = 80
    local_window_size: int = -1
    fast_decode: bool = False

    def route(self, total: Any) -> Route:
        return Route(Backend.FLASH, self.sm, self.sm_count, total, self.local_window_size, self.fast_decode)

    def workspace(self, total: int) -> int:
        """The concrete complete workspace (bytes) at key length total."""
        return complete(self.problem, self.route(total)).total_workspace_bytes

    def splits(self, total: int) -> int:
        return complete(self.problem, self.route(total)).backend.splits

    def envelope(self, total: Any, d: Any = CONCRETE) -> Any:
        """ORT's bound for this route: preparation plus FlashBackendEnvelope at key length total."""
        prep = preparation(self.problem, Preprocess.FLASH, self.fast_decode, d)
        backend = flash_envelope(d, self.problem, total, self.sm_count, self.local_window_size, self.fast_decode)
        return compose(d, prep, backend).total_workspace_bytes


@dataclass(frozen=True)
class Drop:
    """Key length `total` needs more workspace than `total + 1` (bytes and split counts of both)."""

    total: int
    bytes_before: int
    bytes_after: int
    splits_before: int
    splits_after: int

    def as_dict(self) -> dict[str, int]:
        return {"total_seq": self.total, "next_total_seq": self.total + 1, "bytes": self.bytes_before,
                "next_bytes": self.bytes_after, "splits": self.splits_before, "next_splits": self.splits_after}


def _symbolic(case: KeyLengthCase, total: Any, d: SymbolicDomain) -> tuple[Any, Any]:
    """(workspace term, validity) of the case at a symbolic key length."""
    mark = d.mark()
    value = complete(case.problem, case.route(total), d).total_workspace_bytes
    return value, holds_all(d.since(mark))


def _replay(case: KeyLengthCase, total: int) -> Drop:
    before, after = case.workspace(total), case.workspace(total + 1)
    if not after < before:
        raise EncodingMismatch(f"the solver's key length {total} is no drop in the concrete spec: "
                               f"{before} then {after} bytes")
    return Drop(total, before, after, case.splits(total), case.splits(total + 1))


def drops_smallest_first(session: Session, base: list[Any], total: Any, floor: int, replay: Callable[[dict], Any],
                         limit: int | None) -> tuple[list[Any], SearchStatus]:
    """The models of `base` (a drop at key length `total`), smallest key length first from
    `floor`, each shrunk until no smaller one is left above the previous (so the list has no
    gaps) and replayed by `replay(model)` (at most `limit`); and how the search ended."""
    name = total.decl().name() if z3.is_const(total) else str(total)
    found: list[Any] = []
    while limit is None or len(found) < limit:
        answer = session.search([*base, total >= floor], logic=None)
        if answer.status == "unsat":
            return found, SearchStatus("nonmonotonic", FOUND if found else NONE)
        if answer.status != "sat":
            return found, SearchStatus("nonmonotonic", FOUND if found else UNDECIDED, False, answer.reason)
        model = answer.model
        while (smaller := session.search([*base, total >= floor, total < model[name]], "-smaller",
                                         logic=None)).status == "sat":
            model = smaller.model
        found.append(replay(model))
        if smaller.status != "unsat":
            reason = f"whether a drop below key length {model[name]} exists was not decided: {smaller.reason}"
            return found, SearchStatus("nonmonotonic", FOUND, False, reason)
        floor = model[name] + 1
    return found, SearchStatus("nonmonotonic", FOUND, False, f"stopped at the limit of {limit} (raise --limit)")


def nonmonotonic_pairs(case: KeyLengthCase, limits: Limits, limit: int | None = None) -> tuple[list[Drop], SearchStatus]:
    """Every key length T in [lo, hi - 1] whose workspace exceeds that of T + 1, smallest first
    (at most `limit`), and how the search ended (`drops_smallest_first`)."""
    d = SymbolicDomain()
    total = z3.Int(KEY_LENGTH)
    now, valid_now = _symbolic(case, total, d)
    nxt, valid_next = _symbolic(case, total + 1, d)
    base = [total >= case.lo, total + 1 <= case.hi, valid_now, valid_next, nxt < now]
    session = Session("flash-key-length-drops", limits)
    return drops_smallest_first(session, base, total, case.lo, lambda model: _replay(case, model[KEY_LENGTH]), limit)


@dataclass(frozen=True)
class EnvelopeVerdict:
    """Whether ORT's Flash envelope covers the recipe at every key length; `counterexample` (the
    smallest T where it does not) exactly when REFUTED, `reason` exactly when UNKNOWN."""

    verdict: Verdict
    counterexample: int | None = None
    reason: str = ""


def envelope_dominates(case: KeyLengthCase, limits: Limits) -> EnvelopeVerdict:
    """Prove recipe(T) <= envelope(T) for every valid T in [lo, hi]."""
    d = SymbolicDomain()
    total = z3.Int(KEY_LENGTH)
    value, valid = _symbolic(case, total, d)
    bound = case.envelope(total, d)
    session = Session("flash-envelope", limits)
    premises = [total >= case.lo, total <= case.hi, valid]
    answer = session.search([*premises, bound < value], logic=None)
    if answer.status == "unsat":
        return EnvelopeVerdict(Verdict.PROVED)
    if answer.status != "sat":
        return EnvelopeVerdict(Verdict.UNKNOWN, reason=answer.reason)
    smallest = answer.model[KEY_LENGTH]
    while (smaller := session.search([*premises, bound < value, total < smallest], "-smaller", logic=None)).status == "sat":
        smallest = smaller.model[KEY_LENGTH]
    if not case.envelope(smallest) < case.workspace(smallest):
        raise EncodingMismatch(f"key length {smallest} does not exceed the envelope in the concrete spec")
    return EnvelopeVerdict(Verdict.REFUTED, smallest)
