"""The simulator's cost model: the seconds one unit of each kind of kernel work takes, and the
formulas every family's cost (`attnws.kernels.<family>.cost`) is written in. Nothing here imports
numba.

The CUDA simulator runs every CUDA thread as a Python thread and every kernel statement as Python,
so a stage's run time grows with its work: a count of work items times a per-item cost, measured
with the CUDA simulator on tiny shapes (B, N <= 4, S <= 128, H <= 64) on a 2-core machine and
rounded up (`python bench/bench_kernels.py` prints estimate / measured per route).
"""

from __future__ import annotations

STAGE_SECONDS = 0.15  # fixed cost of a stage: launch, one warp of thread starts, copies, diffs
THREAD_START_SECONDS = 0.2e-3  # one simulated CUDA thread of a tiled kernel that has no row to attend
STRIDE_ITEM_SECONDS = 25e-6  # one iteration of a grid-stride loop, besides its inner loop
INNER_SECONDS = 4.5e-6  # one inner-loop step (a multiply-add) of a grid-stride kernel
SOFTMAX_INNER_SECONDS = 10e-6  # one step of the softmax's three passes over a row
TILE_SECONDS = 0.8e-3  # one thread through one key tile of a tiled kernel: two barriers, a load share, and
# the per-row key limit every tiled kernel now checks (0.35e-3 and 5.5e-6 before it; raised to stay above
# the measured time: `python bench/bench_kernels.py` prints estimate / measured per route)
TILE_HEAD_SECONDS = 16e-6  # per (H + Hv) element of that thread-tile (its 4 keys' dot products)
FILL_BYTE_SECONDS = 1.2e-6  # the sentinel fill: one Python iteration per root byte
COPY_BYTE_SECONDS = 30e-9  # per root byte per stage: host <-> device copies, poison and diff
TILE_ROWS = 64  # online_softmax.BLOCK_M: query rows per block
TILE_KEYS = 4  # online_softmax.BLOCK_N: keys per shared-memory tile


def stride_seconds(items: int, inner: int, inner_seconds: float = INNER_SECONDS) -> float:
    """Return the seconds of a grid-stride kernel of `items` iterations of `inner` steps each."""
    return items * (STRIDE_ITEM_SECONDS + inner * inner_seconds)


def tile_rows(seq: int) -> int:
    """Return the query rows (threads) per block of a tiled kernel over S rows: min(64, S), at least 1."""
    return max(1, min(TILE_ROWS, seq))


def tile_seconds(head_size: int, v_head_size: int) -> float:
    """Return the seconds of one thread through one key tile of a tiled kernel of head sizes H and Hv."""
    return TILE_SECONDS + TILE_HEAD_SECONDS * (head_size + v_head_size)
