"""Numba External Memory Management plugin that reports every device allocation (GPU only).

Imported only when Numba targets a real GPU. `RecordingMemoryManager` is Numba's own on-device
manager with `memalloc` reporting each size first to the innermost observer in `allocation_observers`
(the active `Allocator`); `install` must run before the CUDA context is created, since Numba
binds a context's manager when it creates the context.
"""

from __future__ import annotations

from typing import Any

from numba import cuda
from numba.cuda.cudadrv.driver import NumbaCUDAMemoryManager

from .allocation_observers import observe


class RecordingMemoryManager(NumbaCUDAMemoryManager):
    """Numba's device allocator, reporting each allocation's size in bytes before making it."""

    def memalloc(self, size: int) -> Any:
        observe(size)
        return super().memalloc(size)


def install() -> None:
    """Register RecordingMemoryManager as Numba's memory manager (EMM interface version 1)."""
    cuda.set_memory_manager(RecordingMemoryManager)
