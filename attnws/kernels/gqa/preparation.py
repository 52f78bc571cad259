"""GroupQueryAttention's preparation stages: the windowed cache's staging and compaction, the int32
sequence-length vectors, and the unpacking and rotary embedding of the new Q, K and V.

Each function takes plain device arrays (a recipe region's view, the inputs, the cache) and the
problem's dimensions, and returns `Launch` objects named after the footprint's writers
(`attnws.spec.gqa.footprint.preparation_touches`). ORT 1.31.1's kernels they stand for, all in
`group_query_attention_impl.cu` (`docs/research/gqa-footprint.md` §4):

- `copy_cache_rows`: CopyKvCacheRows (LaunchCopyKvCacheWindow). Copies whole cache rows between
  two BNSH caches of capacities src / dst: row s of each (b, kv head) takes source row
  s + src_offsets[b] (src_offsets None: s) when that is in [0, src capacity), for s < min(rows,
  dst capacity). Seeding the staged cache [B, Nk, C + S, H] from the real one writes rows s < C of
  `staged_key` / `staged_value`. ORT moves K and V in one launch; here one launch each.
- `compact_cache`: CompactKvCacheRows twice (LaunchCompactKvCache), S == 1: for each b with
  evict_counts[b] = D > 0 and each retained row s < cache_past_seq_lens[b], pass 1 scratch[s] <-
  cache[s + D], pass 2 cache[s] <- scratch[s]; the scratch is the `compaction` region, its K half
  [B, Nk, C, H] first, then its V half.
- `sequence_lengths`: GetSequenceLengths, one thread per batch entry: past, total and padded
  lengths, and with a windowed cache the cache-relative past and total lengths and the eviction
  counts, into the `sequence_lengths` region.
- `unpack_query`, `append_key_value`: UnpackRoPEAppend (LaunchUnpackRoPEAppend). Q [B, S, N, H]
  (from the query or the Q part of packed QKV [B, S, (N + 2 Nk) H]), rotated at each token's
  position past_seq_lens[b] + s, into the `qkv_preprocess` scratch; the new K rows (rotated) and V
  rows appended to a BNSH cache at row append_at[b] + s. ORT does the three in one launch of grid
  (S, N + 2 Nk, B); here Q is one launch and K, V another, so the Q scratch is its own stage.

Rotary embedding (`backends.rotary.rotated_element`) over the whole head (rotary_dim = H), from
cos / sin caches [max_pos, H / 2]: non-interleaved pairs (i, i + H / 2), interleaved pairs
(2i, 2i + 1), each rotated by angle i: (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin). Element type
in and out, float32 arithmetic.
Every kernel here is grid-stride (`launching.stride_launch`); counts are elements unless a name
says bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda

from ..backends.rotary import rotated_element
from ..launching import Launch, stride_launch

SEQUENCE_VECTORS = ("past_seq_lens", "total_seq_lens", "padded_seq_lens")
WINDOWED_VECTORS = ("cache_past_seq_lens", "cache_total_seq_lens", "evict_counts")


# -- staging and compaction -------------------------------------------------------------------
@cuda.jit
def cache_rows(dst, src, src_offsets, src_capacity, dst_capacity, rows, heads, batch, row_elements):
    """dst[((b * Nk + n) * dst_capacity + s) * R + e] = src[((b * Nk + n) * src_capacity + s + off_b) * R + e]
    for s < min(rows, dst_capacity) with 0 <= s + off_b < src_capacity (off_b = src_offsets[b], or 0)."""
    per_head = rows * row_elements
    for index in range(cuda.grid(1), batch * heads * per_head, cuda.gridsize(1)):
        head = index // per_head
        s = (index - head * per_head) // row_elements
        e = index - head * per_head - s * row_elements
        source = s if src_offsets is None else s + src_offsets[head // heads]
        if s < dst_capacity and 0 <= source < src_capacity:
            dst[(head * dst_capacity + s) * row_elements + e] = src[(head * src_capacity + source) * row_elements + e]


@dataclass(frozen=True)
class CacheGeometry:
    """A BNSH cache's shape: B batch entries, Nk heads, `capacity` rows of `row_elements` elements
    (H unquantized; the row's bytes over the element size otherwise)."""

    batch: int
    kv_heads: int
    capacity: int
    row_elements: int


def copy_cache_rows(dst_k: Any, dst_v: Any, src_k: Any, src_v: Any, src: CacheGeometry, dst_capacity: int,
                    rows: int, src_offsets: Any = None) -> list[Launch]:
    """Return CopyKvCacheRows for K then V: rows s < min(rows, dst_capacity) of every (b, kv head)
    of the dst caches [B, Nk, dst_capacity, R] from src rows s + src_offsets[b] (int32 [B], or None
    for 0) of [B, Nk, src.capacity, R] where that row exists; no other dst element is written."""
    if rows < 0 or dst_capacity < 0:
        raise ValueError(f"rows={rows} and dst_capacity={dst_capacity} must be >= 0")

    def enqueue(dst: Any, source: Any) -> None:
        blocks, threads = stride_launch(src.batch * src.kv_heads * rows * src.row_elements)
        cache_rows[blocks, threads](dst, source, src_offsets, src.capacity, dst_capacity, rows, src.kv_heads,
                                    src.batch, src.row_elements)

    return [Launch("CopyKvCacheRows (K)", partial(enqueue, dst_k, src_k)),
            Launch("CopyKvCacheRows (V)", partial(enqueue, dst_v, src_v))]


@cuda.jit
def compaction_pass(dst, src, evict_counts, retained, heads, batch, capacity, row_elements, shifted):
    """For b with D = evict_counts[b] > 0 and s < retained[b]: dst row s of (b, kv head) <- src row
    s + D (shifted) or s, rows of R elements in [B, Nk, C, R]."""
    per_head = capacity * row_elements
    for index in range(cuda.grid(1), batch * heads * per_head, cuda.gridsize(1)):
        head = index // per_head
        s = (index - head * per_head) // row_elements
        e = index - head * per_head - s * row_elements
        d = evict_counts[head // heads]
        if d > 0 and s < retained[head // heads]:
            source = s + d if shifted else s
            dst[(head * capacity + s) * row_elements + e] = src[(head * capacity + source) * row_elements + e]


def compact_cache(compaction: Any, present_k: Any, present_v: Any, cache: CacheGeometry, evict_counts: Any,
                  cache_past_seq_lens: Any) -> Launch:
    """Return CompactKvCacheRows: both passes over K and V. `compaction` is the region (at least
    2 * B * Nk * C * R elements of the cache's type: K half, then V half); pass 1 writes retained
    rows s < cache_past_seq_lens[b] of batch entries with evict_counts[b] > 0 into it, pass 2
    copies them back to the front of the present caches."""
    half = cache.batch * cache.kv_heads * cache.capacity * cache.row_elements
    if compaction.shape[0] < 2 * half:
        raise ValueError(f"compaction holds {compaction.shape[0]} elements, needs 2 * {half}")
    scratch_k, scratch_v = compaction[:half], compaction[half:2 * half]

    def enqueue() -> None:
        blocks, threads = stride_launch(half)
        for shifted, pairs in ((True, ((scratch_k, present_k), (scratch_v, present_v))),
                               (False, ((present_k, scratch_k), (present_v, scratch_v)))):
            for dst, src in pairs:
                compaction_pass[blocks, threads](dst, src, evict_counts, cache_past_seq_lens, cache.kv_heads,
                                                 cache.batch, cache.capacity, cache.row_elements, shifted)

    return Launch("CompactKvCacheRows", enqueue)


# -- sequence lengths -------------------------------------------------------------------------
@cuda.jit(device=True)
def windowed_end(past, capacity, gap):
    """WindowedCacheEnd: one past the last resident row, whole `gap` blocks reclaimed at once."""
    if past <= capacity:
        return past
    return past - gap * ((past - capacity + gap - 1) // gap)


@cuda.jit
def seq_lengths(seqlens_k, vectors, batch, seq, first_prompt, windowed, used_capacity, real_capacity):
    """Vector v of the int32 region is vectors[v * B : (v + 1) * B], in the order
    SEQUENCE_VECTORS then (windowed) WINDOWED_VECTORS; see the module docstring."""
    for b in range(cuda.grid(1), batch, cuda.gridsize(1)):
        total = max(seqlens_k[b], 0) + 1
        past = 0 if first_prompt else max(total - seq, 0)
        vectors[b] = past
        vectors[batch + b] = total
        vectors[2 * batch + b] = seq if first_prompt else 0
        if windowed:
            window = min(real_capacity, used_capacity)
            gap = real_capacity - window + 1
            if seq == 1:
                resident = windowed_end(past, real_capacity, gap)
                evicted = max(resident - (windowed_end(past + 1, real_capacity, gap) - 1), 0)
                shifted = 0 if used_capacity < real_capacity else evicted
            else:
                resident = min(past, real_capacity)
                evicted = max(resident + seq - real_capacity, 0)
                shifted = max(resident + seq - used_capacity, 0)
            vectors[3 * batch + b] = resident - shifted
            vectors[4 * batch + b] = min(resident + seq, used_capacity)
            vectors[5 * batch + b] = evicted


@dataclass(frozen=True)
class Window:
    """A windowed cache's capacities: the one in use (C + S while staging, else C) and the real C."""

    used_capacity: int
    real_capacity: int


def vector_count(window: Window | None) -> int:
    """Return the int32 [B] vectors GetSequenceLengths writes: 3, or 6 with a windowed cache."""
    return len(SEQUENCE_VECTORS) + (0 if window is None else len(WINDOWED_VECTORS))


def sequence_vectors(region: Any, batch: int, window: Window | None) -> dict[str, Any]:
    """Return each vector's name -> its int32 [B] view of the `sequence_lengths` region."""
    names = SEQUENCE_VECTORS + (() if window is None else WINDOWED_VECTORS)
    return {name: region[i * batch:(i + 1) * batch] for i, name in enumerate(names)}


def sequence_lengths(region: Any, seqlens_k: Any, batch: int, seq: int, total_sequence_length: int,
                     window: Window | None = None) -> Launch:
    """Return GetSequenceLengths: from seqlens_k (int32 [B], total - 1) and the host's total
    sequence length T (first prompt: S == T), every entry of the 3 (6 windowed) int32 [B] vectors
    in the region (at least vector_count(window) * B int32)."""
    if region.shape[0] < vector_count(window) * batch:
        raise ValueError(f"sequence_lengths holds {region.shape[0]} int32, needs {vector_count(window)} * B={batch}")
    used, real = (0, 0) if window is None else (window.used_capacity, window.real_capacity)

    def enqueue() -> None:
        blocks, threads = stride_launch(batch)
        seq_lengths[blocks, threads](seqlens_k, region, batch, seq, seq == total_sequence_length, window is not None,
                                     used, real)

    return Launch("GetSequenceLengths", enqueue)


# -- unpack, rotary, append -------------------------------------------------------------------
@cuda.jit
def unpack_rotate(src, s_base, s_token, dst, d_base, d_batch, d_row, d_head, dst_rows, past, cos, sin, interleaved,
                  batch, seq, heads, head_size):
    """dst[d_base + b * d_batch + (x + dst_rows[b]) * d_row + n * d_head + h] = the rotated element h of
    head n of token (b, x) at src[s_base + (b * S + x) * s_token + n * H], rotated at position
    past[b] + x (dst_rows None: row x; cos None: no rotation)."""
    half = head_size // 2
    per_token = heads * head_size
    for index in range(cuda.grid(1), batch * seq * per_token, cuda.gridsize(1)):
        token = index // per_token
        n = (index - token * per_token) // head_size
        h = index - token * per_token - n * head_size
        b = token // seq
        x = token - b * seq
        row = x if dst_rows is None else x + dst_rows[b]
        value = rotated_element(src, s_base + token * s_token + n * head_size, h, half, past[b] + x, cos, sin,
                                interleaved)
        dst[d_base + b * d_batch + row * d_row + n * d_head + h] = value


@dataclass(frozen=True)
class Rotary:
    """cos and sin caches [max_pos, H / 2] (element type) and the pair layout."""

    cos: Any
    sin: Any
    interleaved: bool = False


@dataclass(frozen=True)
class NewTokens:
    """The new tokens: `query` [B, S, N * H] and `key`, `value` [B, S, Nk * H], or `packed`
    [B, S, (N + 2 Nk) * H] (query, key and value None); past_seq_lens int32 [B]."""

    batch: int
    seq: int
    heads: int
    kv_heads: int
    head_size: int
    past_seq_lens: Any
    query: Any = None
    key: Any = None
    value: Any = None
    packed: Any = None

    def source(self, part: str) -> tuple[Any, int, int]:
        """Return (array, base, token stride) of part 'q', 'k' or 'v', in elements."""
        q_width, kv_width = self.heads * self.head_size, self.kv_heads * self.head_size
        if self.packed is None:
            array = {"q": self.query, "k": self.key, "v": self.value}[part]
            return array, 0, q_width if part == "q" else kv_width
        base = {"q": 0, "k": q_width, "v": q_width + kv_width}[part]
        return self.packed, base, q_width + 2 * kv_width


def _enqueue_rotate(t: NewTokens, part: str, heads: int, dst: Any, strides: tuple[int, int, int],
                    dst_rows: Any, rotary: Rotary | None) -> None:
    src, base, token = t.source(part)
    cos, sin = (None, None) if rotary is None else (rotary.cos, rotary.sin)
    blocks, threads = stride_launch(t.batch * t.seq * heads * t.head_size)
    unpack_rotate[blocks, threads](src, base, token, dst, 0, *strides, dst_rows, t.past_seq_lens, cos, sin,
                                   rotary is not None and rotary.interleaved, t.batch, t.seq, heads, t.head_size)


def unpack_query(q_scratch: Any, tokens: NewTokens, rotary: Rotary | None = None) -> Launch:
    """Return UnpackRoPEAppend (Q): every element of the Q scratch [B, S, N, H] (the first
    B * S * N * H elements of `qkv_preprocess`), Q unpacked and, with `rotary`, rotated."""
    t = tokens
    if rotary is not None and t.head_size % 2:
        raise ValueError(f"rotary embedding needs an even head size: H={t.head_size}")
    strides = (t.seq * t.heads * t.head_size, t.heads * t.head_size, t.head_size)
    return Launch("UnpackRoPEAppend (Q)", partial(_enqueue_rotate, t, "q", t.heads, q_scratch, strides, None, rotary))


def append_key_value(present_k: Any, present_v: Any, capacity: int, tokens: NewTokens, append_at: Any,
                     rotary: Rotary | None = None) -> Launch:
    """Return UnpackRoPEAppend (K, V): the new K rows (rotated with `rotary`) and V rows of token
    (b, s) into rows append_at[b] + s (int32 [B]: past_seq_lens, or cache_past_seq_lens of a
    windowed cache) of the BNSH caches [B, Nk, capacity, H]; nothing else of them. The caller keeps
    append_at[b] + S <= capacity."""
    t = tokens
    strides = (t.kv_heads * capacity * t.head_size, t.head_size, capacity * t.head_size)

    def enqueue() -> None:
        _enqueue_rotate(t, "k", t.kv_heads, present_k, strides, append_at, rotary)
        _enqueue_rotate(t, "v", t.kv_heads, present_v, strides, append_at, None)

    return Launch("UnpackRoPEAppend (K, V)", enqueue)
