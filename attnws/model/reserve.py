"""What to reserve for a model: per node ORT's bound, the proven maximum and each memory pattern's,
and the model's peak and sum of each.

Nodes run one after another, so their operator-owned workspaces do not add up unless a planner
keeps them alive together: the **peak** (the largest node's) is what ORT's arena needs, reusing
one workspace as the nodes run in sequence; the **sum** (every node counted, identical layers
included) is what a planner needs that keeps every node's workspace alive together. Both are given
for ORT's bound (the Level-1 estimate; attnws's own for MultiHeadAttention), for the proven
maxima, and for each memory pattern.

A memory pattern (`--pattern NAME:DIM=RANGE`) names operator dimensions (batch, seq, tokens,
kv_seq, past) and applies to each node's own target: clipped to the node's box; a dimension the
node does not have (past on a node without a cache) or a range the node's box does not meet makes
the pattern not apply to that node, which then counts its whole proven maximum in that pattern's
totals. A pattern whose maximum is not PROVED counts the node's whole proven maximum too. A node
the solver's target cannot state (`NodeChecks.unprovable`, why in words) keeps its estimate's
bound, for the whole and for every pattern.

Nothing here loads the solver: `prove` fills these records. Bytes throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from ..spec.errors import InvalidArgument, UsageError
from ..spec.families import DIMENSION_LABELS
from ..spec.target import DimRange, Pattern, Target, parse_patterns
from .registry import reader_for
from .report import NodeReport

PROVEN_MAXIMUM = "proven maximum"  # TightPolicy.method when the maximum was decided

# Why a node's target has no range for a pattern dimension, in words, where its reader says nothing.
_ABSENT = {"past": "the node has no past_key / past_value (no cache)"}


def parse_pattern_flags(texts: Iterable[str]) -> tuple[Pattern, ...]:
    """Return the --pattern flags as patterns; a malformed one or a name given twice is a usage error."""
    try:
        return parse_patterns(texts)
    except InvalidArgument as error:
        raise UsageError(str(error)) from None


def pattern_box(target: Target, pattern: Pattern) -> tuple[Pattern | None, str]:
    """Return (the pattern clipped to the node's target, "") or (None, why it does not apply)."""
    dims = []
    for dim, r in pattern.dims:
        own = getattr(target, dim)
        if own is None:
            return None, reader_for(target.op).absent_dim(dim) or _ABSENT.get(dim, f"the node has no {dim}")
        lo, hi = max(r.lo, own.lo), min(r.hi, own.hi)
        if lo > hi:  # as `prove` refuses a pattern outside a target's box, for the node's
            return None, (f"{dim} {r.lo}..{r.hi} is not inside the node's {own.lo}..{own.hi}: the pattern misses the "
                          f"node's {DIMENSION_LABELS.get(dim, dim)}")
        dims.append((dim, DimRange(lo, hi)))
    box = Pattern(pattern.name, tuple(dims))
    try:
        replace(target, patterns=(box,))  # the target's own checks
    except InvalidArgument as error:
        return None, str(error)
    return box, ""


@dataclass(frozen=True)
class PatternCheck:
    """One memory pattern on one node: whether it applies (why not, in words), the box proved
    (the pattern clipped to the node's target), the `pattern_maximum` result, and what the node
    reserves under the pattern (None where nothing bounds it)."""

    pattern: Pattern
    box: Pattern | None
    reason: str  # why the pattern does not apply ("" when it does)
    result: Any  # the solver's ProofResult, None when the pattern does not apply
    reserve_bytes: int | None

    @property
    def applies(self) -> bool:
        return self.box is not None

    @property
    def proved(self) -> bool:
        return self.result is not None and self.result.verdict.value == "PROVED"

    def as_dict(self) -> dict[str, Any]:
        return {"applies": self.applies, "reason": self.reason or None,
                "dims": self.box.as_dict() if self.box is not None else self.pattern.as_dict(),
                "result": self.result.as_dict(timing=False) if self.result is not None else None,
                "reserve_bytes": self.reserve_bytes}


@dataclass(frozen=True)
class NodeChecks:
    """One sized node's proof results (empty without --prove), its tight policy (the proven
    maximum; None without --policy tight or --pattern, or when `unprovable`), its memory
    patterns, `shared_from`: the node whose identical target was run, `unprovable`: why the
    solver's target cannot state the node ("" when it can) and `tight_asked`: whether the tight
    policy was asked for (`--policy tight` or a pattern)."""

    node: NodeReport
    results: tuple[Any, ...]
    tight: Any
    shared_from: str
    patterns: tuple[PatternCheck, ...] = ()
    unprovable: str = ""
    tight_asked: bool = False

    @property
    def ort_bytes(self) -> int | None:
        """Return ORT's estimate of the node, None where it declares nothing."""
        return self.node.estimate.total_workspace_bytes if self.node.estimate.ok else None

    @property
    def tight_total_bytes(self) -> int | None:
        """Return what the node reserves: the tight policy's root when one was proven, else ORT's
        (None: nothing bounds the node)."""
        if self.tight is None or self.tight.tight_total_bytes is None:
            return self.ort_bytes
        return self.tight.tight_total_bytes

    @property
    def proven(self) -> bool:
        """Whether the node's reservation is the proven maximum (not a fallback)."""
        return self.tight is not None and self.tight.method == PROVEN_MAXIMUM

    def pattern_bytes(self, name: str) -> int | None:
        return next((p.reserve_bytes for p in self.patterns if p.pattern.name == name), self.tight_total_bytes)


def peak_and_sum(values: list[int | None]) -> dict[str, int | None]:
    """Return the peak and the sum of the values, both None when there are none (nothing sized)
    or one is None (a node nothing bounds)."""
    if not values or any(v is None for v in values):
        return {"peak": None, "sum": None}
    return {"peak": max(values), "sum": sum(values)}


def totals(checks: list[NodeChecks] | None, patterns: tuple[Pattern, ...], ort: list[int]) -> dict[str, Any]:
    """Return {ort: {peak, sum}, proven: {peak, sum} or None, patterns: {NAME: {peak, sum}}} over
    the sized nodes (`ort`: their Level-1 totals; the checks, when the solver ran, per sized node)."""
    checks = checks or []
    tight = any(c.tight is not None or c.tight_asked for c in checks)
    return {
        "ort": peak_and_sum(ort),
        "proven": peak_and_sum([c.tight_total_bytes for c in checks]) if tight else None,
        "patterns": {p.name: peak_and_sum([c.pattern_bytes(p.name) for c in checks]) for p in patterns},
    }
