"""Kernel: MEA-style (memory-efficient) attention over packed (varlen) planar Q [T, N, H], K, V [T, N, Hv].

Q, K, V are the planar workspace buffers or, on a route reading its inputs directly, the separate
inputs. Adds the optional attention bias with its broadcasts. The running output accumulates in
registers, or, when the route has the FP32 accumulator (Hv > 128 with fp16), in that float32
workspace buffer, sized [B, S, N, Hv] but indexed as CUTLASS's kernel does under seqstart_q: by
packed token, so rows [T, B * S) stay unwritten. Writes output [T, N * Hv].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ..plans import AttentionBias, Packing
from .attention_bias import bias_row
from .online_softmax import HEAD_MAX, attend, block_beyond, launch_shape, query_row, store_row


@cuda.jit
def mea_attention(q, k, v, out, bias, broadcast_batch, broadcast_heads, accumulator, cu, seq, head_size,
                  v_head_size, scale):
    """out[t, n, :] = softmax(scale * q_t . k_j + bias[b, n, s, j]) @ v over t's sequence."""
    b, n, s, first, length = query_row(cu)
    if block_beyond(length):
        return
    active = s < length
    heads = cuda.gridDim.y
    if accumulator is None:
        acc = cuda.local.array(HEAD_MAX, float32)
        acc_base = 0
    else:
        acc = accumulator
        acc_base = ((first + s) * heads + n) * v_head_size
    bias_start = bias_row(b, n, s, heads, seq, broadcast_batch, broadcast_heads)
    m_i, l_i = attend(q, ((first + s) * heads + n) * head_size, scale, k, n * head_size, heads * head_size,
                      v, n * v_head_size, heads * v_head_size, first, length, head_size, v_head_size, active,
                      length, bias, bias_start, acc, acc_base)
    if active:
        store_row(out, ((first + s) * heads + n) * v_head_size, acc, acc_base, v_head_size, l_i)


@dataclass(frozen=True)
class MeaPlan:
    """Planar Q, K, V, output [T, N * Hv], attention bias or None, the FP32 accumulator buffer or None."""

    q: Any
    k: Any
    v: Any
    out: Any
    bias: AttentionBias | None
    accumulator: Any
    packing: Packing
    head_size: int
    v_head_size: int
    scale: float


def launch(plan: MeaPlan) -> None:
    p, bias = plan.packing, plan.bias
    mea_attention[launch_shape(p)](
        plan.q, plan.k, plan.v, plan.out, None if bias is None else bias.array,
        bias is not None and bias.broadcast_batch, bias is not None and bias.broadcast_heads, plan.accumulator,
        p.cumulative_sequence_length, p.seq, plan.head_size, plan.v_head_size, plan.scale)
