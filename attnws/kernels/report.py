"""The validation report of one shape, and the comparison of non-monotonic pairs across reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..spec.families import DIMENSIONS
from .allocation_checks import Oversize, workspace_purposes
from .allocator import AllocationRecord
from .family_checks import Check
from .measure import Measurement
from .placement import Placement


@dataclass(frozen=True, slots=True)
class BufferReport:
    """One footprint buffer as placed and measured, in bytes: `reserved_bytes` of the recipe view it
    is placed at (the output: the output tensor), `footprint_bytes` its stated extent,
    `touched_bytes` the elements its writers really wrote, `unwritten_bytes` the part ORT
    documents its writer leaves alone."""

    name: str
    allocation: str
    offset: int
    reserved_bytes: int
    footprint_bytes: int
    touched_bytes: int
    unwritten_bytes: int

    @property
    def padding_bytes(self) -> int:
        """Return the reserved bytes beyond the footprint (0 when the buffer outgrows its view)."""
        return max(self.reserved_bytes - self.footprint_bytes, 0)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "allocation": self.allocation, "offset": self.offset,
                "reserved_bytes": self.reserved_bytes, "footprint_bytes": self.footprint_bytes,
                "touched_bytes": self.touched_bytes, "unwritten_bytes": self.unwritten_bytes,
                "padding_bytes": self.padding_bytes}


def buffer_reports(placement: Placement, measurement: Measurement) -> tuple[BufferReport, ...]:
    """Return a report per placed buffer (touched 0 where nothing ran)."""
    return tuple(BufferReport(b.name, b.allocation, b.offset, b.reserved_bytes, b.nbytes,
                              measurement.touched_bytes.get(b.name, 0), b.buffer.unwritten_bytes())
                 for b in placement.buffers)


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """The outcome of validating one shape on one backend. Bytes are bytes; errors are absolute.

    `backend` is None when the output is empty (ORT returns before allocating). `rejected` says ORT
    refuses the shape before any kernel runs, and `error` holds ORT's message (its status first);
    nothing ran. It is set only where ORT's own checks refuse the shape (`validate.refusal`: building
    the runtime problem, the dispatch, the recipe ORT sizes), never for an error of attnws's own
    (an `InternalError` propagates instead). `stages` are the stages run:
    none when the recipe cannot hold the footprint (unplaced, misaligned or undersized buffers).
    `observed_untagged` is None in the simulator, where no memory manager can be observed.
    `reference_tokens` output rows were compared with the reference (all T unless the caller capped it).
    A rejected shape (ORT's input checks refuse it, or its cascade runs no route) launched nothing
    and failed no check; it is counted apart from the failures, never as a kernel fault.
    `refused` says why the run was not launched although the checks before any launch passed or
    failed as reported: too large for the simulator or for the memory limit (`cost` holds the
    estimate), or (`unmodelled`) a route or feature the kernels here do not model, found before the
    recipe. A refusal is not a failure.

    `route` is the recipe's route in words beyond the backend (GroupQueryAttention's fast decode and
    split count; '' elsewhere), `recipe` the recipe's record. The family's own checks
    (`family_checks.Check`, each saying where it does not apply): `outside_regions` (buffers
    past their recipe region's room), `slack` (each workspace allocation within the footprint
    plus ORT's documented slack: the allocations in `oversized` fail it), `present_cache`, `lse`.
    `spare_bytes` (None until placed) and `untouched_regions` are what the recipe reserves beyond
    the footprint, reported, not failed; `launches_not_run`, ORT's launches the kernels here do
    not run, in words.
    """

    shape: Mapping[str, Any]
    device: str
    backend: str | None = None
    recipe_allocations: tuple[tuple[str, int], ...] = ()
    allocations: tuple[AllocationRecord, ...] = ()
    allocations_match: bool = True
    observed_untagged: int | None = None
    stages: tuple[str, ...] = ()
    buffers: tuple[BufferReport, ...] = ()
    unplaced: tuple[str, ...] = ()
    misaligned: tuple[str, ...] = ()
    undersized: tuple[str, ...] = ()
    overlapping: tuple[tuple[str, str], ...] = ()
    oversized: tuple[Oversize, ...] = ()
    measurement: Measurement = field(default_factory=Measurement)
    max_error: float = 0.0
    tolerance: float = 0.0
    reference_tokens: int = 0
    estimate_bytes: int | None = None
    estimate_status: str = ""
    error: str = ""
    rejected: bool = False
    refused: str = ""
    cost: Mapping[str, Any] | None = None
    unmodelled: bool = False
    route: str = ""
    recipe: Mapping[str, Any] | None = None
    outside_regions: Check = field(default_factory=Check)
    slack: Check = field(default_factory=Check)
    present_cache: Check = field(default_factory=Check)
    lse: Check = field(default_factory=Check)
    spare_bytes: int | None = None
    untouched_regions: tuple[tuple[str, int], ...] = ()
    launches_not_run: tuple[str, ...] = ()

    @property
    def recipe_bytes(self) -> int:
        return sum(nbytes for _, nbytes in self.recipe_allocations)

    @property
    def workspace_allocations(self) -> tuple[AllocationRecord, ...]:
        """Return the records of the workspace allocations (projection, attention, or the recipe's
        named requests), in order."""
        purposes = workspace_purposes(self.recipe_allocations)
        return tuple(r for r in self.allocations if r.purpose in purposes)

    @property
    def allocated_bytes(self) -> int:
        """Return the workspace payload bytes measured on the device."""
        return sum(r.nbytes for r in self.workspace_allocations)

    @property
    def within_estimate(self) -> bool | None:
        return None if self.estimate_bytes is None else self.allocated_bytes <= self.estimate_bytes

    @property
    def first_stray_write(self) -> str:
        """Return "stage: allocation@offset" of the first stray write, or ''."""
        stray = self.measurement.stray
        return f"{stray[0].stage}: {stray[0].allocation}@{stray[0].first_offset}" if stray else ""

    @property
    def failures(self) -> tuple[str, ...]:
        """Return the name of each failed check (empty when the shape passed)."""
        failed = {
            "unplaced buffers": bool(self.unplaced),
            "misaligned": bool(self.misaligned),
            "undersized": bool(self.undersized),
            "outside regions": self.outside_regions.failed,
            "overlapping buffers": bool(self.overlapping),
            "allocations": not self.allocations_match,
            "untagged allocations": bool(self.observed_untagged),
            "oversized": bool(self.oversized),
            "guard bands": bool(self.measurement.first_guard_write),
            "stray writes": bool(self.measurement.stray),
            "incomplete writes": bool(self.measurement.incomplete),
            "reference": not self.max_error <= self.tolerance,
            "lse": self.lse.failed,
            "present cache": self.present_cache.failed,
            "estimate": self.within_estimate is False,
        }
        return tuple(name for name, bad in failed.items() if bad)

    @property
    def passed(self) -> bool:
        """Return whether nothing failed and ORT did not refuse the shape (a shape not run because
        too large or without kernels here passes)."""
        return not self.failures and not self.rejected

    @property
    def status(self) -> str:
        """Return "rejected" (ORT refuses the shape before any kernel runs: nothing was run),
        "failed" (some check failed), "refused" (not run, nothing failed) or "passed"."""
        if self.rejected:
            return "rejected"
        return "failed" if self.failures else "refused" if self.refused else "passed"

    @property
    def ran(self) -> bool:
        """Return whether the kernels were launched (so allocation sizes were measured)."""
        return bool(self.stages) and not self.refused

    def as_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {
            "shape": dict(self.shape), "device": self.device, "backend": self.backend,
            "recipe_bytes": self.recipe_bytes, "allocated_bytes": self.allocated_bytes,
            "recipe_allocations": [{"purpose": p, "bytes": b} for p, b in self.recipe_allocations],
            "allocations": [r.as_dict() for r in self.allocations], "allocations_match": self.allocations_match,
            "observed_untagged": self.observed_untagged,
            "guard_bands_intact": not m.first_guard_write, "first_guard_write": m.first_guard_write,
            "untouched_outside_views": not m.stray, "first_stray_write": self.first_stray_write,
            "max_error": self.max_error, "tolerance": self.tolerance, "reference_tokens": self.reference_tokens,
            "estimate_bytes": self.estimate_bytes, "estimate_status": self.estimate_status,
            "within_estimate": self.within_estimate, "error": self.error,
            "stages": list(self.stages), "buffers": [b.as_dict() for b in self.buffers],
            "unplaced": list(self.unplaced), "misaligned": list(self.misaligned), "undersized": list(self.undersized),
            "overlapping": [list(pair) for pair in self.overlapping],
            "oversized": [{"allocation": o.allocation, "bytes": o.nbytes, "footprint_bytes": o.footprint_bytes,
                           "slack_bytes": o.slack_bytes} for o in self.oversized],
            "stray_writes": [{"stage": s.stage, "allocation": s.allocation, "first_offset": s.first_offset,
                              "bytes": s.nbytes} for s in m.stray],
            "incomplete_writes": [{"stage": i.stage, "buffer": i.buffer, "written_elements": i.written,
                                   "expected_elements": i.expected} for i in m.incomplete],
            "failures": list(self.failures), "passed": self.passed, "status": self.status,
            "refused": self.refused, "unmodelled": self.unmodelled,
            "cost": dict(self.cost) if self.cost is not None else None,
            "route": self.route, "recipe": dict(self.recipe) if self.recipe is not None else None,
            "outside_regions": self.outside_regions.as_dict(), "slack": self.slack.as_dict(),
            "present_cache": self.present_cache.as_dict(), "lse": self.lse.as_dict(),
            "spare_bytes": self.spare_bytes, "untouched_regions": dict(self.untouched_regions),
            "launches_not_run": list(self.launches_not_run),
        }


ROLE_ORDER = {"smaller": 0, "larger": 1}


def smaller_first(members: list[Any], differ: list[str]) -> list[Any]:
    """Return the members with the smaller shape first: the one whose every differing dimension is
    at most the other's; where neither is (or more than two), role "smaller" first, then "larger",
    else document order."""
    by_role = sorted(members, key=lambda r: ROLE_ORDER.get(r.shape.get("role"), len(ROLE_ORDER)))
    if len(members) == 2 and differ:
        a, b = members
        dims = [(a.shape.get(k), b.shape.get(k)) for k in differ]
        if all(isinstance(x, int) and isinstance(y, int) for x, y in dims):
            if all(x <= y for x, y in dims):
                return [a, b]
            if all(y <= x for x, y in dims):
                return [b, a]
    return by_role


def pair_comparisons(reports: list[Any]) -> list[dict[str, Any]]:
    """Return, for each `pair` label, its members (the smaller shape first: `smaller_first`) with
    their allocated bytes, and whether the smaller shape allocated more. The dimensions compared are
    every family's (`attnws.spec.families.DIMENSIONS`: GroupQueryAttention's T among them)."""
    pairs: dict[str, list[Any]] = {}
    for report in reports:
        if "pair" in report.shape:
            pairs.setdefault(str(report.shape["pair"]), []).append(report)
    out = []
    for name, members in pairs.items():
        if len(members) > 1:
            differ = [k for k in DIMENSIONS if len({r.shape.get(k) for r in members}) > 1]
            members = smaller_first(members, differ)
            out.append({"pair": name,
                        "members": [{"role": r.shape.get("role"), "backend": r.backend,
                                     "dimensions": {k: r.shape.get(k) for k in differ},
                                     "allocated_bytes": r.allocated_bytes} for r in members],
                        "smaller_allocates_more": members[0].allocated_bytes > members[-1].allocated_bytes})
    return out
