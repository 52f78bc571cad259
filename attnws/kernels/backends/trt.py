"""Kernels of ORT's TRT backend: the fused runner's attention, its cross attention and the sequence
offsets both read. Tiled online softmax (see online_softmax); no scratch.

`trt_fused_attention`: interleaved [T, N, 3, H] Q/K/V (the workspace buffer, or the operator's
packed QKV input read directly when the route has no QKV workspace), output [T, N * H]; sequence b
is tokens [cu[b], cu[b + 1]) of the offsets it is given.

`trt_cross_attention`: Q [B*S, N, H] and packed KV [B*L, N, 2, H] with the q and kv offsets the
offsets stage wrote (B + 1 each): sequence b's queries attend its keys; output [B*S, N, H].

`trt_sequence_offsets`: B + 1 offsets b * S, or with key lengths 2B + 1 offsets b * S and
b * S + length_b interleaved (the padding of each sequence becomes a sequence of its own, as in
ORT's runner with a mask).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ..launching import stride_launch
from ..plans import Packing
from .online_softmax import HEAD_MAX, attend, block_beyond, launch_shape, query_row, row_grid, store_row


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
    shape, rows = row_grid(plan.seq, plan.heads, plan.batch)
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
    """One offsets buffer (int32): B + 1 offsets of sequences of `seq`, or 2B + 1 with `lengths`."""

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
