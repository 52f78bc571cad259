"""Kernel: Flash-style attention over packed (varlen) planar [T, N, H] Q, K, V, writing the float32 LSE.

Q, K, V are the planar workspace buffers or, on a route reading its inputs directly, the separate
inputs [T, N * H] (the same layout). Tiled online softmax (see online_softmax); writes output [T, N * H] and the
float32 log-sum-exp of each token's scaled scores unpadded, as ORT 1.31.1's varlen Flash does
(`unpadded_lse`): [N, T] at the start of the [B, N, S] buffer, whose last N * (B * S - T) floats
stay unwritten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ..plans import Packing
from .online_softmax import HEAD_MAX, attend, block_beyond, launch_shape, query_row, store_row


@cuda.jit
def flash_attention(q, k, v, out, lse, cu, tokens, head_size, scale):
    """out[t, n, :] = softmax(scale * q_t . k_j) @ v over t's sequence; lse[n, t] = m_i + log(l_i)."""
    b, n, s, first, length = query_row(cu)
    if block_beyond(length):
        return
    active = s < length
    heads = cuda.gridDim.y
    acc = cuda.local.array(HEAD_MAX, float32)
    row = ((first + s) * heads + n) * head_size
    m_i, l_i = attend(q, row, scale, k, n * head_size, heads * head_size, v, n * head_size, heads * head_size,
                      first, length, head_size, head_size, active, length, None, 0, acc, 0)
    if active:
        store_row(out, row, acc, 0, head_size, l_i)
        lse[n * tokens + first + s] = m_i + math.log(l_i)


@dataclass(frozen=True)
class FlashPlan:
    """Planar Q, K, V, output [T, N * H], the LSE buffer, packing, H and the scale."""

    q: Any
    k: Any
    v: Any
    out: Any
    lse: Any
    packing: Packing
    head_size: int
    scale: float


def launch(plan: FlashPlan) -> None:
    p = plan.packing
    flash_attention[launch_shape(p)](
        plan.q, plan.k, plan.v, plan.out, plan.lse, p.cumulative_sequence_length, p.tokens, plan.head_size,
        plan.scale)
