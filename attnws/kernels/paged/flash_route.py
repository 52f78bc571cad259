"""PagedAttention's Flash route over an fp16 cache (ORT 1.31.1's paged varlen Flash,
`mha_varlen_fwd` with the block table; `docs/research/paged-workspace.md` §3.2 and §4.1): the
split-KV forward reading K / V through the block table, then, with splits > 1, the backends'
combine (`backends.flash_split`, unpadded LSE).

- `paged_flash_splitkv`: grid (ceil(S / 64), s, B * N), one query row per thread (64 per block).
  New token i < n_b of sequence b (row cu_q[b] + i of Q [T, N, H]) sits at position
  q = L_b - n_b + i among the L_b = cu_kv[b + 1] - cu_kv[b] keys of KV head n // (N / Nk) and sees
  keys j <= q. Split sigma takes the key blocks [sigma P, (sigma + 1) P), P =
  ceil(ceil(Kx / block_n) / s) * block_n keys (Kx the key length the kernel sizes with, block_n
  the split heuristic's key block), below L_b. The K and V tiles are loaded through the table:
  position j is slot j mod bs of block block_table[b, j // bs]. Online softmax (m_i, l_i, acc).
  With one split it writes the output row acc / l_i and `softmax_lse` [N, T] (unpadded, varlen:
  m_i + log l_i at n T + t). With s > 1 (only T == B, one token per sequence: the recipe's gate)
  it writes per split the partial row acc / l_i (0 without a key) into `out_accum`
  [s, B, N, round32(H)] (columns H .. round32(H) unwritten) and its LSE (-inf without a key) into
  `softmax_lse_accum` [s, B, N];
- the combine (`flash_split.launch_combine`, unpadded_lse): `softmax_lse` [N, T] and the output,
  its out_accum rows read with kHeadDim = d_rounded = round32(H) (the row stride of the paged
  statement).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda, float32

from ...spec.backends.flash import split_block_n
from ...spec.domain import CONCRETE
from ...spec.errors import InvalidArgument
from ...spec.limits import FLASH_MAX_HEAD_SIZE
from ...spec.paged.footprint import FLASH_ROW_ROUNDING
from ...spec.paged.problem import PagedProblem
from ...spec.paged.recipe import PagedRecipe, sizing
from ...spec.problem import Backend
from ..backends import flash_split
from ..backends.online_softmax import key_step, load_row, store_row
from ..launching import Launch
from ..plans import ceil_div, softmax_scale
from ..workspace import Workspace
from .layouts import Prepared
from .paging import slot_offset

ROWS = 64  # query rows per block, one per thread (kBlockM); limit 1024 (CUDA block size)
# Keys per shared-memory K and V tile: 2 * 16 * FLASH_MAX_HEAD_SIZE * 4 B = 32 KiB; limit 48 KiB (static shared
# memory per block).
KEYS = 16
COMBINE_ROWS = 16  # rows per combine block (flash_split.COMBINE_MAX_ROWS); the unpadded LSE bounds its writes
SOFTMAX_LSE, LSE_ACCUM, OUT_ACCUM = "softmax_lse", "softmax_lse_accum", "out_accum"


@cuda.jit(device=True)
def load_paged_tile(tile, cache, block_table, b, first_key, keys, block_size, max_blocks, kv_heads, kv_head,
                    head_size):
    """tile[j, h] = the cache's element h of position first_key + j of sequence b, for j < keys; block-wide."""
    for e in range(cuda.threadIdx.x, keys * head_size, cuda.blockDim.x):
        j = e // head_size
        at = slot_offset(block_table, b, first_key + j, block_size, max_blocks, kv_heads, kv_head, head_size)
        tile[j, e - j * head_size] = float32(cache[at + e - j * head_size])


@cuda.jit
def paged_flash_splitkv(q, key_cache, value_cache, block_table, cu_q, cu_kv, out, lse, out_accum, lse_accum, batch,
                        tokens, heads, kv_heads, block_size, max_blocks, head_size, split_keys, scale, row_stride):
    """One query row per thread over split blockIdx.y's keys; see the module docstring.
    `out_accum` and `lse_accum` are None with one split (then `out` and `lse` are written)."""
    k_tile = cuda.shared.array((KEYS, FLASH_MAX_HEAD_SIZE), float32)
    v_tile = cuda.shared.array((KEYS, FLASH_MAX_HEAD_SIZE), float32)
    q_row = cuda.local.array(FLASH_MAX_HEAD_SIZE, float32)
    acc = cuda.local.array(FLASH_MAX_HEAD_SIZE, float32)
    split = cuda.blockIdx.y
    b = cuda.blockIdx.z // heads
    n = cuda.blockIdx.z - b * heads
    first = cu_q[b]
    length = cu_q[b + 1] - first
    i = cuda.blockIdx.x * ROWS + cuda.threadIdx.x
    active = i < length
    keys = cu_kv[b + 1] - cu_kv[b]
    seen_end = min(keys, keys - length + i + 1)
    kv_head = n // (heads // kv_heads)
    m_i = float32(-math.inf)
    l_i = float32(0.0)
    if active:
        load_row(q_row, q, ((first + i) * heads + n) * head_size, head_size, scale)
        for h in range(head_size):
            acc[h] = 0.0
    split_end = min(keys, (split + 1) * split_keys)
    for key0 in range(split * split_keys, split_end, KEYS):
        count = min(KEYS, split_end - key0)
        load_paged_tile(k_tile, key_cache, block_table, b, key0, count, block_size, max_blocks, kv_heads, kv_head,
                        head_size)
        load_paged_tile(v_tile, value_cache, block_table, b, key0, count, block_size, max_blocks, kv_heads, kv_head,
                        head_size)
        cuda.syncthreads()  # waits for the K and V tiles
        if active:
            for j in range(min(seen_end - key0, count)):
                m_i, l_i, weight = key_step(acc, head_size, m_i, l_i,
                                            flash_split.capped_score(q_row, k_tile, j, head_size, 0.0))
                for h in range(head_size):
                    acc[h] += weight * v_tile[j, h]
        cuda.syncthreads()  # waits until every row has read the tiles before the next load overwrites them
    if not active:
        return
    if out_accum is None:
        store_row(out, ((first + i) * heads + n) * head_size, acc, 0, head_size, l_i)
        lse[n * tokens + first + i] = math.inf if l_i == 0 else m_i + math.log(l_i)
    else:
        slab = (split * batch + b) * heads + n  # one query row per sequence (T == B)
        store_row(out_accum, slab * row_stride, acc, 0, head_size, l_i)
        lse_accum[slab] = -math.inf if l_i == 0 else m_i + math.log(l_i)


@dataclass(frozen=True)
class PagedFlashPlan:
    """The prepared step, the LSE [N, T], the accumulators (None with one split), B, T, S (the
    longest sequence's new tokens), N, H, the split count, the keys per split and the out_accum row
    stride round32(H) (floats)."""

    prepared: Prepared
    lse: Any
    out_accum: Any
    lse_accum: Any
    batch: int
    tokens: int
    seq: int
    heads: int
    head_size: int
    splits: int
    split_keys: int
    row_stride: int


def check_paged_plan(plan: PagedFlashPlan) -> None:
    """Raise InvalidArgument unless the forward can run the plan (host-side, before any launch)."""
    problems = [
        (plan.head_size <= FLASH_MAX_HEAD_SIZE, f"head_size={plan.head_size} must be at most {FLASH_MAX_HEAD_SIZE}"),
        ((plan.out_accum is None) == (plan.splits == 1), "accumulators are given exactly when splits > 1"),
        (plan.splits == 1 or plan.seq == 1, f"splits={plan.splits} need one query row per sequence: S={plan.seq}"),
    ]
    for ok, message in problems:
        if not ok:
            raise InvalidArgument(message)


def launch_forward(plan: PagedFlashPlan) -> None:
    """Enqueue the paged split-KV forward (grid (ceil(S / 64), s, B * N))."""
    check_paged_plan(plan)
    p, c = plan.prepared, plan.prepared.cache
    grid = (ceil_div(plan.seq, ROWS), plan.splits, plan.batch * plan.heads)
    paged_flash_splitkv[grid, min(ROWS, plan.seq)](
        p.query, c.key, c.value, c.block_table, p.cu_q, p.cu_kv, p.output, plan.lse, plan.out_accum, plan.lse_accum,
        plan.batch, plan.tokens, plan.heads, c.kv_heads, c.block_size, c.max_blocks, plan.head_size, plan.split_keys,
        softmax_scale(plan.head_size), plan.row_stride)


def combine_plan(plan: PagedFlashPlan) -> flash_split.SplitKvPlan:
    """Return the backends' combine over the accumulators: B rows of one query each, unpadded LSE."""
    p, c = plan.prepared, plan.prepared.cache
    return flash_split.SplitKvPlan(
        p.query, c.key, c.value, p.cu_kv, p.output, plan.lse, plan.out_accum, plan.lse_accum, plan.batch, 1,
        plan.heads, c.kv_heads, plan.head_size, plan.split_keys * plan.splits, plan.splits, plan.split_keys, True, -1,
        0.0, softmax_scale(plan.head_size), plan.row_stride, plan.row_stride, COMBINE_ROWS, unpadded_lse=True)


def split_keys(p: PagedProblem, splits: int) -> int:
    """Return P: whole key blocks of the sized key length Kx per split (module docstring)."""
    _, kx, _ = sizing(CONCRETE, p, Backend.FLASH)
    block = split_block_n(CONCRETE, p.head_size)
    return ceil_div(ceil_div(kx, block), splits) * block


def plan(p: PagedProblem, recipe: PagedRecipe, prepared: Prepared, ws: Workspace) -> PagedFlashPlan:
    """Return the route's plan over the carved requests at the recipe's split count."""
    splits = int(recipe.splits)
    arrays = ws.arrays
    return PagedFlashPlan(prepared, arrays[SOFTMAX_LSE], arrays.get(OUT_ACCUM), arrays.get(LSE_ACCUM), p.batch_size,
                          p.token_count, p.max_query_len, p.num_heads, p.head_size, splits, split_keys(p, splits),
                          ceil_div(p.head_size, FLASH_ROW_ROUNDING) * FLASH_ROW_ROUNDING)


def launch_sequence(p: PagedProblem, recipe: PagedRecipe, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's kernels in order: the forward, then with splits > 1 the combine."""
    kernels = plan(p, recipe, prepared, ws)
    forward = Launch("flash_fwd_splitkv (paged)", partial(launch_forward, kernels))
    if kernels.splits == 1:
        return (forward,)
    return forward, Launch("flash_fwd_splitkv_combine", partial(flash_split.launch_combine, combine_plan(kernels)))
