"""The instrumented allocator: every device allocation of a backend run, with purpose, the bytes the
device array really holds and live interval.

Inputs, the output and the workspace roots are all allocated through one `Allocator`. Sizes are
measured from each device array (its allocation size), never copied from the request, so an
allocator handing out more or less than it was asked for shows. On a GPU,
Numba allocates through `RecordingMemoryManager` (an External Memory Management plugin), which
reports every allocation's size to the active allocator; an allocation made outside the allocator
is observed as `UNTAGGED`, so nothing escapes the count. The simulator has no memory manager to
plug into: there the same wrapper's own records are the count, and `observed` is None.

A root (each workspace allocation and the output) is GUARD_BYTES of sentinel, the payload, and
GUARD_BYTES of sentinel, all pre-filled with SENTINEL before any kernel runs. Importing this module installs the
recording memory manager on a GPU, before any CUDA context exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import config, cuda

from . import sentinel_fill
from .allocation_observers import OBSERVERS
from ..spec.errors import InternalError

SENTINEL = 0xFF  # every byte; as fp16 or fp32 it is a NaN, so a read of a byte no kernel wrote poisons the output
GUARD_BYTES = 256  # sentinel band on each side of a root; keeps the payload at the recipes' 256-byte alignment
UNTAGGED = "untagged"

def install_memory_manager() -> None:
    """Make Numba allocate through RecordingMemoryManager; effective for contexts created afterwards."""
    if not config.ENABLE_CUDASIM:
        from .memory_manager import install

        install()


def memory_manager_active() -> bool:
    """Return whether the current CUDA context allocates through RecordingMemoryManager."""
    if config.ENABLE_CUDASIM:
        return False
    from .memory_manager import RecordingMemoryManager

    return isinstance(cuda.current_context().memory_manager, RecordingMemoryManager)


def device_bytes(array: Any) -> int:
    """Return the bytes of device memory behind a freshly allocated device array."""
    return int(array.alloc_size)


@dataclass(frozen=True, slots=True)
class AllocationRecord:
    """One device allocation: `device_bytes` measured on the device array, `guard_bytes` of
    sentinel on each side of its payload (0 unless it is a root), live from clock tick `opened`
    to `closed`."""

    purpose: str
    device_bytes: int
    guard_bytes: int
    opened: int
    closed: int | None

    @property
    def nbytes(self) -> int:
        """Return the payload bytes: the device bytes less the guard bands."""
        return self.device_bytes - 2 * self.guard_bytes

    def as_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "bytes": self.nbytes, "device_bytes": self.device_bytes,
                "opened": self.opened, "closed": self.closed}


@dataclass(frozen=True)
class Root:
    """A root: `raw` is the uint8 device array [guard | payload | guard], GUARD_BYTES each guard."""

    purpose: str
    raw: Any

    @property
    def nbytes(self) -> int:
        """Return the payload bytes, measured on the device array."""
        return device_bytes(self.raw) - 2 * GUARD_BYTES

    def pointer(self, offset: int, dtype: Any) -> Any:
        """Return the payload from byte `offset` on as a `dtype` array running to the end of the
        trailing guard band: a kernel gets a pointer, as in C, so an overrun lands in sentinel
        bytes that the validator checks instead of tripping a bounds check the GPU does not have."""
        itemsize = np.dtype(dtype).itemsize
        start = GUARD_BYTES + offset
        count = (self.raw.shape[0] - start) // itemsize
        return self.raw[start:start + count * itemsize].view(dtype)


class Allocator:
    """Context manager through which a backend run allocates; see the module docstring."""

    def __init__(self) -> None:
        self._entries: list[list[Any]] = []
        self._arrays: list[Any] = []
        self._clock = 0
        self._pending: str | None = None
        self.observed: list[tuple[str, int]] | None = None

    def __enter__(self) -> "Allocator":
        if memory_manager_active():
            self.observed = []
            OBSERVERS.append(self.observe)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.observed is not None:
            OBSERVERS.remove(self.observe)
        for entry in reversed(self._entries):
            if entry[4] is None:
                self._clock += 1
                entry[4] = self._clock
        self._arrays.clear()

    def observe(self, size: int) -> None:
        """Record one allocation the memory manager saw, under the purpose being allocated now."""
        if self.observed is not None:
            self.observed.append((self._pending or UNTAGGED, size))

    def _allocate(self, purpose: str, guard_bytes: int, make: Callable[[], Any]) -> Any:
        if self._pending is not None:
            raise InternalError(f"allocation for {purpose} nested inside one for {self._pending}")
        self._pending = purpose
        try:
            array = make()
        finally:
            self._pending = None
        self._clock += 1
        self._entries.append([purpose, device_bytes(array), guard_bytes, self._clock, None])
        self._arrays.append(array)
        return array

    def root(self, purpose: str, nbytes: int) -> Root:
        """Allocate a root of `nbytes` payload bytes with guard bands, filled with SENTINEL."""
        raw = self._allocate(purpose, GUARD_BYTES, lambda: cuda.device_array(nbytes + 2 * GUARD_BYTES, np.uint8))
        sentinel_fill.launch(raw, SENTINEL)
        return Root(purpose, raw)

    def upload(self, purpose: str, host: np.ndarray) -> Any:
        """Allocate a device copy of a host array."""
        return self._allocate(purpose, 0, lambda: cuda.to_device(host))

    def records(self) -> tuple[AllocationRecord, ...]:
        """Return every allocation so far, in order (closed is None while still live)."""
        return tuple(AllocationRecord(*entry) for entry in self._entries)


install_memory_manager()
