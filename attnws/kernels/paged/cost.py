"""What validating a PagedAttention route costs (the hooks `attnws.kernels.budget` calls): each
stage's simulator seconds, the input elements, and the float64 reference's host bytes.

Per stage, with L the longest key length (every sequence's, `inputs`), C = M * bs the table's
capacity, s the split count:
- `GetCumulativeSeqlensKV`: B + 1 sums of up to B terms; the prologue runs nothing, or with rotary
  rotates T (N + Nk) H elements (grid-stride, each finding its sequence among B);
- the attention stage: ReshapeAndCache moves 2 T Nk H elements; then
  - decode: PagedDecodeSplitKV's N T s one-thread blocks score their keys (T N L keys in all) and
    write s T N (H + 2) floats, PagedDecodeReduce reads them back;
  - MEA: the gather walks 2 B C N H elements (grid-stride, both caches); cutlass fmha's
    ceil(S / 64) N B blocks of min(64, S) threads walk L keys in tiles of 4 (`cost_model`);
  - Flash: the forward's ceil(S / 64) s B N blocks walk their split's keys (L / s) in tiles, each
    thread scoring its row, and the combine reads s rows per output row.
The per-item seconds were measured with the CUDA simulator on the tests' shapes (2-core machine,
H 16 to 136, L 20 to 520) and rounded up.
"""

from __future__ import annotations

from ...spec.paged.problem import PagedProblem
from ...spec.problem import Backend
from ...spec.statement import Footprint
from ..cost_model import STAGE_SECONDS, stride_seconds, tile_rows, tile_seconds
from ..plans import ceil_div

COPY_SECONDS = 5e-6  # one element moved by a grid-stride copy (ReshapeAndCache, the gather), besides its loop
KEY_HEAD_SECONDS = 4e-6  # one key of one query row, per head element (its score and its value)
KEY_SECONDS = 2e-5  # one key of one query row, besides its head elements (the block table, the online softmax)
FLASH_BLOCK_KEY_SECONDS = 1.7e-3  # one Flash block through one key (its tile loads and barriers), besides its rows
FLASH_THREAD_KEY_SECONDS = 5e-5  # one thread of a Flash block at one key's barriers (limit: 64 threads)
TILE_KEYS = 4  # online_softmax.BLOCK_N: keys per shared-memory tile of the MEA kernel
FLASH_ROWS = 64  # flash_route.ROWS: query rows per forward block


def splits_of(fp: Footprint, name: str, rows: int) -> int:
    """Return the split count a split buffer's elements give (rows per split: `rows`), 1 without it."""
    try:
        elements = fp.buffer(name).elements
    except KeyError:
        return 1
    return max(1, elements // max(rows, 1))


def attention_seconds(p: PagedProblem, fp: Footprint) -> float:
    """Return the seconds of the attention stage's kernels after ReshapeAndCache (module docstring)."""
    b, t, s, n, h, keys = p.batch_size, p.token_count, p.max_query_len, p.num_heads, p.head_size, p.max_kv_len
    scoring = t * n * keys * (KEY_SECONDS + h * KEY_HEAD_SECONDS)
    if fp.backend is Backend.PAGED_DECODE:
        splits = splits_of(fp, "decode_partial_max", t * n)
        return scoring + n * t * splits * (KEY_SECONDS * 10 + 3 * h * COPY_SECONDS)
    if fp.backend is Backend.MEA:
        capacity = p.max_blocks_per_sequence * p.block_size
        gather = stride_seconds(2 * b * capacity * n * h, 1)
        threads = tile_rows(s)
        blocks = ceil_div(s, threads) * n * b
        return gather + blocks * threads * ceil_div(keys, TILE_KEYS) * tile_seconds(h, h) + scoring
    splits = splits_of(fp, "softmax_lse_accum", b * n)
    threads = min(FLASH_ROWS, s)
    blocks = ceil_div(s, FLASH_ROWS) * splits * b * n
    per_split = ceil_div(keys, splits)
    combine = t * n * splits * h * COPY_SECONDS if splits > 1 else 0.0
    return blocks * per_split * (FLASH_BLOCK_KEY_SECONDS + threads * FLASH_THREAD_KEY_SECONDS) + scoring + combine


def stage_seconds(p: PagedProblem, fp: Footprint, name: str) -> float:
    """Return the simulator seconds of one footprint stage (fixed cost included)."""
    if name == fp.stages[0].name:
        return STAGE_SECONDS + stride_seconds(p.batch_size + 1, p.batch_size)
    if name == fp.stages[1].name and p.do_rotary:
        return STAGE_SECONDS + stride_seconds(p.token_count * (p.num_heads + p.kv_num_heads) * p.head_size,
                                              p.batch_size)
    if name == fp.stages[-1].name:
        cache = stride_seconds(2 * p.token_count * p.kv_num_heads * p.head_size, 1)
        return STAGE_SECONDS + cache + attention_seconds(p, fp)
    return STAGE_SECONDS


def input_elements(p: PagedProblem) -> int:
    """Return the element count of the operator's inputs (query, key, value, both caches, the lengths,
    the block table, and with rotary the cos / sin caches [M * bs, H / 2])."""
    b, t, n, nk, h = p.batch_size, p.token_count, p.num_heads, p.kv_num_heads, p.head_size
    cache = p.num_blocks * p.block_size * nk * h
    rotary = p.max_blocks_per_sequence * p.block_size * h if p.do_rotary else 0
    return t * (n + 2 * nk) * h + 2 * cache + (b + 1) + b + b * p.max_blocks_per_sequence + rotary


def reference_bytes(p: PagedProblem) -> int:
    """Return the host bytes of the float64 reference and the present cache's check: the inputs
    twice over (and the caches twice more), one sequence's keys and values repeated over the N
    heads, the output and the LSE."""
    n, h = p.num_heads, p.head_size
    cache = p.num_blocks * p.block_size * p.kv_num_heads * h
    return 8 * (2 * input_elements(p) + 2 * cache + 2 * n * p.max_kv_len * h + p.token_count * n * (h + 1))
