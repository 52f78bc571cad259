"""Launches: a route's stage as the validator runs it, and the grid-stride launch size every
element-wise launcher shares.

Element-wise kernels here are grid-stride loops, correct for any launch size. On a GPU they get
enough blocks to fill it; the simulator runs one Python thread per CUDA thread (about 2 ms each to
start), so there they get a single warp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from numba import config

from .plans import ceil_div

STRIDE_THREADS = 256  # threads per block of a grid-stride kernel; limit 1024 (CUDA block size)
STRIDE_MAX_BLOCKS = 4096  # enough to fill an H200's 132 SMs many times over; limit 2**31 - 1 (gridDim.x)
SIMULATOR_THREADS = 32  # one warp


@dataclass(frozen=True)
class Launch:
    """One stage: its name in the footprint and the call that enqueues its kernels (asynchronously)."""

    stage: str
    enqueue: Callable[[], None]


def stride_launch(total: int) -> tuple[int, int]:
    """Return (blocks, threads) for a grid-stride kernel over `total` work items (total >= 0)."""
    if config.ENABLE_CUDASIM:
        return 1, max(1, min(total, SIMULATOR_THREADS))
    threads = max(1, min(total, STRIDE_THREADS))
    return max(1, min(ceil_div(total, threads), STRIDE_MAX_BLOCKS)), threads
