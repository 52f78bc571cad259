"""Kernel: MEA-style (memory-efficient) attention over packed (varlen) planar Q [T, N, H], K, V [T, N, Hv].

Q, K, V are the planar workspace buffers or, on a route reading its inputs directly, the separate
inputs. Adds the optional attention bias with its broadcasts. The running output accumulates in
registers, or, when the route has the FP32 accumulator (Hv > 128 with fp16), in that float32
workspace buffer, sized [B, S, N, Hv] but indexed as CUTLASS's kernel does under seqstart_q: by
packed token, so rows [T, B * S) stay unwritten. Writes output [T, N * Hv].

By default the keys are packed as the queries are (one cumulative length array, seqstart_q =
seqstart_k) and every row sees its sequence's keys. Given `key_packing` (seqstart_k, int32
[B + 1]), sequence b's keys are rows [seqstart_k[b], seqstart_k[b + 1]) of K and V ([Tk, N, H]);
`causal` aligns the diagonal bottom-right (CUTLASS's CausalFromBottomRight): query row s of a
sequence of Lq queries and Lk keys sees its keys j <= Lk - Lq + s.
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
                  v_head_size, scale, key_cu, causal):
    """out[t, n, :] = softmax(scale * q_t . k_j + bias[b, n, s, j]) @ v over the keys t's row sees
    (key_cu None: its sequence's, packed as the queries; else rows key_cu[b] .. key_cu[b + 1] - 1)."""
    b, n, s, first, length = query_row(cu)
    if block_beyond(length):
        return
    active = s < length
    heads = cuda.gridDim.y
    key_first = first
    keys = length
    if key_cu is not None:
        key_first = key_cu[b]
        keys = key_cu[b + 1] - key_first
    row_keys = keys
    if causal:
        row_keys = max(min(keys, keys - length + s + 1), 0)
    if accumulator is None:
        acc = cuda.local.array(HEAD_MAX, float32)
        acc_base = 0
    else:
        acc = accumulator
        acc_base = ((first + s) * heads + n) * v_head_size
    bias_start = bias_row(b, n, s, heads, seq, broadcast_batch, broadcast_heads)
    m_i, l_i = attend(q, ((first + s) * heads + n) * head_size, scale, k, n * head_size, heads * head_size,
                      v, n * v_head_size, heads * v_head_size, key_first, keys, head_size, v_head_size, active,
                      row_keys, bias, bias_start, acc, acc_base)
    if active:
        store_row(out, ((first + s) * heads + n) * v_head_size, acc, acc_base, v_head_size, l_i)


@dataclass(frozen=True)
class MeaPlan:
    """Planar Q, K, V, output [T, N * Hv], attention bias or None, the FP32 accumulator buffer or None;
    the keys' own cumulative lengths (device int32 [B + 1]) or None (packed as the queries), and
    bottom-right causality (module docstring)."""

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
    key_packing: Any = None
    causal: bool = False


def launch(plan: MeaPlan) -> None:
    p, bias = plan.packing, plan.bias
    mea_attention[launch_shape(p)](
        plan.q, plan.k, plan.v, plan.out, None if bias is None else bias.array,
        bias is not None and bias.broadcast_batch, bias is not None and bias.broadcast_heads, plan.accumulator,
        p.cumulative_sequence_length, p.seq, plan.head_size, plan.v_head_size, plan.scale, plan.key_packing,
        plan.causal)
