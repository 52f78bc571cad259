"""GroupQueryAttention's footprint (`attnws.spec.gqa.footprint.statement`) placed on its complete recipe.

The statement names the recipe region each buffer starts in (`placed_at`, `start` bytes in);
`attnws.spec.gqa.recipe.complete` says where the regions are: the preparation's from 0, the
backend's from the backend root. The output [B, S, N, H] is its own allocation. A buffer is
outside its region when it ends past the room its region has (through the last region it spans):
up to the next non-empty region of the allocation, or its end (`footprint.region_rooms`, the
rooms the solver's kernel contract reads too). Bytes throughout, offsets from the
start of the allocation's payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ...spec.domain import CONCRETE
from ...spec.gqa.footprint import WRITE_BACK, region_rooms, staging, statement
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Complete, Route
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


def gqa_statement(p: GqaProblem, route: Route, run: Complete, lengths: Sequence[int]) -> GqaStatement:
    """Return the route's footprint laid on `run`, its complete recipe (module docstring).

    `run.backend.splits` is the split count the kernels run (the recipe's heuristic); `lengths`
    the key lengths L_b of the inputs."""
    fp = statement(p, route, run, lengths)
    rooms = region_rooms(CONCRETE, run)
    total = run.total_workspace_bytes
    output = fp.buffer(OUTPUT)
    placed = [PlacedBuffer(output, 0, output.nbytes())]
    unplaced, outside = [], []
    for buffer in fp.workspace_buffers():
        room = rooms[buffer.placed_at]
        if room.nbytes == 0:
            unplaced.append(buffer.name)
            continue
        offset = room.start + buffer.start
        end = rooms[buffer.through or buffer.placed_at].end
        placed.append(PlacedBuffer(buffer, offset, end - offset))
        if offset + buffer.nbytes() > end:
            outside.append(buffer.name)
    placement = Placement(fp, {OUTPUT: output.nbytes(), ATTENTION: total}, tuple(placed), tuple(unplaced))
    spans = [(b.offset, b.end) for b in placed if b.allocation == ATTENTION and b.nbytes]
    untouched = tuple((name, room.nbytes) for name, room in rooms.items() if room.nbytes > 0 and not any(
        start < room.start + room.nbytes and room.start < end for start, end in spans))
    spare = total - covered_bytes([(start, min(end, total)) for start, end in spans])
    return GqaStatement(placement, int(run.backend.splits), WRITE_BACK if staging(p) else (), tuple(outside),
                        untouched, spare)
