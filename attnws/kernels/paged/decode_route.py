"""PagedAttention's portable decode route (`PagedDecodeSplitKV` + `PagedDecodeReduce`, ORT 1.31.1's
`paged_attention_impl.cu`; `docs/research/paged-workspace.md` §3.5 and §4.2): the split-KV
attention of every new token through the block table, then the reduction of its splits.

Split count s = ComputePagedDecodeSplits(T, N, Kx, SMs) (the recipe's `splits`, Kx the key length
the kernel sizes with). Split sigma takes key positions [sigma P, (sigma + 1) P), P =
ceil(ceil(Kx / 128) / s) * 128 (whole 128-key tiles); a split past a sequence's keys is empty, and
it still writes its rows (the reduce reads all s).

- `paged_decode_split_kv`: grid (N, T, s), one thread per (query head n, token t, split sigma).
  Token t of sequence b (cu_q[b] <= t < cu_q[b + 1]) at position q = L_b - n_b + (t - cu_q[b])
  (L_b = cu_kv[b + 1] - cu_kv[b]) scores the keys j <= q of its split (causal within the step's
  new tokens), x_j = scale * q_t . k_j, with KV head n // (N / Nk) read through the block table;
  online softmax (m_i, l_i, acc). Row r = (sigma T + t) N + n writes, float32,
  `decode_partial_out` [s, T, N, H] = acc (unnormalized; 0 for an empty split),
  `decode_partial_max` [s, T, N] = m_i (-inf) and `decode_partial_sum` [s, T, N] = l_i (0).
- `paged_decode_reduce`: grid (N, T): m = max_sigma m_sigma, l = sum_sigma exp(m_sigma - m) l_sigma,
  output [T, N * H] = sum_sigma exp(m_sigma - m) acc_sigma / l (0 for a row with no key), fp16;
  an empty split (l_sigma = 0) adds nothing, a NaN one poisons the row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda, float32

from ...spec.domain import CONCRETE
from ...spec.paged.problem import PagedProblem
from ...spec.paged.recipe import DECODE_TILE, PagedRecipe, sizing
from ...spec.problem import Backend
from ..backends.online_softmax import HEAD_MAX, key_step, load_row
from ..launching import Launch
from ..plans import ceil_div, softmax_scale
from ..workspace import Workspace
from .layouts import Prepared
from .paging import sequence_of, slot_offset

PARTIAL_OUT, PARTIAL_MAX, PARTIAL_SUM = "decode_partial_out", "decode_partial_max", "decode_partial_sum"


@cuda.jit
def paged_decode_split_kv(q, key_cache, value_cache, block_table, cu_q, cu_kv, partial_out, partial_max,
                          partial_sum, batch, tokens, kv_heads, block_size, max_blocks, head_size, split_keys, scale):
    """One (head, token, split) per block of grid (N, T, s); see the module docstring."""
    n = cuda.blockIdx.x
    t = cuda.blockIdx.y
    split = cuda.blockIdx.z
    heads = cuda.gridDim.x
    b = sequence_of(cu_q, batch, t)
    keys = cu_kv[b + 1] - cu_kv[b]
    position = keys - (cu_q[b + 1] - cu_q[b]) + t - cu_q[b]
    start = split * split_keys
    end = min(min(keys, position + 1), start + split_keys)
    kv_head = n // (heads // kv_heads)
    q_row = cuda.local.array(HEAD_MAX, float32)
    acc = cuda.local.array(HEAD_MAX, float32)
    load_row(q_row, q, (t * heads + n) * head_size, head_size, scale)
    for h in range(head_size):
        acc[h] = 0.0
    m_i = float32(-math.inf)
    l_i = float32(0.0)
    for j in range(start, end):
        at = slot_offset(block_table, b, j, block_size, max_blocks, kv_heads, kv_head, head_size)
        x = float32(0.0)
        for h in range(head_size):
            x += q_row[h] * float32(key_cache[at + h])
        m_i, l_i, weight = key_step(acc, head_size, m_i, l_i, x)
        for h in range(head_size):
            acc[h] += weight * float32(value_cache[at + h])
    row = (split * tokens + t) * heads + n
    for h in range(head_size):
        partial_out[row * head_size + h] = acc[h]
    partial_max[row] = m_i
    partial_sum[row] = l_i


@cuda.jit
def paged_decode_reduce(partial_out, partial_max, partial_sum, out, splits, tokens, head_size):
    """One (head, token) per block of grid (N, T): the splits' rows into the output row."""
    n = cuda.blockIdx.x
    t = cuda.blockIdx.y
    heads = cuda.gridDim.x
    top = float32(-math.inf)
    for split in range(splits):
        top = max(top, partial_max[(split * tokens + t) * heads + n])
    total = float32(0.0)
    for split in range(splits):
        row = (split * tokens + t) * heads + n
        if partial_sum[row] != 0:  # an empty split adds nothing; a NaN one poisons the row
            total += math.exp(partial_max[row] - top) * partial_sum[row]
    for h in range(head_size):
        o = float32(0.0)
        for split in range(splits):
            row = (split * tokens + t) * heads + n
            if partial_sum[row] != 0:  # an empty split adds nothing; a NaN one poisons the row
                o += math.exp(partial_max[row] - top) * partial_out[row * head_size + h]
        out[(t * heads + n) * head_size + h] = float32(0.0) if total == 0 else o / total


@dataclass(frozen=True)
class DecodePlan:
    """The prepared step (query, cache, lengths, output), the three partial buffers (float32, flat),
    the split count s and the keys per split P (module docstring)."""

    prepared: Prepared
    partial_out: Any
    partial_max: Any
    partial_sum: Any
    batch: int
    tokens: int
    heads: int
    head_size: int
    splits: int
    split_keys: int


def launch_split_kv(plan: DecodePlan) -> None:
    """Enqueue PagedDecodeSplitKV (grid (N, T, s), one thread per block)."""
    p, c = plan.prepared, plan.prepared.cache
    if plan.head_size > HEAD_MAX:
        raise ValueError(f"needs H <= {HEAD_MAX}: H={plan.head_size}")
    paged_decode_split_kv[(plan.heads, plan.tokens, plan.splits), 1](
        p.query, c.key, c.value, c.block_table, p.cu_q, p.cu_kv, plan.partial_out, plan.partial_max, plan.partial_sum,
        plan.batch, plan.tokens, c.kv_heads, c.block_size, c.max_blocks, plan.head_size, plan.split_keys,
        softmax_scale(plan.head_size))


def launch_reduce(plan: DecodePlan) -> None:
    """Enqueue PagedDecodeReduce (grid (N, T), one thread per block)."""
    paged_decode_reduce[(plan.heads, plan.tokens), 1](plan.partial_out, plan.partial_max, plan.partial_sum,
                                                       plan.prepared.output, plan.splits, plan.tokens, plan.head_size)


def split_keys(p: PagedProblem, splits: int) -> int:
    """Return P: whole 128-key tiles of the sized key length Kx per split (module docstring)."""
    _, kx, _ = sizing(CONCRETE, p, Backend.PAGED_DECODE)
    return ceil_div(ceil_div(kx, DECODE_TILE), splits) * DECODE_TILE


def plan(p: PagedProblem, recipe: PagedRecipe, prepared: Prepared, ws: Workspace) -> DecodePlan:
    """Return the route's plan over the carved requests at the recipe's split count."""
    splits = int(recipe.splits)
    return DecodePlan(prepared, ws.arrays[PARTIAL_OUT], ws.arrays[PARTIAL_MAX], ws.arrays[PARTIAL_SUM], p.batch_size,
                      p.token_count, p.num_heads, p.head_size, splits, split_keys(p, splits))


def launch_sequence(p: PagedProblem, recipe: PagedRecipe, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's kernels in order: PagedDecodeSplitKV, then PagedDecodeReduce."""
    kernels = plan(p, recipe, prepared, ws)
    return (Launch("PagedDecodeSplitKV", partial(launch_split_kv, kernels)),
            Launch("PagedDecodeReduce", partial(launch_reduce, kernels)))
