"""Kernel: TRT-style fused attention over interleaved [T, N, 3, H] Q/K/V (no scratch).

Reads the interleaved workspace buffer, or PMHA's packed [T, N, 3, H] input directly when the route
has no QKV workspace; writes output [T, N * H]. Tiled online softmax (see online_softmax).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .online_softmax import HEAD_MAX, attend, block_beyond, launch_shape, query_row, store_row
from .plans import Packing


@cuda.jit
def trt_fused_attention(qkv, out, cu, head_size, scale):
    """out[t, n, :] = softmax(scale * q_t . k_j, j in t's sequence) @ v, Q/K/V from qkv [T, N, 3, H]."""
    b, n, s, first, length = query_row(cu)
    if block_beyond(length):
        return
    active = s < length
    heads = cuda.gridDim.y
    token_stride = 3 * heads * head_size
    head = 3 * n * head_size
    acc = cuda.local.array(HEAD_MAX, float32)
    m_i, l_i = attend(qkv, head + (first + s) * token_stride, scale, qkv, head + head_size, token_stride,
                      qkv, head + 2 * head_size, token_stride, first, length, head_size, head_size, active,
                      length, None, 0, acc, 0)
    if active:
        store_row(out, ((first + s) * heads + n) * head_size, acc, 0, head_size, l_i)


@dataclass(frozen=True)
class TrtPlan:
    """Interleaved Q/K/V [T, N, 3, H], output [T, N * H], packing, H and the scale."""

    qkv: Any
    out: Any
    packing: Packing
    head_size: int
    scale: float


def launch(plan: TrtPlan) -> None:
    trt_fused_attention[launch_shape(plan.packing)](
        plan.qkv, plan.out, plan.packing.cumulative_sequence_length, plan.head_size, plan.scale)
