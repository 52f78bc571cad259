"""Kernel: the QKV materialization producer, bias add plus transpose of one of Q, K, V.

Reads token-major source elements (t, n, h) (see plans.TokenMatrix), adds the optional QKV bias
bias[bias_base + n * head_size + h], and writes one of three layouts:
- PADDED: planar [B, N, S, H] over all B * S rows (unfused); row i of token_offset holds padded
  position b * S + s; rows i >= T are padding and are written as zeros.
- TOKENS: planar [T, N, H] (Flash, MEA).
- INTERLEAVED: [T, N, 3, H] (TRT), `which` = 0, 1, 2 for Q, K, V.
Each work item moves `width` consecutive elements (the index width 1, 2 or 4); the grid
strides over rows * N * head_size / width items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .launching import stride_launch
from .plans import Packing, TokenMatrix

PADDED = 0
TOKENS = 1
INTERLEAVED = 2


@cuda.jit(device=True)
def destination(layout, which, position, n, h, heads, seq, head_size):
    """Return the element offset of (position, n, h) in the destination layout."""
    if layout == PADDED:
        b = position // seq
        return ((b * heads + n) * seq + position - b * seq) * head_size + h
    if layout == TOKENS:
        return (position * heads + n) * head_size + h
    return ((position * heads + n) * 3 + which) * head_size + h


@cuda.jit
def materialize(src, src_base, token_stride, head_stride, bias, bias_base, dst, layout, which,
                token_offset, rows, tokens, heads, seq, head_size, width):
    """Write dst from src (+ bias) for rows [0, rows); see the module docstring for the layouts."""
    per_row = heads * (head_size // width)
    for item in range(cuda.grid(1), rows * per_row, cuda.gridsize(1)):
        row = item // per_row
        n = (item - row * per_row) // (head_size // width)
        h = (item - row * per_row - n * (head_size // width)) * width
        position = token_offset[row] if layout == PADDED else row
        out = destination(layout, which, position, n, h, heads, seq, head_size)
        for e in range(width):
            value = float32(0.0)
            if row < tokens:
                value = float32(src[src_base + row * token_stride + n * head_stride + h + e])
                if bias is not None:
                    value += float32(bias[bias_base + n * head_size + h + e])
            dst[out + e] = value


@dataclass(frozen=True)
class MaterializePlan:
    """Materialize part `which` (0 Q, 1 K, 2 V) of head size `head_size` into `destination`.

    `bias` is the QKV bias [2*N*H + N*Hv] or None; `bias_base` is this part's first element in it.
    """

    source: TokenMatrix
    bias: Any
    bias_base: int
    destination: Any
    layout: int
    which: int
    packing: Packing
    head_size: int
    width: int

    @property
    def rows(self) -> int:
        p = self.packing
        return p.batch * p.seq if self.layout == PADDED else p.tokens


def launch(plan: MaterializePlan) -> None:
    p, s = plan.packing, plan.source
    blocks, threads = stride_launch(plan.rows * p.heads * (plan.head_size // plan.width))
    materialize[blocks, threads](
        s.array, s.base, s.token_stride, s.head_stride, plan.bias, plan.bias_base, plan.destination, plan.layout,
        plan.which, p.token_offset, plan.rows, p.tokens, p.heads, p.seq, plan.head_size, plan.width,
    )
