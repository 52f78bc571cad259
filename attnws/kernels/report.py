"""The validation report of one shape, and the comparison of non-monotonic pairs across reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..spec.layout import ATTENTION, PROJECTION
from .allocator import AllocationRecord
from .checks import ByteCheck

WORKSPACE_PURPOSES = (PROJECTION, ATTENTION)


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """The outcome of validating one shape on one backend. Bytes are bytes; errors are absolute.

    `backend` is None when the output is empty (ORT returns before allocating). `error` holds the
    specification's rejection of the shape, in which case nothing ran. `observed_untagged` is None
    in the simulator, where no memory manager can be observed. `reference_tokens` output rows were
    compared with the reference (all T unless the caller capped it).
    """

    shape: Mapping[str, Any]
    device: str
    backend: str | None = None
    recipe_allocations: tuple[tuple[str, int], ...] = ()
    allocations: tuple[AllocationRecord, ...] = ()
    allocations_match: bool = True
    observed_untagged: int | None = None
    bytes: ByteCheck = field(default_factory=lambda: ByteCheck(True, True))
    max_error: float = 0.0
    tolerance: float = 0.0
    reference_tokens: int = 0
    estimate_bytes: int | None = None
    estimate_status: str = ""
    error: str = ""

    @property
    def recipe_bytes(self) -> int:
        return sum(nbytes for _, nbytes in self.recipe_allocations)

    @property
    def allocated_bytes(self) -> int:
        return sum(r.nbytes for r in self.allocations if r.purpose in WORKSPACE_PURPOSES)

    @property
    def within_estimate(self) -> bool | None:
        return None if self.estimate_bytes is None else self.allocated_bytes <= self.estimate_bytes

    @property
    def failures(self) -> tuple[str, ...]:
        """Return the name of each failed check (empty when the shape passed)."""
        failed = {
            "rejected": bool(self.error),
            "allocations": not self.allocations_match,
            "untagged allocations": bool(self.observed_untagged),
            "guard bands": not self.bytes.guard_bands_intact,
            "untouched bytes": not self.bytes.untouched_outside_views,
            "reference": not self.max_error <= self.tolerance,
            "estimate": self.within_estimate is False,
        }
        return tuple(name for name, bad in failed.items() if bad)

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": dict(self.shape), "device": self.device, "backend": self.backend,
            "recipe_bytes": self.recipe_bytes, "allocated_bytes": self.allocated_bytes,
            "recipe_allocations": [{"purpose": p, "bytes": b} for p, b in self.recipe_allocations],
            "allocations": [r.as_dict() for r in self.allocations], "allocations_match": self.allocations_match,
            "observed_untagged": self.observed_untagged,
            "guard_bands_intact": self.bytes.guard_bands_intact, "first_guard_write": self.bytes.first_guard_write,
            "untouched_outside_views": self.bytes.untouched_outside_views,
            "first_stray_write": self.bytes.first_stray_write,
            "max_error": self.max_error, "tolerance": self.tolerance, "reference_tokens": self.reference_tokens,
            "estimate_bytes": self.estimate_bytes, "estimate_status": self.estimate_status,
            "within_estimate": self.within_estimate, "error": self.error,
            "failures": list(self.failures), "passed": self.passed,
        }


ROLE_ORDER = {"smaller": 0, "larger": 1}
PAIR_DIMENSIONS = ("tokens", "batch", "seq", "heads", "head_size", "v_head_size", "input_hidden")


def pair_comparisons(reports: list[ValidationReport]) -> list[dict[str, Any]]:
    """Return, for each `pair` label, its members (role "smaller" first, then "larger", else in
    document order) with their allocated bytes, and whether the smaller shape allocated more."""
    pairs: dict[str, list[ValidationReport]] = {}
    for report in reports:
        if "pair" in report.shape:
            pairs.setdefault(str(report.shape["pair"]), []).append(report)
    out = []
    for name, members in pairs.items():
        members = sorted(members, key=lambda r: ROLE_ORDER.get(r.shape.get("role"), len(ROLE_ORDER)))
        if len(members) > 1:
            differ = [k for k in PAIR_DIMENSIONS if len({r.shape[k] for r in members}) > 1]
            out.append({"pair": name,
                        "members": [{"role": r.shape.get("role"), "backend": r.backend,
                                     "dimensions": {k: r.shape[k] for k in differ},
                                     "allocated_bytes": r.allocated_bytes} for r in members],
                        "smaller_allocates_more": members[0].allocated_bytes > members[-1].allocated_bytes})
    return out
