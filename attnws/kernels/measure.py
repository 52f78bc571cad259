"""The measured footprint: what each stage really writes, byte for byte, held against the footprint.

Before stage i, every payload byte of every workspace root outside the buffers live in it (written
before, read at or after: `Footprint.live_in(i)`) is reset to SENTINEL (outputs keep what they are
given), so that a write shows even where it
stores what a dead buffer held, and a read of a dead byte reads NaN. After the stage the roots are
copied to the host and diffed against their state before it:
- a changed byte outside the buffers the stage declares it writes is a stray write (guard bands
  included);
- a declared buffer with fewer written elements than its extent less its documented unwritten
  elements is an incomplete write. An element is written when any of its bytes changed: SENTINEL
  bytes are a NaN in fp16 and fp32, so every finite result differs from them.
Each root is copied host <-> device whole once per stage: meant for the validator's shapes, not
for production sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from numba import cuda

from ..spec.errors import InternalError
from .allocator import GUARD_BYTES, SENTINEL, Root
from .launching import Launch
from .placement import PlacedBuffer, Placement


@dataclass(frozen=True, slots=True)
class StrayWrite:
    """Stage `stage` changed `nbytes` bytes of `allocation` outside the buffers it declares it
    writes; the first at payload offset `first_offset` (negative: the leading guard band)."""

    stage: str
    allocation: str
    first_offset: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class IncompleteWrite:
    """Stage `stage` wrote `written` elements of `buffer`, whose writer must write `expected`."""

    stage: str
    buffer: str
    written: int
    expected: int


@dataclass(frozen=True)
class Measurement:
    """What the stages touched. `touched_bytes`: per placed buffer, the bytes of the elements its
    declared writers wrote, over all stages. `first_guard_write`: "allocation@offset" of the first
    guard byte not holding SENTINEL after the last stage, or ''."""

    stray: tuple[StrayWrite, ...] = ()
    incomplete: tuple[IncompleteWrite, ...] = ()
    touched_bytes: Mapping[str, int] = field(default_factory=dict)
    first_guard_write: str = ""


def raw_span(b: PlacedBuffer) -> slice:
    """Return the buffer's bytes in raw coordinates (the payload starts after the leading guard)."""
    return slice(GUARD_BYTES + b.offset, GUARD_BYTES + b.end)


def poison_dead_bytes(raw: np.ndarray, live: Sequence[PlacedBuffer]) -> None:
    """Set every payload byte of the host copy `raw` outside the live buffers to SENTINEL."""
    keep = np.zeros(raw.shape[0], dtype=bool)
    keep[:GUARD_BYTES] = keep[raw.shape[0] - GUARD_BYTES:] = True
    for b in live:
        keep[raw_span(b)] = True
    raw[~keep] = SENTINEL


def first_guard_write(allocation: str, raw: np.ndarray) -> str:
    """Return "allocation@offset" of the first guard byte not holding SENTINEL, or ''."""
    payload = raw.shape[0] - 2 * GUARD_BYTES
    for start in (0, GUARD_BYTES + payload):
        changed = np.flatnonzero(raw[start:start + GUARD_BYTES] != SENTINEL)
        if changed.size:
            return f"{allocation}@{start + int(changed[0]) - GUARD_BYTES}"
    return ""


def measure(launches: Sequence[Launch], placement: Placement, roots: Mapping[str, Root]) -> Measurement:
    """Run the launches stage by stage and measure them (see the module docstring).

    Raises InternalError when the launches are not the footprint's stages, in order.
    """
    fp = placement.footprint
    if [launch.stage for launch in launches] != [stage.name for stage in fp.stages]:
        raise InternalError(f"the backend launches stages {[launch.stage for launch in launches]}, "
                            f"the footprint states {[stage.name for stage in fp.stages]}")
    placed = {b.name: b for b in placement.buffers}
    written = {b.name: np.zeros(b.buffer.elements, dtype=bool) for b in placement.buffers}
    stray: list[StrayWrite] = []
    incomplete: list[IncompleteWrite] = []
    before = {name: root.raw.copy_to_host() for name, root in roots.items()}
    for index, (launch, stage) in enumerate(zip(launches, fp.stages)):
        live = [placed[name] for name in fp.live_in(index) if name in placed]
        for name, root in roots.items():
            if name in placement.workspace:  # an output holds what it was given until the operator returns
                poison_dead_bytes(before[name], [b for b in live if b.allocation == name])
            root.raw.copy_to_device(before[name])
        launch.enqueue()
        cuda.synchronize()
        after = {name: root.raw.copy_to_host() for name, root in roots.items()}
        changed = {name: before[name] != after[name] for name in roots}
        declared = [placed[name] for name in stage.writes if name in placed]
        for b in declared:
            elements = changed[b.allocation][raw_span(b)].reshape(-1, b.buffer.element_bytes).any(axis=1)
            written[b.name] |= elements
            expected = b.buffer.elements - b.buffer.unwritten
            if int(elements.sum()) < expected:
                incomplete.append(IncompleteWrite(stage.name, b.name, int(elements.sum()), expected))
        for b in declared:
            changed[b.allocation][raw_span(b)] = False
        for name, outside in changed.items():
            bytes_outside = np.flatnonzero(outside)
            if bytes_outside.size:
                stray.append(StrayWrite(stage.name, name, int(bytes_outside[0]) - GUARD_BYTES,
                                        int(bytes_outside.size)))
        before = after
    guard = next((g for g in (first_guard_write(name, raw) for name, raw in before.items()) if g), "")
    touched = {name: int(w.sum()) * placed[name].buffer.element_bytes for name, w in written.items()}
    return Measurement(tuple(stray), tuple(incomplete), touched, guard)
