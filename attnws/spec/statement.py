"""The vocabulary of a footprint statement, shared by every family: the buffers a route's kernels
touch (`Buffer`), the stages of its launch sequence (`Stage`), and the whole statement
(`Footprint`) with the bytes of an allocation's buffers and the slack ORT documents reserving.

A statement is independent of the recipes: no module of it imports a recipe, a layout or the
dispatch. Where a buffer starts is the recipe's business (`placed_at` names the recipe view whose
offset it starts at); its extent, element type and alignment are the kernels'.
Units: `elements` in elements of `element_bytes` bytes; every *_bytes is bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .domain import CONCRETE
from .problem import Backend, Op

FLOAT32_BYTES = 4  # the Flash LSE and the MEA accumulator are float32 whatever the element type


MEA_ACCUMULATOR_ABOVE_V_HEAD = 128  # MemoryEfficientAttentionParams::need_workspace: Hv > 128


SCRATCH_ALIGNMENT = 256  # each unfused scratch region is align256 (1.31.1: the recipe; before: GetAttentionScratchSize)


PROJECTION = "projection"  # the names of the allocations, as in layout.py's Recipe.allocations


ATTENTION = "attention"


OUTPUT = "output"  # the operator's output tensor [T, N * Hv]: not workspace, but written by the kernels


WORKSPACE_ALLOCATIONS = (PROJECTION, ATTENTION)  # the recipe's allocations; every other one is ORT's own


@dataclass(frozen=True)
class Buffer:
    """One buffer a route's kernels touch.

    `allocation`: projection, attention or output. `placed_at`: the recipe view whose offset the
    buffer starts at (the output starts at 0 of its own tensor), `start` bytes into it (a kernel
    carving a view itself); `through`: the last view it may span when its kernel lays one buffer
    over several views ('': its own view only). `unwritten` elements of the extent are
    legitimately never written by the writer (rows of padding tokens).
    """

    name: str
    allocation: str
    placed_at: str
    element_bytes: int
    elements: Any
    alignment: int
    unwritten: Any = 0
    source: str = ""
    start: Any = 0
    through: str = ""

    def nbytes(self, d: Any = CONCRETE) -> Any:
        """Return the extent in bytes."""
        return d.mul(self.element_bytes, self.elements, what=f"footprint of {self.name}")

    def unwritten_bytes(self, d: Any = CONCRETE) -> Any:
        """Return the bytes of the extent the writer never writes."""
        return d.mul(self.element_bytes, self.unwritten, what=f"unwritten part of {self.name}")


@dataclass(frozen=True)
class Stage:
    """One step of the launch sequence: the buffers it reads and the buffers it writes."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True)
class Footprint:
    """Everything a route's kernels touch (see the module docstring).

    `limits` are (what, value, limit): each integer argument or grid extent a kernel forms and the
    largest it may be. `slack` are (why, allocation, bytes): what ORT's workspace size function
    documents reserving beyond the buffers. `outputs` are (allocation, bytes) of the allocations
    outside the recipe's workspace that ORT makes and the kernels write (the operator's output
    tensors, separate scratch buffers), as ORT sizes them; empty: the output tensor alone, sized
    as its buffer (PA, PMHA).
    """

    op: Op
    backend: Backend
    reads_inputs_directly: bool
    buffers: tuple[Buffer, ...]
    stages: tuple[Stage, ...]
    limits: tuple[tuple[str, Any, int], ...]
    slack: tuple[tuple[str, str, Any], ...]
    outputs: tuple[tuple[str, Any], ...] = ()

    def buffer(self, name: str) -> Buffer:
        """Return the buffer called name (KeyError if the route has none)."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def workspace_buffers(self) -> tuple[Buffer, ...]:
        """Return the buffers inside the recipe's workspace allocations (not the outputs)."""
        return tuple(b for b in self.buffers if b.allocation in WORKSPACE_ALLOCATIONS)

    def side_buffers(self) -> tuple[Buffer, ...]:
        """Return the buffers outside the recipe's workspace: the outputs and separate allocations."""
        return tuple(b for b in self.buffers if b.allocation not in WORKSPACE_ALLOCATIONS)

    def live_interval(self, name: str) -> tuple[int, int]:
        """Return (first, last) stage index touching the buffer: it holds data in between."""
        touching = [i for i, s in enumerate(self.stages) if name in s.reads or name in s.writes]
        return touching[0], touching[-1]

    def live_together(self, a: str, b: str) -> bool:
        """Return whether two buffers hold data during a common stage (they must not overlap)."""
        (a0, a1), (b0, b1) = self.live_interval(a), self.live_interval(b)
        return a0 <= b1 and b0 <= a1

    def live_in(self, index: int) -> tuple[str, ...]:
        """Return the buffers written before stage `index` and read at or after it: their bytes
        must survive until that stage runs; every other byte may be re-poisoned before it."""
        return tuple(b.name for b in self.buffers
                     if any(b.name in s.writes for s in self.stages[:index])
                     and any(b.name in s.reads for s in self.stages[index:]))


def present_when(d: Any, buffer: Buffer, present: Any) -> Buffer:
    """Return the buffer with its presence (a bool, or a term in the solver) folded into its
    extent: 0 elements where it is absent."""
    return replace(buffer, elements=d.ite(present, buffer.elements, 0), unwritten=d.ite(present, buffer.unwritten, 0))


def footprint_bytes(d: Any, fp: Footprint, allocation: str) -> Any:
    """Return the bytes of an allocation's buffers, counting a buffer placed over another's start
    (the unfused context over Q) once, as the larger of the two."""
    starts: dict[str, Any] = {}
    for buf in fp.buffers:
        if buf.allocation == allocation:
            size = buf.nbytes(d)
            starts[buf.placed_at] = d.max_(starts[buf.placed_at], size) if buf.placed_at in starts else size
    total: Any = 0
    for size in starts.values():
        total = d.add(total, size, what=f"footprint of {allocation}")
    return total


def slack_bytes(d: Any, fp: Footprint, allocation: str) -> Any:
    """Return the documented bytes a recipe may reserve in the allocation beyond its buffers."""
    total: Any = 0
    for _, where, nbytes in fp.slack:
        if where == allocation:
            total = d.add(total, nbytes, what=f"slack of {allocation}")
    return total
