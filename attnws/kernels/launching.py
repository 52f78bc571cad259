"""Launch geometry shared by every launcher: integer ceil-div grids and the grid-stride launch size.

Element-wise kernels here are grid-stride loops, correct for any launch size. On a GPU they get
enough blocks to fill it; the simulator runs one Python thread per CUDA thread (about 2 ms each to
start), so there they get a single warp.
"""

from __future__ import annotations

from numba import config

STRIDE_THREADS = 256  # threads per block of a grid-stride kernel; limit 1024 (CUDA block size)
STRIDE_MAX_BLOCKS = 4096  # enough to fill an H200's 132 SMs many times over; limit 2**31 - 1 (gridDim.x)
SIMULATOR_THREADS = 32  # one warp


def ceil_div(a: int, b: int) -> int:
    """Return ceil(a / b) for a >= 0, b > 0 in integer arithmetic."""
    return -(-a // b)


def stride_launch(total: int) -> tuple[int, int]:
    """Return (blocks, threads) for a grid-stride kernel over `total` work items (total >= 0)."""
    if config.ENABLE_CUDASIM:
        return 1, max(1, min(total, SIMULATOR_THREADS))
    threads = max(1, min(total, STRIDE_THREADS))
    return max(1, min(ceil_div(total, threads), STRIDE_MAX_BLOCKS)), threads
