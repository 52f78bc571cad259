"""Device function: where row (b, n, s) of the attention bias [B or 1, N or 1, S, S] starts."""

from __future__ import annotations

from numba import cuda


@cuda.jit(device=True)
def bias_row(b, n, s, heads, seq, broadcast_batch, broadcast_heads):
    """Return the element offset of bias[b or 0, n or 0, s, 0]."""
    batch_index = 0 if broadcast_batch else b
    head_index = 0 if broadcast_heads else n
    head_count = 1 if broadcast_heads else heads
    return ((batch_index * head_count + head_index) * seq + s) * seq
