"""Where each footprint buffer lies, and the checks that need no launch.

The footprint (`attnws.spec.footprint`) states each buffer's extent, element size and alignment,
and names the recipe view it starts at; the recipe (`attnws.spec.layout`) says where that view is
and how large each allocation is. The recipe's allocations are the workspace (`workspace_allocations`:
projection and attention, or each named request of a recipe made of several, PagedAttention's);
a buffer of one of them lies at its view. The output lies at 0 of the operator's output tensor,
es * T * N * Hv bytes, where the footprint states an output buffer (MultiHeadAttention: its outputs
and separate allocations as the footprint sizes them, each buffer at 0 of its own; a footprint
stating no output buffer and no outputs has no output allocation). Every offset and size here is
bytes, offsets from the start of the allocation's payload.

What the recipe reserves beyond the footprint, whatever the family: `spare_bytes` (the workspace
bytes no buffer covers: alignment gaps, regions reserved larger than their buffers) and
`untouched_views` (whole views no buffer reaches into). Reported, never failed here: whether they
are within what ORT documents is `allocation_checks.oversized`'s, for the families with slack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..spec.layout import Recipe, views
from ..spec.statement import OUTPUT, WORKSPACE_ALLOCATIONS, Buffer, Footprint


@dataclass(frozen=True)
class PlacedBuffer:
    """A footprint buffer at `offset` of its allocation; `reserved_bytes` are the bytes of the view
    it is placed at from its start on, through the view it spans to (for the unfused context: the
    Q view), or of the output tensor."""

    buffer: Buffer
    offset: int
    reserved_bytes: int

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def allocation(self) -> str:
        return self.buffer.allocation

    @property
    def nbytes(self) -> int:
        """Return the footprint extent in bytes."""
        return self.buffer.nbytes()

    @property
    def end(self) -> int:
        return self.offset + self.nbytes

    @property
    def padding_bytes(self) -> int:
        """Return the reserved bytes beyond the footprint (0 when the buffer outgrows its view)."""
        return max(self.reserved_bytes - self.nbytes, 0)


@dataclass(frozen=True)
class Placement:
    """A route's footprint laid on its recipe.

    `allocation_bytes`: the payload bytes of each allocation, the output first, then the recipe's
    allocations in order (zero-byte ones left out: nothing is allocated for them). `unplaced`:
    buffers whose view the recipe lacks, or has empty while the buffer is not (an empty buffer
    without a view is simply not placed). `workspace`: the names of the recipe's allocations
    (`workspace_allocations`); every other allocation is ORT's own (the output,
    MultiHeadAttention's present outputs and separate buffers).
    """

    footprint: Footprint
    allocation_bytes: Mapping[str, int]
    buffers: tuple[PlacedBuffer, ...]
    unplaced: tuple[str, ...]
    workspace: tuple[str, ...] = WORKSPACE_ALLOCATIONS

    def buffer(self, name: str) -> PlacedBuffer:
        """Return the placed buffer called name (KeyError if it is not placed)."""
        return next(b for b in self.buffers if b.name == name)

    def undersized(self) -> tuple[str, ...]:
        """Return the buffers that extend past the end of their allocation."""
        return tuple(b.name for b in self.buffers if b.end > self.allocation_bytes.get(b.allocation, 0))

    def misaligned(self) -> tuple[str, ...]:
        """Return the buffers whose offset is not a multiple of their alignment (allocations
        themselves start 256-byte aligned)."""
        return tuple(b.name for b in self.buffers if b.offset % b.buffer.alignment)

    def overlapping(self) -> tuple[tuple[str, str], ...]:
        """Return the pairs of buffers that hold data during a common stage and share bytes."""
        fp, placed = self.footprint, [b for b in self.buffers if b.nbytes > 0]
        return tuple((a.name, b.name) for i, a in enumerate(placed) for b in placed[i + 1:]
                     if a.allocation == b.allocation and a.offset < b.end and b.offset < a.end
                     and fp.live_together(a.name, b.name))


def output_bytes(p: Any) -> int:
    """Return the bytes of the packed operators' output tensor [T, N * Hv]."""
    return p.element_size * p.token_count * p.v_hidden_size


def workspace_allocations(recipe: Recipe) -> tuple[str, ...]:
    """Return the names of the recipe's allocations (zero-byte ones too) after projection and
    attention: the allocations whose buffers lie at the recipe's views."""
    return tuple(dict.fromkeys([*WORKSPACE_ALLOCATIONS, *(name for name, _ in recipe.allocations())]))


def outside_allocations(p: Any, fp: Footprint) -> dict[str, Any]:
    """Return the allocations outside the recipe's workspace, in bytes: the footprint's outputs, or
    the output tensor where the footprint states an output buffer, else none."""
    if fp.outputs:
        return dict(fp.outputs)
    return {OUTPUT: output_bytes(p)} if any(b.allocation == OUTPUT for b in fp.buffers) else {}


def place(p: Any, fp: Footprint, recipe: Recipe) -> Placement:
    """Return the footprint of problem p laid on the recipe's views (see the module docstring).

    Allocations outside the recipe's workspace (the output; MultiHeadAttention's present outputs
    and Flash LSE) are sized as the footprint says ORT allocates them, each buffer at 0 of its own."""
    by_name = {v.name: v for v in views(recipe)}
    workspace = workspace_allocations(recipe)
    sizes = {**outside_allocations(p, fp), **{name: nbytes for name, nbytes in recipe.allocations() if nbytes > 0}}
    placed, unplaced = [], []
    for buf in fp.buffers:
        if buf.allocation not in workspace:
            placed.append(PlacedBuffer(buf, 0, sizes.get(buf.allocation, 0)))
            continue
        view = by_name.get(buf.placed_at)
        if view is None and buf.nbytes() == 0:  # an empty request has no view, and nothing to place
            continue
        if view is None or view.allocation != buf.allocation or (view.nbytes == 0 and buf.nbytes() > 0):
            unplaced.append(buf.name)
        elif buf.nbytes() > 0:
            last = by_name.get(buf.through, view)
            placed.append(PlacedBuffer(buf, view.offset + buf.start, last.end - view.offset - buf.start))
    return Placement(fp, sizes, tuple(placed), tuple(unplaced), workspace)


def covered_bytes(spans: list[tuple[int, int]]) -> int:
    """Return the bytes the union of [start, end) spans covers."""
    covered, reach = 0, 0
    for start, end in sorted(spans):
        covered += max(end - max(start, reach), 0)
        reach = max(reach, end)
    return covered


def spare_bytes(placement: Placement) -> int:
    """Return the bytes of the workspace allocations no placed buffer covers (each buffer clipped
    to its allocation)."""
    spare = 0
    for allocation, nbytes in placement.allocation_bytes.items():
        if allocation in placement.workspace:
            spare += nbytes - covered_bytes([(b.offset, min(b.end, nbytes)) for b in placement.buffers
                                             if b.allocation == allocation and b.nbytes])
    return spare


def untouched_views(placement: Placement, recipe: Recipe) -> tuple[tuple[str, int], ...]:
    """Return (name, bytes) of each non-empty view of the recipe no placed buffer reaches into."""
    return tuple((v.name, v.nbytes) for v in views(recipe) if v.nbytes > 0 and not any(
        b.allocation == v.allocation and b.offset < v.offset + v.nbytes and v.offset < b.end
        for b in placement.buffers if b.nbytes))
