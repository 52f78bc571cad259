"""Allocation checks: what the device handed out against the recipe, and the recipe against the footprint.

The allocator's records carry bytes measured on the device arrays, so `allocations_match` compares
the device with the recipe, not the recipe with itself. `oversized` bounds each workspace allocation
of the recipe by the footprint's buffers plus the slack ORT documents (`attnws.spec.footprint`).
Units: bytes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..spec.domain import CONCRETE
from ..spec.layout import Recipe
from ..spec.statement import ATTENTION, PROJECTION, Footprint, footprint_bytes, slack_bytes
from .allocator import AllocationRecord, Allocator

WORKSPACE_PURPOSES = (PROJECTION, ATTENTION)


def workspace_purposes(expected: list[tuple[str, int]] | tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    """Return the purposes of the workspace allocations: projection and attention, and the name of
    each allocation the recipe asks for (`expected`: (name, bytes); a recipe of several named
    requests, PagedAttention's)."""
    return tuple(dict.fromkeys([*WORKSPACE_PURPOSES, *(name for name, _ in expected)]))


@dataclass(frozen=True, slots=True)
class Oversize:
    """The recipe reserves `nbytes` for `allocation`, more than the footprint's `footprint_bytes`
    plus the documented `slack_bytes`."""

    allocation: str
    nbytes: int
    footprint_bytes: int
    slack_bytes: int


def allocations_match(records: tuple[AllocationRecord, ...], expected: list[tuple[str, int]]) -> bool:
    """Return whether the measured workspace payloads equal `expected` in order and are all live together."""
    purposes = workspace_purposes(expected)
    workspace = [r for r in records if r.purpose in purposes]
    if [(r.purpose, r.nbytes) for r in workspace] != expected:
        return False
    return not workspace or max(r.opened for r in workspace) < min(r.closed for r in workspace)


def untagged_count(allocator: Allocator) -> int | None:
    """Return how many allocations the memory manager saw that the allocator did not make, or that
    it made and the manager never saw (None: unobserved). Numba allocates nothing for zero bytes."""
    if allocator.observed is None:
        return None
    made = Counter((r.purpose, r.device_bytes) for r in allocator.records() if r.device_bytes > 0)
    seen = Counter(allocator.observed)
    return sum(((seen - made) + (made - seen)).values())


def oversized(fp: Footprint, recipe: Recipe) -> tuple[Oversize, ...]:
    """Return each workspace allocation the recipe makes larger than footprint plus slack."""
    out = []
    for allocation, nbytes in recipe.allocations():
        bound = footprint_bytes(CONCRETE, fp, allocation), slack_bytes(CONCRETE, fp, allocation)
        if nbytes > sum(bound):
            out.append(Oversize(allocation, nbytes, *bound))
    return tuple(out)
