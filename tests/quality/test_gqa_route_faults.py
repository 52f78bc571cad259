"""Quality: planted faults in GroupQueryAttention's XQA and MEA routes and preparation (recipe and
kernels), each caught by a deterministic check of the one validator (`attnws.kernels.validate_shape`;
kill rate 100%).

- `append-over-the-past`: UnpackRoPEAppend places the new K / V rows with a row stride one row
  short, over cache rows the step must keep (the past and present share one buffer); caught after
  the run by the present cache's check (a row outside the appended ones changed).
- `append-unrotated`: UnpackRoPEAppend appends the new K rows without rotating them; caught after
  the run by the present cache's check (the appended rows off the rotated K), and by the output.
- `xqa-one-subsequence-more`: XQA's kernel carves and runs one subsequence per sequence more than
  the recipe sized its multi-block scratch for; caught at run time, its row records and partials
  written past the footprint's scratch (stray write).
- `kv-expansion-with-kv-heads`: the recipe sizes MEA's expanded K and V for Nk heads instead of N;
  caught before any launch, Ungroup's [B, N, Ce, H] reaching past its region (outside its region;
  also overlapping expanded_value and past the workspace).
- `staging-drops-the-new-tokens`: the recipe sizes each staged cache for C rows instead of C + S;
  caught before any launch, the staged K reaching into the staged V's region (outside its region).
- `q-scratch-for-kv-heads`: the recipe sizes the Q scratch for Nk heads; caught before any launch
  (outside its region). The fault the issue names, a scratch for Q alone where K is rotated into
  it too, does not apply to ORT 1.31.1: UnpackRoPEAppend writes the rotated K straight into the
  present cache, so the footprint has no K touch in the scratch and a Q-only scratch is what the
  kernels need (`tests/kernels/test_gqa_routes.py` shows the Q-only write under MEA's Q + K).
- `compaction-halves-overlap`: CompactKvCacheRows places its V half over its K half; caught at
  run time by the incomplete write of the `compaction` scratch (its V half never written), and the
  K cache ends with V's rows (the output's distance from the reference).

Each fault's shape passes without its plant (`test_clean_twin_passes`).
"""

from __future__ import annotations

from typing import Any

import pytest

import attnws.kernels  # noqa: F401  (chooses the device before numba loads)

from attnws.kernels.gqa import layouts, xqa_route
from attnws.spec.gqa import recipe as gqa_recipe
from attnws.spec.options import ENV_DISABLE_FLASH, ENV_ENABLE_XQA, RuntimeConfig

from tests.kernels.gqa_shapes import gqa_geometry as gqa
from tests.quality.gqa_faults import GqaFault, check_caught, check_clean_twin, check_kill_rate

SUITE = "gqa route kernels"
FLASH = RuntimeConfig.make(sm=80, sm_count=16)
MEA = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_ENABLE_XQA: "0", ENV_DISABLE_FLASH: "1"})
WINDOWED = dict(window=4, sliding_window_cache=True)  # C = W = 4 rows
XQA = RuntimeConfig.make(sm=80, sm_count=8)  # B * Nk = 2 sequences: 4 subsequences each (of C / 256 = 5 tiles)


def expansion_with_kv_heads(monkeypatch: Any) -> None:
    real = gqa_recipe.expanded_kv_bytes
    monkeypatch.setattr(gqa_recipe, "expanded_kv_bytes",
                        lambda d, p, capacity: real(d, p.with_(num_heads=p.kv_num_heads), capacity))


def staging_without_new_tokens(monkeypatch: Any) -> None:
    real = gqa_recipe.staged_cache_bytes
    monkeypatch.setattr(gqa_recipe, "staged_cache_bytes",
                        lambda d, p, staged_capacity, row: real(d, p, p.present_kv_cache_capacity, row))


def q_scratch_for_kv_heads(monkeypatch: Any) -> None:
    real = gqa_recipe.qkv_preprocess_bytes
    monkeypatch.setattr(gqa_recipe, "qkv_preprocess_bytes", lambda d, p, mode, fast_decode, capacity: real(
        d, p.with_(num_heads=p.kv_num_heads), mode, fast_decode, capacity))


class KHalfTwice:
    """The compaction region as a kernel placing its V half over its K half addresses it: every
    slice is the K half (B * Nk * C * R elements)."""

    def __init__(self, region: Any, half: int) -> None:
        self.region, self.half, self.shape = region, half, region.shape

    def __getitem__(self, _: slice) -> Any:
        return self.region[:self.half]


def v_half_over_k_half(monkeypatch: Any) -> None:
    real = layouts.compact_cache

    def compact(region: Any, present_k: Any, present_v: Any, cache: Any, *lengths: Any) -> Any:
        half = cache.batch * cache.kv_heads * cache.capacity * cache.row_elements
        return real(KHalfTwice(region, half), present_k, present_v, cache, *lengths)

    monkeypatch.setattr(layouts, "compact_cache", compact)


def append_one_row_short(monkeypatch: Any) -> None:
    real = layouts.append_key_value
    monkeypatch.setattr(layouts, "append_key_value",
                        lambda present_k, present_v, capacity, *rest: real(present_k, present_v, capacity - 1, *rest))


def append_unrotated(monkeypatch: Any) -> None:
    real = layouts.append_key_value
    monkeypatch.setattr(layouts, "append_key_value",
                        lambda present_k, present_v, capacity, tokens, append_at, rotary=None:
                        real(present_k, present_v, capacity, tokens, append_at))


def xqa_one_subsequence_more(monkeypatch: Any) -> None:
    real = xqa_route.xqa_geometry
    monkeypatch.setattr(xqa_route, "xqa_geometry", lambda p, sm_count: real(p, sm_count + p.batch_size * p.kv_num_heads))


FAULTS = (
    GqaFault("append-unrotated", "the new K rows appended to the cache without their rotary embedding",
             gqa(1, 1, 4, 2, 16, 9, past=12, rotary=True), MEA, "present cache",
             "present_key of batch entry 0: appended rows off by", append_unrotated),
    GqaFault("append-over-the-past", "the new K / V rows appended with a cache row stride one row short, so "
             "they land over rows the step must preserve", gqa(2, 1, 4, 2, 8, 10, past=12), MEA, "present cache",
             "present_key of batch entry 1: a row outside the appended", append_one_row_short),
    GqaFault("xqa-one-subsequence-more", "XQA's kernel carving and running one subsequence per sequence more than "
             "the recipe sized its scratch for", gqa(1, 1, 8, 2, 64, 650, past=1100), XQA, "stray writes",
             "kernel_mha multi-block epilogue wrote", xqa_one_subsequence_more),
    GqaFault("kv-expansion-with-kv-heads", "MEA's expanded K / V sized [B, Nk, Ce, H] instead of [B, N, Ce, H]",
             gqa(1, 4, 4, 2, 8, 4, past=8), MEA, "outside regions", "expanded_key", expansion_with_kv_heads),
    GqaFault("staging-drops-the-new-tokens", "each staged cache sized for C = 4 rows instead of C + S = 12",
             gqa(1, 8, 4, 2, 8, 12, past=4, **WINDOWED), FLASH, "outside regions", "staged_key",
             staging_without_new_tokens),
    GqaFault("q-scratch-for-kv-heads", "the rotary Q scratch sized for Nk = 2 heads instead of N = 4",
             gqa(1, 8, 4, 2, 16, 8, past=12, rotary=True), FLASH, "outside regions", "qkv_preprocess",
             q_scratch_for_kv_heads),
    GqaFault("compaction-halves-overlap", "CompactKvCacheRows' V half placed over its K half",
             gqa(2, 1, 4, 2, 8, 6, past=4, **WINDOWED), FLASH, "incomplete writes", "elements of compaction",
             v_half_over_k_half),
)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # kernels reading the NaN sentinel
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_is_caught(fault, monkeypatch):
    check_caught(fault, monkeypatch, SUITE)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_clean_twin_passes(fault):
    check_clean_twin(fault)


def test_kill_rate_is_100_percent():
    check_kill_rate(SUITE, FAULTS)
