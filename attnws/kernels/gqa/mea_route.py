"""GroupQueryAttention's MEA route: the K / V head expansion, then MEA-style attention.

ORT 1.31.1's kernels they stand for (`docs/research/gqa-footprint.md` §2):

- `expand_key_value`: Ungroup (LaunchUngroup in `group_query_attention_impl.cu`, run only when
  N != Nk), once for K and once for V: the present cache [B, Nk, Ce, H] becomes [B, N, Ce, H] in
  the `expanded_key` / `expanded_value` regions, query head n taking KV head n // (N / Nk); every
  one of the B * N * Ce * H elements is written, all Ce rows whatever the sequence lengths.
- `attention`: cutlass fmha (`run_memory_efficient_attention` from EfficientAttention, with
  `has_custom_right_padding` and seqlen_k_ptr): query row s of batch entry b sits at position
  q = L_b - S + s among its L_b = seqlens_k[b] keys (cache_total_seq_lens windowed, padded_seq_lens
  on the first prompt, else total_seq_lens); causal keeps keys j <= q, a local window W > 0 keeps
  keys j > q - W (W keys). The float32 output accumulator [B, S, N, H] (the `output_accumulator`
  region) is used exactly when H > 128, every element written; otherwise the running output stays
  in registers. Writes the output [B, S, N * H].

`launch_sequence` runs them, stage for stage of `attnws.spec.gqa.footprint.backend_stages`, on the
prepared query, cache and key lengths (`layouts`) and the carved regions. The attention is the backends' online
softmax (`backends.online_softmax.attend`), one query row per block so that each row streams only
its own key range [start, end).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda, float32

from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.footprint import EXPANDED, OUTPUT_ACCUMULATOR
from ...spec.limits import MEA_ACCUMULATOR_MIN_V_HEAD
from ...spec.statement import OUTPUT
from ..backends.online_softmax import HEAD_MAX, attend, store_row
from ..launching import Launch
from ..plans import softmax_scale
from ..strided_copy import CopyPlan, Strided, launch as launch_copy
from ..workspace import Workspace
from .layouts import Prepared

ROWS_PER_BLOCK = 1  # query rows (threads) per block; limit 1: each row streams its own key range [start, end)


def expand_key_value(expanded_key: Any, expanded_value: Any, present_key: Any, present_value: Any, batch: int,
                     heads: int, kv_heads: int, capacity: int, head_size: int) -> list[Launch]:
    """Return Ungroup (K) and Ungroup (V): every element of [B, N, Ce, H] (Ce = `capacity`) from the
    present cache [B, Nk, Ce, H], head n from KV head n // (N / Nk)."""
    if heads % kv_heads or heads == kv_heads:
        raise ValueError(f"Ungroup runs for N a multiple of Nk other than Nk: N={heads}, Nk={kv_heads}")
    group = heads // kv_heads
    plane = capacity * head_size
    # (b * Nk + nk, row, g, h): the source repeats over g (head stride 0), the destination steps by head.
    def plan(dst: Any, src: Any) -> CopyPlan:
        return CopyPlan(Strided(src, 0, plane, head_size, 0), Strided(dst, 0, group * plane, head_size, plane),
                        batch * kv_heads, capacity, group, head_size)

    return [Launch("Ungroup (K)", partial(launch_copy, plan(expanded_key, present_key))),
            Launch("Ungroup (V)", partial(launch_copy, plan(expanded_value, present_value)))]


@cuda.jit
def right_padded_rows(q, k, v, out, key_lengths, key_capacity, causal, window, accumulator, seq, head_size, scale):
    """One query row (b, s, n) per block of grid (S, N, B): out[b, s, n, :] = softmax(scale * q . k_j) @ v
    over keys j in [start, end) of head n of K and V [B, N, Ce, H]; see the module docstring."""
    s = cuda.blockIdx.x
    n = cuda.blockIdx.y
    b = cuda.blockIdx.z
    heads = cuda.gridDim.y
    length = min(key_lengths[b], key_capacity)
    position = length - seq + s
    end = min(length, position + 1) if causal else length
    start = max(0, position - window + 1) if window > 0 else 0
    end = max(end, start)
    row = ((b * seq + s) * heads + n) * head_size
    if accumulator is None:
        acc = cuda.local.array(HEAD_MAX, float32)
        acc_base = 0
    else:
        acc = accumulator
        acc_base = row
    kv_head = (b * heads + n) * key_capacity * head_size
    m_i, l_i = attend(q, row, scale, k, kv_head, head_size, v, kv_head, head_size, start, end - start, head_size,
                      head_size, True, end - start, None, 0, acc, acc_base)
    store_row(out, row, acc, acc_base, head_size, l_i)


@dataclass(frozen=True)
class GroupedAttentionPlan:
    """Q [B, S, N, H] (the prepared query), K and V [B, N, Ce, H] BNSH (the expanded regions, or
    the present cache itself when N == Nk), key lengths int32 [B], the output [B, S, N * H],
    the float32 accumulator [B, S, N, H] (exactly when H > 128) or None, causal, the local window
    W (-1: none) and the softmax scale."""

    q: Any
    k: Any
    v: Any
    out: Any
    key_lengths: Any
    batch: int
    seq: int
    heads: int
    capacity: int
    head_size: int
    scale: float
    accumulator: Any = None
    causal: bool = True
    window: int = -1


def attention(plan: GroupedAttentionPlan) -> Launch:
    """Return the MEA attention stage, named after the footprint's accumulator writer."""
    p = plan
    if (p.accumulator is not None) != (p.head_size > MEA_ACCUMULATOR_MIN_V_HEAD):
        raise ValueError(f"MEA's float32 accumulator is used exactly when H > {MEA_ACCUMULATOR_MIN_V_HEAD}: "
                         f"H={p.head_size}, accumulator given: {p.accumulator is not None}")
    if p.head_size > HEAD_MAX:
        raise ValueError(f"needs H <= {HEAD_MAX}: H={p.head_size}")

    def enqueue() -> None:
        right_padded_rows[(p.seq, p.heads, p.batch), ROWS_PER_BLOCK](
            p.q, p.k, p.v, p.out, p.key_lengths, p.capacity, p.causal, p.window, p.accumulator, p.seq,
            p.head_size, p.scale)

    return Launch("cutlass fmha (accumulator)", enqueue)


def launch_sequence(p: GqaProblem, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return Ungroup (K) and (V) when N != Nk, then the attention, over the carved regions."""
    b, n, h, ce = p.batch_size, p.num_heads, p.head_size, prepared.capacity
    launches, k, v = [], prepared.key, prepared.value
    if n != p.kv_num_heads:
        k, v = ws.arrays[EXPANDED[0]], ws.arrays[EXPANDED[1]]
        launches += expand_key_value(k, v, prepared.key, prepared.value, b, n, p.kv_num_heads, ce, h)
    kernel = GroupedAttentionPlan(prepared.query, k, v, ws.arrays[OUTPUT], prepared.key_lengths, b, p.sequence_length,
                                  n, ce, h, softmax_scale(h), ws.arrays.get(OUTPUT_ACCUMULATOR), p.causal,
                                  p.local_window_size)
    return (*launches, attention(kernel))
