"""Hand-computed recipe tables: the fact sheet's golden values (section 6.4) and our own for
fp32, attention bias, T < B*S and the unfused int32 boundary S = 46340 / 46341."""

from __future__ import annotations

import pytest

from attnws.spec import Backend, InvalidArgument, QkvLayout, recipe, validate_recipe, CONCRETE

from .helpers import pa, pmha

# B=2, S=4, N=2, H=Hv=4, fp16: C = 2*2*4*2*(4+4+4) = 384, LSE = 4*2*4*2 = 64, R = align256(2*2*2*4*4) = 256.
FACT_SHEET_PMHA = [
    ("flash direct T=6", dict(fmt="separate", tokens=6), Backend.FLASH, 64),
    ("flash packed", dict(tokens=6), Backend.FLASH, 384 + 64),
    ("mea direct", dict(fmt="separate", tokens=6), Backend.MEA, 0),
    ("mea packed", dict(tokens=6), Backend.MEA, 384),
    ("trt direct", dict(tokens=6), Backend.TRT, 0),
    ("trt materialized (separate)", dict(fmt="separate", tokens=6), Backend.TRT, 384),
    ("unfused", dict(tokens=6), Backend.UNFUSED, 384 + 2 * 256),
]


@pytest.mark.parametrize("name,flags,backend,expected", FACT_SHEET_PMHA, ids=[r[0] for r in FACT_SHEET_PMHA])
def test_fact_sheet_pmha_attention_bytes(name, flags, backend, expected):
    assert recipe(pmha(**flags), backend).attention_workspace_bytes == expected


def test_trt_materialized_interleaved_view_uses_t_tokens():
    r = recipe(pmha(fmt="separate", tokens=6), Backend.TRT)
    assert r.qkv_layout is QkvLayout.INTERLEAVED
    assert r.interleaved_qkv_bytes == 2 * 6 * 2 * 12  # es * T * N * (2H + Hv) = 288
    assert r.qkv_capacity_bytes == 384


def test_fact_sheet_pa_unfused():
    # Q hidden 8, V hidden 4 (H = 4, Hv = 2), input hidden 6, T = 6.
    p = pa(tokens=6, v_head_size=2, input_hidden=6, qkv_hidden_sizes=(8, 8, 4))
    r = recipe(p, Backend.UNFUSED)
    assert (r.projection_m, r.projection_n, r.projection_k) == (6, 20, 6)
    assert r.projection_bytes == 2 * 6 * 20 == 240
    assert r.qkv_capacity_bytes == 2 * 2 * 4 * 2 * (4 + 4 + 2) == 320
    assert r.backend_workspace_bytes == 256
    assert r.second_scratch_offset_bytes == 320 + 256 == 576
    assert r.attention_workspace_bytes == 832


def test_fp32_unfused_and_flash_lse_independent_of_dtype():
    p = pmha(dtype=4, fmt="separate")
    r = recipe(p, Backend.UNFUSED)
    c = 4 * 2 * 4 * 2 * 12  # 768
    region = 256  # align256(4 * 2 * 2 * 4 * 4 = 256)
    assert r.attention_workspace_bytes == c + 2 * region == 1280
    # MEA in fp32 never has the accumulator, even with Hv > 128.
    wide = pmha(dtype=4, fmt="separate", heads=1, head_size=136, v_head_size=136)
    assert recipe(wide, Backend.MEA).backend_workspace_bytes == 0


def test_mea_accumulator_appears_above_hv_128_in_fp16():
    at_128 = pmha(fmt="separate", qkv_bias=True, heads=1, head_size=128, batch=1, seq=8)
    above = pmha(fmt="separate", qkv_bias=True, heads=1, head_size=136, batch=1, seq=8)
    assert recipe(at_128, Backend.MEA).backend_workspace_bytes == 0
    assert recipe(above, Backend.MEA).backend_workspace_bytes == 4 * 1 * 8 * 1 * 136
    assert recipe(above, Backend.MEA).attention_workspace_bytes == 2 * 8 * (3 * 136) + 4 * 8 * 136


def test_attention_bias_does_not_change_unfused_bytes_but_is_checked():
    plain = recipe(pmha(), Backend.UNFUSED)
    biased = recipe(pmha(attn_bias=True, attn_bias_broadcast_heads=True), Backend.UNFUSED)
    assert biased.attention_workspace_bytes == plain.attention_workspace_bytes


def test_t_less_than_bs_keeps_bs_capacity_and_t_views():
    r = recipe(pmha(tokens=5, qkv_bias=True), Backend.MEA)
    assert r.qkv_capacity_bytes == 384
    assert r.q_bytes == 2 * 5 * 2 * 4 == 80
    assert r.backend_workspace_offset_bytes == 3 * 80  # right after the T-token views, not at C
    validate_recipe(CONCRETE, r)


def test_unfused_s_46340_fits_and_46341_overflows_int32():
    ok = recipe(pmha(batch=1, seq=46340, heads=1, head_size=8, tokens=1), Backend.UNFUSED)
    assert ok.backend_workspace_bytes == 4294791424  # align256(2 * 46340**2)
    with pytest.raises(InvalidArgument, match=r"S \* S .*46341 \* 46341"):
        recipe(pmha(batch=1, seq=46341, heads=1, head_size=8, tokens=1), Backend.UNFUSED)


def test_direct_flash_skips_unfused_limits_at_s_46341():
    r = recipe(pmha(batch=1, seq=46341, heads=1, head_size=8, tokens=1, fmt="separate"), Backend.FLASH)
    assert r.attention_workspace_bytes == 4 * 46341
