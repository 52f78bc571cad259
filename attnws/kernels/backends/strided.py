"""Kernel: Flash-, MEA- and cuDNN-style fused attention over strided views of padded batches.

Query row (b, s, n) of S attends keys j < T of its batch, each of Q, K, V a strided view (see
`attnws.kernels.strided_copy`: BSNH inputs or copies, BNSH copies, or a present [B, N, T, *]):
out [B, S, N, Hv] = softmax(scale * q . k_j + attention_bias[b|0, n|0, s, j]) @ v over the keys the
row may see: j < key_lengths[b] when key lengths are given, and j <= P + s when causal (P keys of
the past come first). Writes the float32 LSE [B, N, S] when given (Flash) and accumulates in the
float32 workspace accumulator [B, S, N, Hv] when given (MEA, Hv > 128). A row seeing no key outputs
0 (and LSE -inf).

Tiled online softmax from `online_softmax`; launch grid (ceil(S / rows), N, B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ..strided_copy import Strided
from .online_softmax import HEAD_MAX, attend, row_grid, store_row


@cuda.jit
def strided_attention(q, q_base, q_b, q_s, q_n, k, k_b, k_t, k_n, v, v_b, v_t, v_n, out, bias, bias_b, bias_n,
                      key_lengths, causal, past, lse, accumulator, seq, total, head_size, v_head_size, scale):
    """See the module docstring: one query row per thread."""
    b = cuda.blockIdx.z
    n = cuda.blockIdx.y
    s = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    heads = cuda.gridDim.y
    active = s < seq
    row_keys = total
    if key_lengths is not None:
        row_keys = min(row_keys, key_lengths[b])
    if causal:
        row_keys = min(row_keys, past + s + 1)
    if accumulator is None:
        acc = cuda.local.array(HEAD_MAX, float32)
        acc_base = 0
    else:
        acc = accumulator
        acc_base = ((b * seq + s) * heads + n) * v_head_size
    bias_start = b * bias_b + n * bias_n + s * total
    m_i, l_i = attend(q, q_base + b * q_b + s * q_s + n * q_n, scale, k, b * k_b + n * k_n, k_t,
                      v, b * v_b + n * v_n, v_t, 0, total, head_size, v_head_size, active, row_keys,
                      bias, bias_start, acc, acc_base)
    if active:
        store_row(out, ((b * seq + s) * heads + n) * v_head_size, acc, acc_base, v_head_size, l_i)
        if lse is not None:
            lse[(b * heads + n) * seq + s] = -math.inf if l_i == 0 else m_i + math.log(l_i)


@dataclass(frozen=True)
class StridedAttentionPlan:
    """Strided Q [B, S, N, H], K [B, T, N, H], V [B, T, N, Hv] (views: base, batch, row, head
    strides, in elements), the output, the attention bias [B|1, N|1, S, T] or None with its
    broadcasts, key lengths (int32 [B], or the first B entries of a longer array) or None, causal
    with the past length P, the LSE or None, the accumulator or None."""

    q: Strided
    k: Strided
    v: Strided
    out: Any
    batch: int
    seq: int
    total: int
    heads: int
    head_size: int
    v_head_size: int
    scale: float
    bias: Any = None
    bias_broadcast_batch: bool = False
    bias_broadcast_heads: bool = False
    key_lengths: Any = None
    causal: bool = False
    past: int = 0
    lse: Any = None
    accumulator: Any = None


def launch(plan: StridedAttentionPlan) -> None:
    q, k, v = plan.q, plan.k, plan.v
    heads_stride = 0 if plan.bias_broadcast_heads else plan.seq * plan.total
    batch_stride = 0 if plan.bias_broadcast_batch else (1 if plan.bias_broadcast_heads else plan.heads) * \
        plan.seq * plan.total
    if plan.seq == 0:
        return
    shape, rows = row_grid(plan.seq, plan.heads, plan.batch)
    strided_attention[shape, rows](
        q.array, q.base, q.batch, q.row, q.head, k.array, k.batch, k.row, k.head, v.array, v.batch, v.row, v.head,
        plan.out, plan.bias, batch_stride, heads_stride, plan.key_lengths, plan.causal, plan.past, plan.lse,
        plan.accumulator, plan.seq, plan.total, plan.head_size, plan.v_head_size, plan.scale)
