"""Kernels: MultiHeadAttention's fused attention (Flash-, MEA- and cuDNN-style), the TRT cross
attention and the TRT kernels' sequence offsets.

`mha_attention`: query row (b, s, n) of S attends keys j < T (T = P + L) of its batch, each of Q,
K, V a strided view (BSNH inputs or copies, BNSH copies or present [B, N, T, *]): out [B, S, N,
Hv] = softmax(scale * q . k_j + attention_bias[b|0, n|0, s, j]) @ v over the keys the row may see:
j < key_lengths[b] when a key-length mask is given (the [B] form, or the first B entries of
[3B + 2]), and j <= P + s when causal. Writes the float32 LSE [B, N, S] when given (Flash) and
accumulates in the float32 workspace accumulator [B, S, N, Hv] when given (MEA, Hv > 128).

`trt_cross_attention`: Q [B*S, N, H] and packed KV [B*L, N, 2, H] with the q and kv offsets the
offsets stage wrote (B + 1 each): sequence b's queries attend its keys.

`trt_sequence_offsets`: B + 1 offsets b * S, or with key lengths 2B + 1 offsets b * S and
b * S + length_b interleaved (the padding of each sequence becomes a sequence of its own, as in
ORT's runner with a mask).

Tiled online softmax from `online_softmax`; launch grid (ceil(S / rows), N, B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .launching import stride_launch
from .online_softmax import HEAD_MAX, attend, store_row
from .strided_copy import Strided

BLOCK_M = 64  # query rows (threads) per block, as online_softmax.BLOCK_M


def grid(seq: int, heads: int, batch: int) -> tuple[tuple[int, int, int], int]:
    """Return (grid, block) of a tiled launch over S query rows: (ceil(S / rows), N, B) blocks of rows."""
    rows = max(1, min(BLOCK_M, seq))
    return (-(-seq // rows), heads, batch), rows


@cuda.jit
def mha_attention(q, q_base, q_b, q_s, q_n, k, k_b, k_t, k_n, v, v_b, v_t, v_n, out, bias, bias_b, bias_n,
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
class MhaAttentionPlan:
    """Strided Q [B, S, N, H], K [B, T, N, H], V [B, T, N, Hv] (views: base, batch, row, head
    strides), the output, the attention bias [B|1, N|1, S, T] or None with its broadcasts, key
    lengths or None, causal with the past length P, the LSE or None, the accumulator or None."""

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


def launch(plan: MhaAttentionPlan) -> None:
    q, k, v = plan.q, plan.k, plan.v
    heads_stride = 0 if plan.bias_broadcast_heads else plan.seq * plan.total
    batch_stride = 0 if plan.bias_broadcast_batch else (1 if plan.bias_broadcast_heads else plan.heads) * \
        plan.seq * plan.total
    shape, rows = grid(plan.seq, plan.heads, plan.batch)
    if plan.seq == 0:
        return
    mha_attention[shape, rows](
        q.array, q.base, q.batch, q.row, q.head, k.array, k.batch, k.row, k.head, v.array, v.batch, v.row, v.head,
        plan.out, plan.bias, batch_stride, heads_stride, plan.key_lengths, plan.causal, plan.past, plan.lse,
        plan.accumulator, plan.seq, plan.total, plan.head_size, plan.v_head_size, plan.scale)


@cuda.jit
def trt_cross_attention(q, kv, out, cu_q, cu_kv, head_size, scale):
    """See the module docstring: sequence b = blockIdx.z, one query row per thread."""
    b = cuda.blockIdx.z
    n = cuda.blockIdx.y
    s = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    first_q = cu_q[b]
    q_len = cu_q[b + 1] - first_q
    if cuda.blockIdx.x * cuda.blockDim.x >= q_len:
        return
    heads = cuda.gridDim.y
    first_k = cu_kv[b]
    k_len = cu_kv[b + 1] - first_k
    active = s < q_len
    acc = cuda.local.array(HEAD_MAX, float32)
    kv_stride = 2 * heads * head_size
    m_i, l_i = attend(q, ((first_q + s) * heads + n) * head_size, scale, kv, 2 * n * head_size, kv_stride,
                      kv, (2 * n + 1) * head_size, kv_stride, first_k, k_len, head_size, head_size, active, k_len,
                      None, 0, acc, 0)
    if active:
        store_row(out, ((first_q + s) * heads + n) * head_size, acc, 0, head_size, l_i)


@dataclass(frozen=True)
class TrtCrossPlan:
    """Q [B*S, N, H], packed KV [B*L, N, 2, H], output [B*S, N, H] and the two offset buffers."""

    q: Any
    kv: Any
    out: Any
    q_offsets: Any
    kv_offsets: Any
    batch: int
    seq: int
    heads: int
    head_size: int
    scale: float


def launch_cross(plan: TrtCrossPlan) -> None:
    if plan.seq == 0:
        return
    shape, rows = grid(plan.seq, plan.heads, plan.batch)
    trt_cross_attention[shape, rows](plan.q, plan.kv, plan.out, plan.q_offsets, plan.kv_offsets, plan.head_size,
                                     plan.scale)


@cuda.jit
def trt_sequence_offsets(offsets, lengths, batch, seq):
    """offsets[i] for i < B + 1 (no lengths) or 2B + 1 (lengths); see the module docstring."""
    count = batch + 1 if lengths is None else 2 * batch + 1
    for i in range(cuda.grid(1), count, cuda.gridsize(1)):
        if lengths is None:
            offsets[i] = i * seq
        elif i % 2 == 0:
            offsets[i] = (i // 2) * seq
        else:
            offsets[i] = (i // 2) * seq + lengths[i // 2]


@dataclass(frozen=True)
class OffsetsPlan:
    """One offsets buffer: B + 1 offsets of sequences of `seq`, or 2B + 1 with `lengths`."""

    offsets: Any
    batch: int
    seq: int
    lengths: Any = None


def launch_offsets(plans: list[OffsetsPlan]) -> None:
    """Enqueue the offsets kernel once per buffer."""
    for plan in plans:
        count = plan.batch + 1 if plan.lengths is None else 2 * plan.batch + 1
        blocks, threads = stride_launch(count)
        trt_sequence_offsets[blocks, threads](plan.offsets, plan.lengths, plan.batch, plan.seq)
