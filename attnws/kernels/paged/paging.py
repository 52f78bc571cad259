"""PagedAttention's cache kernels: the step's key lengths, the new tokens into their cache slots,
and the dense gather of the cache (ORT 1.31.1's `paged_attention_impl.cu`,
`docs/research/paged-workspace.md` §3).

The paged cache is [num_blocks, bs, Nk, H]: key position j of sequence b lies in slot j mod bs of
block block_table[b, j // bs] (block_table int32 [B, M]). Sequence b has n_b = cu_q[b + 1] - cu_q[b]
new tokens (cumulative_sequence_length, int32 [B + 1]) after past_b = past_seqlens[b] earlier
ones: its key length is L_b = past_b + n_b, and new token i sits at position past_b + i.

- `cumulative_kv_lengths`: GetCumulativeSeqlensKV, cu_kv[b] = sum of L_b' over b' < b, for
  b = 0 .. B (B + 1 int32; ORT's block scan, here each thread its own sum).
- `reshape_and_cache`: ReshapeAndCache with the derived slot resolver (no slot_mapping): the new K
  and V rows [T, Nk * H] into the slots of their positions; nothing else of the caches.
- `gather_and_expand`: GatherAndExpandPagedKVCache: key j < L_b of sequence b into row
  cu_kv[b] + j of a dense [Ktok, heads, H] (heads = N: each query head n reads KV head
  n // (N / Nk); heads = Nk: as stored); a position whose block lies past the table's M blocks is
  skipped, as ORT's kernel skips it.

Every kernel is grid-stride (`launching.stride_launch`), element type in and out; counts are
elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from ..launching import stride_launch


@cuda.jit(device=True)
def sequence_of(cumulative, batch, row):
    """Return the b < batch whose rows [cumulative[b], cumulative[b + 1]) hold `row` (the last such b
    when empty sequences share the boundary)."""
    b = 0
    while b + 1 < batch and cumulative[b + 1] <= row:
        b += 1
    return b


@cuda.jit
def key_length_sums(cu_kv, cu_q, past_seqlens, batch):
    """cu_kv[b] = sum over b' < b of past_seqlens[b'] + cu_q[b' + 1] - cu_q[b'], for b <= batch."""
    for b in range(cuda.grid(1), batch + 1, cuda.gridsize(1)):
        total = 0
        for prior in range(b):
            total += past_seqlens[prior] + cu_q[prior + 1] - cu_q[prior]
        cu_kv[b] = total


def cumulative_kv_lengths(cu_kv: Any, cu_q: Any, past_seqlens: Any, batch: int) -> None:
    """Enqueue GetCumulativeSeqlensKV into the int32 `cu_kv` (at least B + 1 entries)."""
    blocks, threads = stride_launch(batch + 1)
    key_length_sums[blocks, threads](cu_kv, cu_q, past_seqlens, batch)


@dataclass(frozen=True)
class PagedCache:
    """The device cache: key and value [num_blocks, bs, Nk, H] flat, block_table int32 [B, M] flat,
    and its geometry."""

    key: Any
    value: Any
    block_table: Any
    block_size: int
    max_blocks: int
    kv_heads: int
    head_size: int


@cuda.jit(device=True)
def slot_offset(block_table, b, position, block_size, max_blocks, kv_heads, kv_head, head_size):
    """Return the element offset of (position, kv_head) of sequence b in a cache [blocks, bs, Nk, H]."""
    block = block_table[b * max_blocks + position // block_size]
    return ((block * block_size + position % block_size) * kv_heads + kv_head) * head_size


@cuda.jit
def cache_new_rows(key_cache, value_cache, key, value, block_table, cu_q, past_seqlens, batch, tokens, block_size,
                   max_blocks, kv_heads, head_size):
    """The new token t's K and V rows (key, value [T, Nk, H]) into the slot of position
    past_b + (t - cu_q[b]) of its sequence b."""
    per_token = kv_heads * head_size
    for index in range(cuda.grid(1), tokens * per_token, cuda.gridsize(1)):
        t = index // per_token
        nk = (index - t * per_token) // head_size
        h = index - t * per_token - nk * head_size
        b = sequence_of(cu_q, batch, t)
        at = slot_offset(block_table, b, past_seqlens[b] + t - cu_q[b], block_size, max_blocks, kv_heads, nk,
                         head_size) + h
        key_cache[at] = key[index]
        value_cache[at] = value[index]


def reshape_and_cache(cache: PagedCache, key: Any, value: Any, cu_q: Any, past_seqlens: Any, batch: int,
                      tokens: int) -> None:
    """Enqueue ReshapeAndCache: the T new K and V rows ([T, Nk * H]) into their slots."""
    blocks, threads = stride_launch(tokens * cache.kv_heads * cache.head_size)
    cache_new_rows[blocks, threads](cache.key, cache.value, key, value, cache.block_table, cu_q, past_seqlens, batch,
                                    tokens, cache.block_size, cache.max_blocks, cache.kv_heads, cache.head_size)


@cuda.jit
def gather_rows(dst, src, block_table, cu_kv, cu_q, past_seqlens, batch, capacity, heads, block_size, max_blocks,
                kv_heads, head_size):
    """dst[(cu_kv[b] + j) * heads + n, :] = src's row of position j < L_b of sequence b, KV head
    n // (heads / kv_heads), for j < capacity (M * bs) whose block lies in the table."""
    group = heads // kv_heads
    per_position = heads * head_size
    for index in range(cuda.grid(1), batch * capacity * per_position, cuda.gridsize(1)):
        b = index // (capacity * per_position)
        j = (index - b * capacity * per_position) // per_position
        n = (index - (b * capacity + j) * per_position) // head_size
        h = index - (b * capacity + j) * per_position - n * head_size
        length = past_seqlens[b] + cu_q[b + 1] - cu_q[b]
        if j < length and j // block_size < max_blocks:
            at = slot_offset(block_table, b, j, block_size, max_blocks, kv_heads, n // group, head_size)
            dst[((cu_kv[b] + j) * heads + n) * head_size + h] = src[at + h]


@dataclass(frozen=True)
class GatherPlan:
    """The gather of one cache (`source`: the key or the value cache) into `destination`
    [Ktok, heads, H]; the sequences' lengths as the kernel reads them (device int32)."""

    destination: Any
    source: Any
    cache: PagedCache
    cu_kv: Any
    cu_q: Any
    past_seqlens: Any
    batch: int
    heads: int


def gather_and_expand(plan: GatherPlan) -> None:
    """Enqueue GatherAndExpandPagedKVCache for one cache (grid-stride over B * M * bs * heads * H)."""
    c = plan.cache
    capacity = c.max_blocks * c.block_size
    blocks, threads = stride_launch(plan.batch * capacity * plan.heads * c.head_size)
    gather_rows[blocks, threads](plan.destination, plan.source, c.block_table, plan.cu_kv, plan.cu_q,
                                 plan.past_seqlens, plan.batch, capacity, plan.heads, c.block_size, c.max_blocks,
                                 c.kv_heads, c.head_size)
