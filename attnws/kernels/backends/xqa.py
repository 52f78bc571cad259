"""Kernel: XQA's decode attention with its multi-block mode (TensorRT-LLM's `kernel_mha` as ORT 1.31.1
ships it in `contrib_ops/cuda/bert/xqa/`; `docs/research/gqa-footprint.md` §5), on the scratch the
launch carves from the workspace. The tile stride, the record layout, the wrapping semaphore, the
normalized partial rows and the in-kernel merge are read in `xqa/mha_impl.cuh` (`kernel_mha_impl`'s
multi-block epilogue, at 9adf238ebb270529666891a110443669e01e742a: docs/ort-version.md), stated
here in our words.

One new token per sequence. Query [B, 1, N, H], cache K and V [B, Nk, C, H] (BNSH, capacity C),
output [B, 1, N, H], all fp16 and flat; key_lengths int32 [B] (L_b, the new token included). A
sequence is one (b, KV head k); its G = N / Nk query heads n = k G + g share one CTA, one thread per
query head. The sequence's keys are cut into CTA tiles of CTA_KEYS = 256 (ctaTile.x); the grid
(P, Nk, B) runs P subsequences per sequence, P = min(max(1, SMs // (B Nk)), ceil(C / 256)), and
subsequence i takes the tiles i, i + P, i + 2P, ... below ceil(L_b / 256) (a subsequence past
them attends no key). With a sliding window of W keys (window > 0) and L_b > W, the first
floor((L_b - W) / 256) tiles are skipped (subsequence i starts at that tile plus i) and the keys
before L_b - W are masked. Scores x_j = scale * q . k_j; causal decode sees every key below L_b.

The workspace from the semaphores' first byte (bytes; n = B Nk P subsequences, buffer
idx = (b Nk + k) P + i):
- semaphores: uint32 [B Nk] at 0 (zeroed before the kernel: ORT's cudaMemsetAsync of 4 B Nk bytes);
- row max records at base = align128(4 B Nk), row sum records at base + 128 n: one 128-byte
  record of 32 float32 per subsequence (SMemWarpRowMax, float [1][8][4]), query row r at float
  (r mod 8) * 4 + (r div 8) mod 4; all 32 floats are written, rows G..31 as (max -inf, sum 0)
  (ORT writes its padding rows with unspecified values);
- partial outputs at base + roundUp(256 n, 2 G H): 2 G H bytes per subsequence, fp16
  [H / 64 column chunks][G rows][64], each row the subsequence's own softmax output acc / l
  (0 when it attended no key). ORT keeps its shared-memory grain swizzle inside each 128-byte row;
  the rows are the same bytes here, unswizzled.
Only with P > 1; with P = 1 the CTA writes its output row and nothing of the scratch.

Multi-block epilogue: each CTA writes its records and partial rows, fences, and one thread
increments the sequence's semaphore with a wrapping atomic increment (atom.inc, limit P - 1): the
CTA that finds P - 1 is the last, and its increment brings the semaphore back to 0, so the
semaphores need no reset for the next launch. The last CTA merges the P subsequences in the same
kernel (no separate reduction kernel): M = max_i m_i, w_i = l_i exp(m_i - M), output row
sum_i w_i O_i / sum_i w_i. Only the merging CTA writes the output rows here; in ORT every CTA
copies its tile to the output rows after its increment (the last its merged tile), with nothing
ordering a non-last CTA's copy before the merged one (output bytes, not workspace).
Supported: fp16, causal decode, an optional sliding window; no head sink, softcap or quantized
cache. Float32 arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32, int32, uint32

from ...spec.errors import InvalidArgument
from ..plans import ceil_div
from .online_softmax import attend

CTA_KEYS = 256  # keys per CTA tile (ctaTile.x = 64 * 4), ORT's value; the keys stream through `attend`'s tiles
HEAD_MAX = 256  # largest XQA head size (64, 128, 256)
# Local accumulators per thread, 2 * HEAD_MAX float32 (a literal: a CUDA local array's size must be
# a compile-time constant, which an expression is not to Numba).
ACC_LENGTH = 512
CHUNK = 64  # columns per partial-output chunk (warpTile.x); the head size is a multiple of it
# Query rows one 128-byte row max / sum record holds (8 quads x 4); also the threads per block (one per
# query head of the group); limit G <= 32 (XQA's largest group).
RECORD_ROWS = 32
RECORD_BYTES = 4 * RECORD_ROWS
SCRATCH_ALIGNMENT = 128  # the scratch base after the semaphores
SEMAPHORE_BYTES = 4  # uint32 per sequence


@dataclass(frozen=True)
class XqaScratch:
    """The workspace bytes the launch carves, from the semaphores' first byte: `semaphores` bytes
    of uint32, the row max records at `row_max`, the row sums at `row_sum`, the partial outputs at
    `partials`, `end` the first byte past them (`partials`, `end` equal `row_max` with one
    subsequence per sequence: the scratch is not used)."""

    semaphores: int
    row_max: int
    row_sum: int
    partials: int
    end: int

    @property
    def records_end(self) -> int:
        """Return the first byte past the row sum records."""
        return 2 * self.row_sum - self.row_max


def subsequences_per_sequence(sm_count: int, sequences: int, capacity: int) -> int:
    """Return P = min(max(1, SMs // sequences), ceil(C / CTA_KEYS)), the subsequences per
    (batch, KV head) sequence (computeNbSubSeqPerSeqMHA, without the XQA_NB_SUB_SEQ override)."""
    return min(max(1, sm_count // sequences), ceil_div(capacity, CTA_KEYS))


def scratch_layout(sequences: int, per_sequence: int, group: int, head_size: int) -> XqaScratch:
    """Return the semaphores and the multi-block scratch (bytes from the semaphores' first byte)
    for `sequences` = B * Nk sequences of `per_sequence` subsequences, G = `group`, H = `head_size`."""
    semaphores = SEMAPHORE_BYTES * sequences
    base = ceil_div(semaphores, SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT
    if per_sequence == 1:
        return XqaScratch(semaphores, base, base, base, base)
    n = sequences * per_sequence
    partial = 2 * group * head_size
    partials = base + ceil_div(2 * RECORD_BYTES * n, partial) * partial
    return XqaScratch(semaphores, base, base + RECORD_BYTES * n, partials, partials + partial * n)


@cuda.jit(device=True)
def record_index(record, row):
    """Return the float index of query row `row` in 32-float record `record` (row maxes are records
    0 .. n - 1, row sums n .. 2n - 1, from the row max base)."""
    return record * RECORD_ROWS + (row % 8) * 4 + (row // 8) % 4


@cuda.jit(device=True)
def partial_index(buf, row, h, group, head_size):
    """Return the fp16 index of column h of query row `row` in subsequence `buf`'s partial output."""
    return ((buf * (head_size // CHUNK) + h // CHUNK) * group + row) * CHUNK + h % CHUNK


@cuda.jit
def xqa_decode(q, k, v, key_lengths, out, semaphores, records, partials, heads, kv_heads, capacity, head_size,
               window, scale):
    """Block (i, k, b): subsequence i of sequence (b, k), thread g: query head k G + g; see the
    module docstring. `records` (float32, from the row max base) and `partials` (fp16, from the
    partial outputs) are None with one subsequence per sequence."""
    acc = cuda.local.array(ACC_LENGTH, float32)  # [0, H): the subsequence's; [HEAD_MAX, +H): one tile's
    is_last = cuda.shared.array(1, int32)
    per = cuda.gridDim.x
    sub = cuda.blockIdx.x
    kv = cuda.blockIdx.y
    b = cuda.blockIdx.z
    group = heads // kv_heads
    g = cuda.threadIdx.x
    n = kv * group + g
    length = key_lengths[b]
    skip = length - window if 0 < window < length else 0
    kv_head = (b * kv_heads + kv) * capacity * head_size
    q_start = (b * heads + n) * head_size
    for h in range(head_size):
        acc[h] = 0.0
    m_i = float32(-math.inf)
    l_i = float32(0.0)
    for tile in range(skip // CTA_KEYS + sub, (length + CTA_KEYS - 1) // CTA_KEYS, per):
        first = max(tile * CTA_KEYS, skip)
        keys = min((tile + 1) * CTA_KEYS, length) - first
        m_t, l_t = attend(q, q_start, scale, k, kv_head, head_size, v, kv_head, head_size, first, keys, head_size,
                          head_size, True, keys, None, 0, acc, HEAD_MAX)
        m_new = max(m_i, m_t)
        alpha = math.exp(m_i - m_new)
        beta = math.exp(m_t - m_new)
        for h in range(head_size):
            acc[h] = acc[h] * alpha + acc[HEAD_MAX + h] * beta
        l_i = l_i * alpha + l_t * beta
        m_i = m_new
    if l_i > 0:
        for h in range(head_size):
            acc[h] /= l_i
    if records is None:
        for h in range(head_size):
            out[q_start + h] = acc[h]
        return
    sequence = b * kv_heads + kv
    buf = sequence * per + sub
    n_all = cuda.gridDim.z * kv_heads * per
    records[record_index(buf, g)] = m_i
    records[record_index(n_all + buf, g)] = l_i
    if g == 0:
        for row in range(group, RECORD_ROWS):
            records[record_index(buf, row)] = -math.inf
            records[record_index(n_all + buf, row)] = 0.0
    for h in range(head_size):
        partials[partial_index(buf, g, h, group, head_size)] = acc[h]
    cuda.threadfence()
    cuda.syncthreads()  # waits until every row's records and partials are written and fenced
    if g == 0:
        is_last[0] = cuda.atomic.inc(semaphores, sequence, uint32(per - 1)) == per - 1
    cuda.syncthreads()  # waits for the semaphore's verdict
    if is_last[0] == 0:
        return
    cuda.threadfence()
    merge_rows(records, partials, out, sequence * per, per, n_all, group, g, q_start, head_size)


@cuda.jit(device=True)
def merge_rows(records, partials, out, first_buf, per, n_all, group, g, out_start, head_size):
    """Write output row g of a sequence, out[out_start + h], as the merge of its `per` subsequences'
    partial rows (buffers first_buf .., records of n_all subsequences); see the module docstring."""
    top = float32(-math.inf)
    for i in range(per):
        top = max(top, records[record_index(first_buf + i, g)])
    for h in range(head_size):
        total = float32(0.0)
        weights = float32(0.0)
        for i in range(per):
            buf = first_buf + i
            w = records[record_index(n_all + buf, g)] * math.exp(records[record_index(buf, g)] - top)
            weights += w
            total += w * float32(partials[partial_index(buf, g, h, group, head_size)])
        out[out_start + h] = total / weights


@dataclass(frozen=True)
class XqaPlan:
    """Query [B, 1, N, H], cache K and V [B, Nk, C, H], output [B, 1, N, H] (fp16, flat), int32 key
    lengths [B]; the uint32 semaphores [B Nk]; the float32 records and fp16 partials from their
    scratch offsets (None with one subsequence per sequence); P = `per_sequence`; the sliding
    window in keys (0: none) and the softmax scale."""

    q: Any
    k: Any
    v: Any
    key_lengths: Any
    out: Any
    semaphores: Any
    records: Any
    partials: Any
    batch: int
    heads: int
    kv_heads: int
    head_size: int
    capacity: int
    per_sequence: int
    window: int
    scale: float


def check_xqa_plan(plan: XqaPlan) -> None:
    """Raise InvalidArgument unless the kernel can run the plan (host-side, before any launch)."""
    group = plan.heads // plan.kv_heads
    problems = [
        (plan.head_size % CHUNK == 0 and plan.head_size <= HEAD_MAX,
         f"head_size={plan.head_size} must be a multiple of {CHUNK} up to {HEAD_MAX}"),
        (plan.heads % plan.kv_heads == 0 and group <= RECORD_ROWS,
         f"heads={plan.heads} must be kv_heads={plan.kv_heads} times a group of at most {RECORD_ROWS}"),
        (plan.per_sequence >= 1, f"per_sequence={plan.per_sequence} must be positive"),
        ((plan.records is None) == (plan.per_sequence == 1), "the scratch is given exactly when per_sequence > 1"),
        (plan.window >= 0, f"window={plan.window} must be 0 (none) or positive"),
    ]
    for ok, message in problems:
        if not ok:
            raise InvalidArgument(message)


def launch_xqa(plan: XqaPlan) -> None:
    """Enqueue the kernel: grid (P, Nk, B), G threads per block."""
    check_xqa_plan(plan)
    kernel = xqa_decode[(plan.per_sequence, plan.kv_heads, plan.batch), plan.heads // plan.kv_heads]
    kernel(plan.q, plan.k, plan.v, plan.key_lengths, plan.out, plan.semaphores, plan.records, plan.partials,
           plan.heads, plan.kv_heads, plan.capacity, plan.head_size, plan.window, plan.scale)
