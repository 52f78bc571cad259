"""Post-run checks on the device memory: sentinel guard bands and the bytes outside every view.

The views come from `attnws.spec.layout.views` of the recipe, independently of the carving, so a
view carved at the wrong place shows up here as a write outside the recipe's views. The unfused
scratch views span whole 256-byte-aligned regions, of which the kernels write es * B * N * S * S
bytes; the alignment padding after that must stay untouched too. Only the guard bands and the
bytes outside what the kernels may write are copied back to the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from ..spec import layout
from ..spec.domain import CONCRETE
from ..spec.problem import Problem
from ..spec.recipe import unfused_scratch_used_bytes
from .allocator import GUARD_BYTES, SENTINEL, Root

SCRATCH_VIEWS = frozenset({"scores", "probabilities"})


@dataclass(frozen=True, slots=True)
class ByteCheck:
    """Whether every guard band and every byte outside the views still holds the sentinel; where
    not, the first changed byte as "allocation@offset" (payload offset; guards are negative or >= size)."""

    guard_bands_intact: bool
    untouched_outside_views: bool
    first_guard_write: str = ""
    first_stray_write: str = ""


def gaps(size: int, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return the sub-ranges of [0, size) covered by no span [start, stop)."""
    out, cursor = [], 0
    for start, stop in sorted(spans):
        if start > cursor:
            out.append((cursor, min(start, size)))
        cursor = max(cursor, stop)
    if cursor < size:
        out.append((cursor, size))
    return [(a, b) for a, b in out if a < b]


def first_changed(root: Root, ranges: Iterable[tuple[int, int]]) -> str:
    """Return "purpose@offset" of the first non-sentinel byte in payload ranges, or ''."""
    for start, stop in ranges:
        changed = np.flatnonzero(root.host_bytes(GUARD_BYTES + start, GUARD_BYTES + stop) != SENTINEL)
        if changed.size:
            return f"{root.purpose}@{start + int(changed[0])}"
    return ""


def written_bytes(view: layout.View, p: Problem) -> int:
    """Return how many bytes from the view's start the kernels may write (the unfused scratch
    regions: their [B, N, S, S] matrix, not the alignment padding)."""
    if view.name in SCRATCH_VIEWS:
        return min(view.nbytes, unfused_scratch_used_bytes(CONCRETE, p))
    return view.nbytes


def check_bytes(roots: Mapping[str, Root], recipe: layout.Recipe, p: Problem) -> ByteCheck:
    """Check every root's guard bands and the bytes outside what the kernels may write in the views."""
    guard, stray = "", ""
    for purpose, root in roots.items():
        guard = guard or first_changed(root, [(-GUARD_BYTES, 0), (root.nbytes, root.nbytes + GUARD_BYTES)])
        spans = [(v.offset, v.offset + written_bytes(v, p)) for v in layout.views(recipe)
                 if v.allocation == purpose and v.nbytes > 0]
        stray = stray or first_changed(root, gaps(root.nbytes, spans))
    return ByteCheck(not guard, not stray, guard, stray)
