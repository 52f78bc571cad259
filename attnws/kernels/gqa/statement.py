"""GroupQueryAttention's footprint (`attnws.spec.gqa.footprint.statement`) placed on its complete recipe.

The statement names the recipe region each buffer starts in (`placed_at`, `start` bytes in);
`attnws.spec.gqa.recipe.complete` says where the regions are: the preparation's from 0, the
backend's from the backend root. The output [B, S, N, H] is its own allocation. A buffer is
outside its region when it ends past the room its region has (through the last region it spans):
up to the next non-empty region of the allocation, or its end. Bytes throughout, offsets from the
start of the allocation's payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Complete, Route
from ...spec.gqa.footprint import WRITE_BACK, staging, statement
from ...spec.layout import View
from ...spec.statement import ATTENTION, OUTPUT
from ..placement import PlacedBuffer, Placement


@dataclass(frozen=True)
class GqaStatement:
    """The route's footprint on its recipe: `placement` (buffers and allocation bytes), the split
    count the kernels run and the buffers outside their regions' room; `not_run`, ORT's launches
    this harness does not run; `untouched`, the recipe's non-empty regions no kernel touches
    (name, bytes), and `spare_bytes`, the workspace bytes no footprint buffer covers (alignment
    gaps, over-reserved regions): what the recipe reserves beyond the footprint."""

    placement: Placement
    splits: int
    not_run: tuple[str, ...]
    outside_regions: tuple[str, ...]
    untouched: tuple[tuple[str, int], ...] = ()
    spare_bytes: int = 0


def covered_bytes(spans: list[tuple[int, int]]) -> int:
    """Return the bytes the union of [start, end) spans covers."""
    covered, reach = 0, 0
    for start, end in sorted(spans):
        covered += max(end - max(start, reach), 0)
        reach = max(reach, end)
    return covered


def room_end(offset: int, starts: list[int], total: int) -> int:
    """Return where the room of a region starting at `offset` ends: the next region start, or the total."""
    return min((start for start in starts if start > offset), default=total)


def gqa_statement(p: GqaProblem, route: Route, run: Complete, lengths: Sequence[int]) -> GqaStatement:
    """Return the route's footprint laid on `run`, its complete recipe (module docstring).

    `run.backend.splits` is the split count the kernels run (the recipe's heuristic); `lengths`
    the key lengths L_b of the inputs."""
    fp = statement(p, route, run, lengths)
    regions: dict[str, tuple[int, View]] = {v.name: (0, v) for v in run.preparation.regions}
    regions.update({v.name: (run.backend_offset_bytes, v) for v in run.backend.regions})
    starts = [base + v.offset for base, v in regions.values() if v.nbytes > 0]
    total = run.total_workspace_bytes
    output = fp.buffer(OUTPUT)
    placed = [PlacedBuffer(output, 0, output.nbytes())]
    unplaced, outside = [], []
    for buffer in fp.workspace_buffers():
        base, view = regions[buffer.placed_at]
        if view.nbytes == 0:
            unplaced.append(buffer.name)
            continue
        offset = base + view.offset + buffer.start
        last = regions[buffer.through][1] if buffer.through else view
        end = room_end(base + last.offset, starts, total)
        placed.append(PlacedBuffer(buffer, offset, end - offset))
        if offset + buffer.nbytes() > end:
            outside.append(buffer.name)
    placement = Placement(fp, {OUTPUT: output.nbytes(), ATTENTION: total}, tuple(placed), tuple(unplaced))
    spans = [(b.offset, b.end) for b in placed if b.allocation == ATTENTION and b.nbytes]
    untouched = tuple((name, view.nbytes) for name, (base, view) in regions.items() if view.nbytes > 0 and not any(
        start < base + view.offset + view.nbytes and base + view.offset < end for start, end in spans))
    spare = total - covered_bytes([(start, min(end, total)) for start, end in spans])
    return GqaStatement(placement, int(run.backend.splits), WRITE_BACK if staging(p) else (), tuple(outside),
                        untouched, spare)
