"""Kernels: Flash's split-KV forward over a BNSH key/value cache, and the combine of its splits
(FlashAttention-2's `flash_fwd_splitkv_kernel` and `flash_fwd_splitkv_combine_kernel` as ORT 1.31.1's
`mha_fwd_kvcache` launches them; `docs/research/gqa-footprint.md` §1).

Query [B, S, N, H]; cache K and V [B, Nk, C, H] (C rows of capacity), query head n reading KV head
n // (N / Nk). Query row s of batch entry b sits at key position q = L_b - S + s among its
L_b = key_lengths[b] keys; it sees key j < L_b when j <= q (causal) and j >= q - window_left
(window_left >= 0; -1: no window). Its score is x_j = scale * q . k_j, through
softcap * tanh(x_j / softcap) when softcap > 0. Online softmax, one key at a time: m_new =
max(m_i, x_j), alpha = exp(m_i - m_new), l_i = l_i * alpha + exp(x_j - m_new), acc = acc * alpha +
exp(x_j - m_new) v_j, m_i = m_new.

Split sigma of `splits` takes the keys of the key blocks [sigma P, (sigma + 1) P), P =
ceil(ceil(C / block_n) / splits), below L_b (a split past L_b has no key). Grid (ceil(S / 64),
splits, B * N), one query row per thread (at one split ORT's grid is (ceil(S / 64), B, N): the
same blocks, ordered otherwise). With one split the kernel writes the output row
acc / l_i and the LSE [B, N, S] (m_i + log l_i; +inf for a row with no key). With splits > 1 it
writes, per split, the partial row acc / l_i (0 without a key) and the LSE (-inf without a key):
- out_accum element (sigma, b, n, s, c), c < H: slab ((sigma B + b) N + n) S rows of `row_stride`
  (d_rounded) floats, row s in 64-row tiles: 64 floor(s / 64) row_stride + (s mod 64) tile_stride
  (kHeadDim) + c. Columns H .. row_stride stay unwritten.
- lse_accum [splits, B, N, S] float32.
The combine runs ceil(B N S / R) blocks of R rows (kBlockM of the combine: 4, 8 or 16): flat row
g = (b N + n) S + s, lse = log sum_sigma exp(lse_sigma) (+inf when the sum is 0 or NaN), written for
every row of the block, those past B N S too, as ORT does through `mha_fwd_kvcache`; with
`unpadded_lse` (the varlen API, `mha_varlen_fwd`: params.unpadded_lse) only rows g < B N S, at
n (B S) + b S + s of the [N, B * S] LSE; the output row sum_sigma
exp(lse_sigma - lse) O_sigma (O_sigma at sigma B N S row_stride + (g - g mod R) row_stride +
(g mod R) tile_stride) for g < B N S, in the output's element type. Float32 arithmetic throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ...spec.errors import InvalidArgument
from ...spec.limits import FLASH_MAX_HEAD_SIZE
from ..plans import ceil_div
from .online_softmax import key_step, load_row, load_tile, store_row

QUERY_TILE = 64  # query rows per split-kernel block, one per thread (kBlockM); limit 1024 (CUDA block size)
# Keys per shared-memory K and V tile: 2 * 16 * FLASH_MAX_HEAD_SIZE * 4 B = 32 KiB; limit 48 KiB (static shared
# memory per block).
KEY_TILE = 16
COMBINE_MAX_ROWS = 16  # rows per combine block (its kBlockM is 4, 8 or 16); limit 1024 (CUDA block size)
# Splits the combine's shared LSE tile holds (num_splits_heuristic's cap): 128 * 16 * 4 B = 8 KiB; limit 48 KiB.
MAX_SPLITS = 128


@cuda.jit(device=True)
def capped_score(q_row, k_tile, j, head_size, softcap):
    """Return q_row . k_tile[j] (the scale is in q_row), through softcap * tanh(x / softcap) when softcap > 0."""
    x = float32(0.0)
    for h in range(head_size):
        x += q_row[h] * k_tile[j, h]
    if softcap > 0:
        x = softcap * math.tanh(x / softcap)
    return x


@cuda.jit
def flash_fwd_splitkv(q, k, v, key_lengths, out, lse, out_accum, lse_accum, heads, kv_heads, capacity, seq,
                      head_size, split_keys, causal, window_left, softcap, scale, tile_stride, row_stride):
    """One query row (b, s, n) per thread over split blockIdx.y's keys; see the module docstring.
    `out_accum` and `lse_accum` are None with one split (then `out` and `lse` are written)."""
    k_tile = cuda.shared.array((KEY_TILE, FLASH_MAX_HEAD_SIZE), float32)
    v_tile = cuda.shared.array((KEY_TILE, FLASH_MAX_HEAD_SIZE), float32)
    q_row = cuda.local.array(FLASH_MAX_HEAD_SIZE, float32)
    acc = cuda.local.array(FLASH_MAX_HEAD_SIZE, float32)
    split = cuda.blockIdx.y
    b = cuda.blockIdx.z // heads
    n = cuda.blockIdx.z - b * heads
    s = cuda.blockIdx.x * QUERY_TILE + cuda.threadIdx.x
    active = s < seq
    length = key_lengths[b]
    position = length - seq + s
    seen_end = min(length, position + 1) if causal else length
    seen_start = max(0, position - window_left) if window_left >= 0 else 0
    kv_head = (b * kv_heads + n // (heads // kv_heads)) * capacity * head_size
    m_i = float32(-math.inf)
    l_i = float32(0.0)
    if active:
        load_row(q_row, q, ((b * seq + s) * heads + n) * head_size, head_size, scale)
        for h in range(head_size):
            acc[h] = 0.0
    split_end = min(length, (split + 1) * split_keys)
    for key0 in range(split * split_keys, split_end, KEY_TILE):
        keys = min(KEY_TILE, split_end - key0)
        load_tile(k_tile, k, kv_head, head_size, key0, keys, head_size)
        load_tile(v_tile, v, kv_head, head_size, key0, keys, head_size)
        cuda.syncthreads()  # waits for the K and V tiles
        if active:
            for j in range(max(seen_start - key0, 0), min(seen_end - key0, keys)):
                m_i, l_i, weight = key_step(acc, head_size, m_i, l_i, capped_score(q_row, k_tile, j, head_size, softcap))
                for h in range(head_size):
                    acc[h] += weight * v_tile[j, h]
        cuda.syncthreads()  # waits until every row has read the tiles before the next load overwrites them
    if not active:
        return
    if out_accum is None:
        store_row(out, ((b * seq + s) * heads + n) * head_size, acc, 0, head_size, l_i)
        lse[(b * heads + n) * seq + s] = math.inf if l_i == 0 else m_i + math.log(l_i)
    else:
        slab = (split * (cuda.gridDim.z // heads) + b) * heads + n
        tile = s - s % QUERY_TILE
        store_row(out_accum, (slab * seq + tile) * row_stride + (s - tile) * tile_stride, acc, 0, head_size, l_i)
        lse_accum[slab * seq + s] = -math.inf if l_i == 0 else m_i + math.log(l_i)


@cuda.jit
def flash_combine(out_accum, lse_accum, out, lse, rows, splits, seq, heads, head_size, tile_stride, row_stride,
                  unpadded_lse):
    """Block x combines flat rows [x R, x R + R) of the B * N * S rows, R = blockDim.x, one per
    thread; see the module docstring."""
    lse_tile = cuda.shared.array((MAX_SPLITS, COMBINE_MAX_ROWS), float32)
    per_block = cuda.blockDim.x
    tile = cuda.blockIdx.x * per_block
    r = cuda.threadIdx.x
    for e in range(r, splits * per_block, per_block):
        split = e // per_block
        i = e - split * per_block
        lse_tile[split, i] = lse_accum[split * rows + tile + i] if tile + i < rows else -math.inf
    cuda.syncthreads()  # waits for every split's LSE of the block's rows
    lse_max = float32(-math.inf)
    for split in range(splits):
        lse_max = max(lse_max, lse_tile[split, r])
    if lse_max == -math.inf:
        lse_max = 0.0
    total = float32(0.0)
    for split in range(splits):
        total += math.exp(lse_tile[split, r] - lse_max)
    lse_sum = math.inf if total == 0 or total != total else math.log(total) + lse_max
    g = tile + r
    if not unpadded_lse:
        lse[g] = lse_sum
    if g >= rows:
        return
    b = g // (heads * seq)
    n = (g // seq) % heads
    s = g % seq
    if unpadded_lse:
        lse[n * (rows // heads) + b * seq + s] = lse_sum
    row = tile * row_stride + r * tile_stride
    for h in range(head_size):
        o = float32(0.0)
        for split in range(splits):
            o += math.exp(lse_tile[split, r] - lse_sum) * out_accum[split * rows * row_stride + row + h]
        out[((b * seq + s) * heads + n) * head_size + h] = o


@dataclass(frozen=True)
class SplitKvPlan:
    """Query [B, S, N, H], cache K and V [B, Nk, C, H], int32 key lengths [B], the output
    [B, S, N, H], the LSE float32 (the combine writes whole tiles), the accumulators (None with one
    split), the split count, the key block (block_n) the splits divide, the masks (window_left: -1
    none), the softcap (0: none), the softmax scale, the out_accum strides (floats: tile_stride =
    kHeadDim within a 64-row tile, row_stride = d_rounded), the combine's rows per block, and
    whether the combine writes the LSE unpadded ([N, B * S], its rows only: the varlen API)."""

    q: Any
    k: Any
    v: Any
    key_lengths: Any
    out: Any
    lse: Any
    out_accum: Any
    lse_accum: Any
    batch: int
    seq: int
    heads: int
    kv_heads: int
    head_size: int
    capacity: int
    splits: int
    block_n: int
    causal: bool
    window_left: int
    softcap: float
    scale: float
    tile_stride: int
    row_stride: int
    combine_rows: int
    unpadded_lse: bool = False

    @property
    def split_keys(self) -> int:
        """Return the keys per split: P key blocks of block_n, P = ceil(ceil(C / block_n) / splits)."""
        return ceil_div(ceil_div(self.capacity, self.block_n), self.splits) * self.block_n


def check_plan(plan: SplitKvPlan) -> None:
    """Raise InvalidArgument unless the kernels can run the plan (host-side, before any launch)."""
    problems = [
        (plan.head_size <= FLASH_MAX_HEAD_SIZE, f"head_size={plan.head_size} must be at most {FLASH_MAX_HEAD_SIZE}"),
        (plan.heads % plan.kv_heads == 0, f"heads={plan.heads} must be a multiple of kv_heads={plan.kv_heads}"),
        (1 <= plan.splits <= MAX_SPLITS, f"splits={plan.splits} must be in 1..{MAX_SPLITS}"),
        ((plan.out_accum is None) == (plan.splits == 1), "accumulators are given exactly when splits > 1"),
        (plan.tile_stride >= plan.head_size, f"tile_stride={plan.tile_stride} must hold head_size={plan.head_size}"),
        (1 <= plan.combine_rows <= COMBINE_MAX_ROWS,
         f"combine_rows={plan.combine_rows} must be in 1..{COMBINE_MAX_ROWS}"),
    ]
    for ok, message in problems:
        if not ok:
            raise InvalidArgument(message)


def launch_split(plan: SplitKvPlan) -> None:
    """Enqueue the split-KV forward (grid (ceil(S / 64), splits, B * N))."""
    check_plan(plan)
    grid = (ceil_div(plan.seq, QUERY_TILE), plan.splits, plan.batch * plan.heads)
    flash_fwd_splitkv[grid, min(QUERY_TILE, plan.seq)](
        plan.q, plan.k, plan.v, plan.key_lengths, plan.out, plan.lse, plan.out_accum, plan.lse_accum, plan.heads,
        plan.kv_heads, plan.capacity, plan.seq, plan.head_size, plan.split_keys, plan.causal, plan.window_left,
        plan.softcap, plan.scale, plan.tile_stride, plan.row_stride)


def launch_combine(plan: SplitKvPlan) -> None:
    """Enqueue the combine of the splits (grid ceil(B N S / R), R = combine_rows)."""
    check_plan(plan)
    rows = plan.batch * plan.heads * plan.seq
    flash_combine[ceil_div(rows, plan.combine_rows), plan.combine_rows](
        plan.out_accum, plan.lse_accum, plan.out, plan.lse, rows, plan.splits, plan.seq, plan.heads, plan.head_size,
        plan.tile_stride, plan.row_stride, plan.unpadded_lse)
