"""Flash attention (`flash_attention/flash_api.cc`): where ORT runs it, the bytes of its softmax
log-sum-exp (LSE), float32 per query row and head, and its split-KV heuristic and accumulators."""

from __future__ import annotations

import functools
import math
import struct
from typing import Any

from ..limits import FLASH_MAX_HEAD_SIZE, HEAD_SIZE_MULTIPLE, LSE_ELEMENT_BYTES

# flash::is_supported (flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03): compute
# capability major >= 8 since #24584 (4adef01e7, 2025-04-28), so sm90, sm100 and sm120 run Flash.
MIN_SM_MAJOR = 8

def sm_supported(sm: int) -> bool:
    """flash::is_supported's device rule: compute capability major >= 8."""
    return sm // 10 >= MIN_SM_MAJOR


def supported(d: Any, sm: int, head_size: Any) -> Any:
    """flash::is_supported with N_kv = N: sm major >= 8, H % 8 == 0, H <= 256."""
    if not sm_supported(sm):
        return False
    return d.all_(d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0, head_size <= FLASH_MAX_HEAD_SIZE)


def any_head_supported(d: Any, sm: int, head_bound: Any) -> Any:
    """flash::is_any_supported_head_size: the sm rule holds and some multiple of 8 is <= head_bound."""
    if not sm_supported(sm):
        return False
    return head_bound >= HEAD_SIZE_MULTIPLE


def softmax_lse_bytes(d: Any, p: Any) -> Any:
    """Return 4 * B * S * N: Flash's float32 softmax log-sum-exp buffer [B, N, S], in bytes."""
    return d.mul(LSE_ELEMENT_BYTES, p.batch_size, p.sequence_length, p.num_heads, what="flash LSE 4 * B * S * N")


# ---------------------------------------------------------------------------------------------
# Split-KV (flash_api.cc num_splits_heuristic and get_num_splits_and_buffer_sizes @ 990ba5f0c;
# GQA's recipe copy #32453 reproduces them and its tests pin the double-precision threshold).
#
# The heuristic works on two integers: rows = B * heads * ceil(S / 64) (the query blocks) and
# key_blocks = ceil(T / block_n). It returns 1 when rows >= 0.8f * SMs (compared in float);
# otherwise, over the candidate split counts 1..min(128, SMs, key_blocks) that are "eligible"
# (1, or ceil(key_blocks / c) differs from ceil(key_blocks / (c - 1))), it computes the float
# wave efficiency waves / ceil(waves), waves = float(rows * c) / SMs, and returns the smallest
# eligible count whose efficiency is >= 0.85 * the best (0.85 is a double literal, so that
# comparison is in double). A larger key length can therefore pick fewer splits.
MAX_SPLITS = 128
SPLIT_BLOCK_M = 64  # kBlockM of the split-KV kernels: rows count query blocks of 64
SPLIT_FILL_FRACTION = 0.8  # the 0.8f early return: enough rows to almost fill the SMs
SPLIT_EFFICIENCY_FRACTION = 0.85  # the double 0.85 of the best efficiency
HEAD_SIZE_ROUNDING = 32  # out_accum rounds the head size up to a multiple of 32


def _f32(x: float) -> float:
    """Round a double to the nearest float32 (how the heuristic's float arithmetic rounds)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def split_block_n(d: Any, head_size: Any) -> Any:
    """Keys per split-KV block: 256 for H <= 64, 128 for H <= 128, 64 above (run_mha_fwd_splitkv)."""
    return d.ite(head_size <= 64, 256, lambda: d.ite(head_size <= 128, 128, 64))


def first_full_rows(sm_count: int) -> int:
    """The least rows for which the heuristic returns 1 at once: rows >= 0.8f * SMs in float
    (rows below 2^24 are exact floats, so this is the ceiling of the float threshold)."""
    return math.ceil(_f32(_f32(SPLIT_FILL_FRACTION) * _f32(float(sm_count))))


@functools.lru_cache(maxsize=4096)
def _efficiencies(rows: int, sm_count: int) -> tuple[float, ...]:
    """The float wave efficiency of each split count 1..min(128, SMs), eligible or not."""
    effs = []
    for splits in range(1, min(MAX_SPLITS, sm_count) + 1):
        waves = _f32(_f32(float(rows * splits)) / _f32(float(sm_count)))
        effs.append(_f32(waves / math.ceil(waves)))
    return tuple(effs)


def _eligible(d: Any, key_blocks: Any, splits: int) -> Any:
    if splits == 1:
        return True
    return d.div(key_blocks + splits - 1, splits) != d.div(key_blocks + splits - 2, splits - 1)


def _splits_for_rows(d: Any, rows: int, key_blocks: Any, sm_count: int) -> Any:
    """The heuristic for concrete rows below the early return; key_blocks may be symbolic."""
    effs = _efficiencies(rows, sm_count)
    if isinstance(key_blocks, int):
        cap = min(len(effs), key_blocks)
        eligible = [c for c in range(1, cap + 1) if _eligible(d, key_blocks, c)]
        best = max((effs[c - 1] for c in eligible), default=0.0)
        return next((c for c in eligible if effs[c - 1] >= SPLIT_EFFICIENCY_FRACTION * best), 1)
    # Symbolic key_blocks: the same loop, unrolled. available[c]: c is in the loop and eligible.
    available = {c: d.all_(key_blocks >= c, _eligible(d, key_blocks, c)) for c in range(1, len(effs) + 1)}
    levels = sorted(set(effs), reverse=True)  # the candidate best efficiencies, best first
    # best_level = the index of the best efficiency among the available counts.
    best_level: Any = len(levels) - 1
    for level in reversed(range(len(levels))):
        here = d.any_(*(available[c] for c in available if effs[c - 1] == levels[level]))
        best_level = d.ite(here, level, best_level)
    chosen: Any = 1
    for c in reversed(range(1, len(effs) + 1)):
        # eff(c) >= 0.85 * best holds from the first level whose 0.85-fraction eff(c) reaches on.
        reaches = next((lv for lv, e in enumerate(levels) if effs[c - 1] >= SPLIT_EFFICIENCY_FRACTION * e), None)
        if reaches is None:
            continue
        chosen = d.ite(d.all_(available[c], best_level >= reaches), c, chosen)
    return chosen


def split_count(d: Any, rows: Any, key_blocks: Any, sm_count: int, rows_step: int = 1) -> Any:
    """Return the split count num_splits_heuristic picks (1 when it does not split).

    rows = B * heads * ceil(S / 64) and key_blocks = ceil(T / block_n) are counts and may be
    symbolic; sm_count (the device's multiprocessor count) is concrete and positive. Symbolic
    rows are taken value by value below the early-return threshold (only multiples of
    `rows_step`, a concrete factor of rows such as the head count), so the solver sees the
    heuristic's exact float decisions.
    """
    full = first_full_rows(sm_count)
    if isinstance(rows, int):
        return 1 if rows >= full else _splits_for_rows(d, rows, key_blocks, sm_count)
    chosen: Any = 1
    for value in reversed(range(rows_step, full, rows_step)):
        chosen = d.ite(rows == value, lambda v=value: _splits_for_rows(d, v, key_blocks, sm_count), chosen)
    return chosen


def split_rows(d: Any, batch: Any, heads: Any, seq: Any) -> Any:
    """rows = B * heads * ceil(S / 64): the query blocks the heuristic compares with the SMs."""
    return d.mul(batch, heads, d.div(seq + SPLIT_BLOCK_M - 1, SPLIT_BLOCK_M), what="flash split rows B * N * ceil(S / 64)")


def key_blocks(d: Any, head_size: Any, kv_length: Any) -> Any:
    """ceil(T / block_n): the key blocks the heuristic divides among the splits."""
    block = split_block_n(d, head_size)
    return d.div(kv_length + block - 1, block)


def split_accumulator_bytes(d: Any, splits: Any, batch: Any, seq: Any, heads: Any, head_size: Any) -> tuple[Any, Any]:
    """Return (softmax_lse_accum, out_accum) bytes for a split count > 1: float32
    [splits, B, N, S] and [splits, B, N, S, round32(H)]."""
    lse = d.mul(splits, batch, seq, heads, LSE_ELEMENT_BYTES, what="flash LSE accumulator splits * B * S * N * 4")
    rounded = d.align_up(head_size, HEAD_SIZE_ROUNDING, what="flash round32(H)")
    out = d.mul(splits, batch, seq, heads, rounded, LSE_ELEMENT_BYTES,
                what="flash output accumulator splits * B * S * N * round32(H) * 4")
    return lse, out


def split_buffer_bytes(d: Any, splits: Any, batch: Any, seq: Any, heads: Any, head_size: Any) -> tuple[Any, Any]:
    """Return get_num_splits_and_buffer_sizes' (softmax_lse_accum, out_accum) bytes for a split
    count: `split_accumulator_bytes` when splits > 1, (0, 0) when the heuristic does not split."""
    def accumulators() -> tuple[Any, Any]:
        return split_accumulator_bytes(d, splits, batch, seq, heads, head_size)

    return d.ite(splits > 1, lambda: accumulators()[0], 0), d.ite(splits > 1, lambda: accumulators()[1], 0)


def split_cap(d: Any, key_blocks: Any, sm_count: int) -> Any:
    """Return max(1, min(128, SMs, key_blocks)): the largest count the heuristic's loop tries, so
    an upper bound of `split_count` (which returns 1 when the loop finds nothing)."""
    return d.max_(1, d.min_(min(MAX_SPLITS, sm_count), key_blocks))


def most_split_lse_rows(sm_count: int) -> int:
    """Return 64 * (first_full_rows(SMs) - 1): the most LSE rows B * S * N of a problem the
    heuristic splits. It splits only below first_full_rows query blocks B * N * ceil(S / 64),
    and a query block holds at most 64 of the S rows; 0 when it never splits."""
    return SPLIT_BLOCK_M * (first_full_rows(sm_count) - 1)
