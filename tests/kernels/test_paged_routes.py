"""PagedAttention's portable decode, MEA and Flash routes on the simulator, through the one validator
(`attnws.kernels.validate_shape`): the route the spec's cascade picks, its stages as the statement
names them, each request carved as a device allocation of its own (with guard bands) and measured
two-sided: nothing written outside the buffers the statement names, every buffer written whole,
so that the bytes each kernel touches equal the spec's statement (`attnws.spec.paged.footprint`)
and fill each request exactly; the cache updated with the step's rows and nothing else; the
output (and Flash's LSE) within tolerance of the float64 reference.

With rotary the prologue's request holds the rotated Q [T, N, H] then K [T, Nk, H]: the stage
named `prologue` writes it whole, the attention stage reads it (the routes' Q, and ReshapeAndCache's
K), and a planted fault in the prologue (K one row late, positions one off) is caught.

Tiny shapes: N = 4 query heads over Nk = 2 KV heads, H 16 or 32 (136 for MEA's float32
accumulator), B 1 to 3, M blocks of 16 (256 where Flash's page rule needs it). The decode kernel
runs where Flash is not eligible (a block of 16 is below Flash's 256-key page at H <= 64) on a
decode-shaped step (T <= B), MEA on the same cache with more tokens than sequences, Flash on
blocks of 256; its split-KV decode needs attention_metadata and keys past 512.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from numba import cuda

from attnws.kernels import validate_shape
from attnws.spec.dispatch import dispatch
from attnws.spec.footprint import footprint
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.paged.inputs import runtime_problem
from attnws.spec.paged.problem import PagedFormat
from attnws.spec.problem import Backend, Op
from attnws.spec.recipe import recipe

from tests.kernels.gqa_shapes import allocated, touched

SM16 = RuntimeConfig.make(sm=80, sm_count=16)
SM8 = RuntimeConfig.make(sm=80, sm_count=8)


def paged(batch: int, seq: int, tokens: int, head_size: int, kv_len: int, block_size: int, max_blocks: int,
          heads: int = 4, kv_heads: int = 2, **flags: Any) -> Geometry:
    """Return the fp16 geometry of a step of T = `tokens` new tokens over B = `batch` sequences, the
    longest S = `seq` new tokens and L = `kv_len` keys, N = `heads`, Nk = `kv_heads`, H =
    `head_size`, `max_blocks` blocks of `block_size` per sequence; `flags` are Geometry's."""
    return Geometry(op=Op.PAGED, element_size=2, batch=batch, seq=seq, heads=heads, head_size=head_size,
                    tokens=tokens, kv_heads=kv_heads, kv_len=kv_len, block_size=block_size, max_blocks=max_blocks,
                    **flags)


# name: (geometry, configuration, route, splits)
CASES = {
    # T == B, S == 1: Kx = M * bs = 32 keys is one 128-key tile: one split.
    "decode-one-split": (paged(2, 1, 2, 16, 20, 16, 2), SM16, "paged_decode", 1),
    # Kx = 256: two splits of 128 keys; the 20 keys leave the second split empty (it still writes its rows).
    "decode-empty-split": (paged(1, 1, 1, 16, 20, 16, 16), SM16, "paged_decode", 2),
    # With metadata Kx = L = 140: two splits, both holding keys, over three sequences.
    "decode-two-splits-metadata": (paged(3, 1, 3, 16, 140, 16, 16, metadata="bounds"), SM16, "paged_decode", 2),
    # Decode-shaped (T <= B) with two new tokens in one sequence and none in another.
    "decode-shaped-prefill": (paged(3, 2, 3, 16, 20, 16, 2), SM16, "paged_decode", 1),
    "mea-prefill": (paged(2, 3, 5, 16, 20, 16, 2), SM16, "mea", 1),
    "mea-accumulator-h136": (paged(1, 2, 2, 136, 6, 16, 1), SM16, "mea", 1),
    "flash-prefill": (paged(2, 3, 5, 32, 20, 256, 1), SM16, "flash", 1),
    "flash-decode": (paged(2, 1, 2, 32, 20, 256, 1), SM16, "flash", 1),
    # 520 keys past the 512 lower bound, metadata given, one token: 2 splits on 8 SMs.
    "flash-split-decode": (paged(1, 1, 1, 32, 520, 256, 3, metadata="bounds"), SM8, "flash", 2),
    # Rotary: the prologue rotates Q and K at positions past_b + i (> 0 here) into its request; each
    # route reads the rotated Q, and ReshapeAndCache caches the rotated K.
    "decode-rotary": (paged(3, 2, 3, 16, 20, 16, 2, rotary=True), SM16, "paged_decode", 1),
    "mea-rotary": (paged(2, 3, 5, 16, 20, 16, 2, rotary=True), SM16, "mea", 1),
    "flash-rotary": (paged(2, 3, 5, 32, 20, 256, 1, rotary=True), SM16, "flash", 1),
}
ROTARY_CASES = ("decode-rotary", "mea-rotary", "flash-rotary")


def stated_bytes(g: Geometry, config: RuntimeConfig) -> dict[str, int]:
    """Return the bytes of each buffer the spec's statement names (non-empty ones), and the output's."""
    p = runtime_problem(g)
    fp = footprint(p, dispatch(p, config).backends[0], config=config)
    out = {b.name: b.nbytes() for b in fp.buffers if b.nbytes()}
    return {**out, "output": 2 * p.token_count * p.num_heads * p.head_size}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_route_fills_each_request_exactly_and_matches_the_reference(case):
    g, config, route, splits = CASES[case]
    p = runtime_problem(g)
    backend = dispatch(p, config).backends[0]
    sized = recipe(p, backend, config=config)
    assert backend.value == route and sized.splits == splits
    report = validate_shape(g, config)
    assert report.failures == () and report.status == "passed"
    assert report.stages == ("GetCumulativeSeqlensKV", "prologue", f"{route} attention")
    assert report.measurement.stray == () and report.measurement.incomplete == ()
    assert touched(report) == stated_bytes(g, config)  # every byte of every buffer, and nothing else
    assert allocated(report) == {"output": 2 * p.token_count * p.num_heads * p.head_size,
                                 **{name: nbytes for name, nbytes in sized.allocations() if nbytes}}
    assert report.allocations_match and report.spare_bytes == 0 and report.untouched_regions == ()
    assert report.outside_regions.status == report.slack.status == report.present_cache.status == "passed"
    assert report.lse.status == ("passed" if route == "flash" else "not applicable")
    assert report.max_error < report.tolerance / 4  # well inside, not at the edge


def test_mea_accumulates_in_float32_above_128_and_gathers_every_key_of_every_head():
    g, config, _, _ = CASES["mea-accumulator-h136"]
    written = touched(validate_shape(g, config))
    assert written["mea_accumulator"] == 4 * g.tokens * g.heads * g.head_size
    assert written["gathered_key"] == written["gathered_value"] == 2 * g.batch * g.kv_len * g.heads * g.head_size


def test_the_split_routes_write_every_split_row():
    decode, config, _, _ = CASES["decode-empty-split"]
    written = touched(validate_shape(decode, config))
    assert written["decode_partial_out"] == 4 * 2 * decode.tokens * decode.heads * decode.head_size
    assert written["decode_partial_max"] == written["decode_partial_sum"] == 4 * 2 * decode.tokens * decode.heads
    flash, config, _, _ = CASES["flash-split-decode"]
    written = touched(validate_shape(flash, config))
    assert written["softmax_lse_accum"] == 4 * 2 * flash.batch * flash.heads
    assert written["out_accum"] == 4 * 2 * flash.batch * flash.heads * flash.head_size  # round32(32) = 32
    assert written["softmax_lse"] == 4 * flash.heads * flash.tokens


def test_flash_split_decode_below_its_head_rounding_fills_what_the_statement_says():
    report = validate_shape(paged(1, 1, 1, 16, 520, 256, 3, metadata="bounds"), SM8)
    assert touched(report)["out_accum"] == 4 * 2 * 4 * 16  # H = 16 of the 32 columns of each split row
    assert report.failures == ()


def test_the_readback_is_named_where_ort_reads_the_lengths_back():
    g, config, _, _ = CASES["mea-prefill"]
    assert "readback" in validate_shape(g, config).launches_not_run[0]
    g, config, _, _ = CASES["decode-two-splits-metadata"]
    assert validate_shape(g, config).launches_not_run == ()


SM90 = RuntimeConfig.make(sm=90, sm_count=16)


@pytest.mark.parametrize("g, config, unsupported", [
    (paged(2, 1, 2, 16, 20, 16, 2, bf16=True), SM16, "is_bf16=True"),
    (paged(2, 3, 5, 16, 20, 16, 2, kv_quant="int8"), SM16, "cache_type=int8"),
    (paged(2, 3, 5, 16, 20, 16, 2, qk_norm=True), SM16, "use_qk_norm=True"),
    (paged(2, 3, 5, 16, 20, 16, 2, softcap=2.0), SM16, "softcap=2"),
    (paged(2, 1, 2, 16, 20, 16, 2, head_sink="initializer"), SM16, "head_sink=True"),
    (paged(2, 3, 5, 16, 20, 16, 2, window=8), SM16, "local_window_size=8"),
    (paged(2, 3, 5, 16, 20, 16, 2, paged_format=PagedFormat.PACKED_QKV), SM16, "is_packed_qkv=True"),
    (paged(2, 3, 5, 16, 20, 16, 2, non_causal=True), SM16, "is_causal=0"),
    (paged(2, 3, 5, 64, 20, 16, 2, kv_heads=1, latent=True, v_head_size=32), SM16, "route=latent"),
    (paged(1, 1, 1, 64, 200, 128, 2, heads=16, kv_heads=4, kv_quant="int8"), SM16, "route=xqa:"),
    (paged(1, 2, 2, 256, 200, 128, 2, heads=24, kv_heads=4, kv_quant="int8", metadata="bounds"), SM16,
     "route=xqa_spec_decode"),
    (paged(1, 1, 1, 32, 20, 256, 1, metadata="bounds"), SM90, "route=cudnn"),
], ids=["bf16", "int8-cache", "qk-norm", "softcap", "head-sink", "window", "packed-qkv", "non-causal",
        "latent-route", "xqa-route", "xqa-spec-route", "cudnn-route"])
def test_a_route_or_feature_without_kernels_here_is_refused(g, config, unsupported):
    report = validate_shape(g, config)
    assert report.status == "refused" and report.unmodelled and not report.failures
    assert report.refused.startswith("no kernels here: ") and unsupported in report.refused
    assert report.stages == () and report.allocations == ()


def test_the_budget_refuses_a_models_decode_step():
    from attnws.kernels.budget import DEFAULT_MAX_SIM_SECONDS, run_cost
    from attnws.kernels.placement import place

    def estimate(g: Geometry, config: RuntimeConfig) -> float:
        p = runtime_problem(g)
        backend = dispatch(p, config).backends[0]
        fp = footprint(p, backend, config=config)
        return run_cost(p, fp, place(p, fp, recipe(p, backend, config=config)), simulator=True).simulator_seconds

    for g, config, _, _ in CASES.values():
        assert estimate(g, config) < 15
    llama = paged(4, 1, 4, 128, 8192, 16, 512, heads=32, kv_heads=8)  # Llama 3 8B's decode step at L = 8192
    assert dispatch(runtime_problem(llama), SM16).backends[0] is Backend.PAGED_DECODE
    assert estimate(llama, SM16) > 5 * DEFAULT_MAX_SIM_SECONDS  # minutes on the simulator: refused by default


@pytest.mark.parametrize("case", ROTARY_CASES)
def test_rotary_prologue_writes_q_and_k_and_the_attention_stage_reads_them(case):
    g, config, route, _ = CASES[case]
    p = runtime_problem(g)
    fp = footprint(p, dispatch(p, config).backends[0], config=config)
    stages = {s.name: s for s in fp.stages}
    assert stages["prologue"].writes == ("prologue",) and "prologue" in stages[f"{route} attention"].reads
    written = touched(validate_shape(g, config))
    assert written["prologue"] == 2 * g.tokens * (g.heads + g.kv_heads) * g.head_size


def rotary_fault(monkeypatch, fault) -> None:
    """Run the prologue through `fault(real, plan)` instead of the real launch."""
    from attnws.kernels.paged import layouts

    real = layouts.rotate_query_key
    monkeypatch.setattr(layouts, "rotate_query_key", lambda plan: fault(real, plan))


def test_a_prologue_writing_k_one_row_late_is_a_stray_and_an_incomplete_write(monkeypatch):
    """Q in place, then K [T, Nk, H] one row (Nk * H elements) late: its last row lands in the
    request's guard band, its first row is never written."""
    g, config, _, _ = CASES["mea-rotary"]
    q_elements, row = g.tokens * g.heads * g.head_size, g.kv_heads * g.head_size

    def late_key(real, plan):
        real(replace(plan, kv_heads=0))  # Q only
        real(replace(plan, heads=0, destination=plan.destination[q_elements + row:]))  # K only, one row late

    rotary_fault(monkeypatch, late_key)
    report = validate_shape(g, config)
    assert report.status == "failed" and {"stray writes", "guard bands"} <= set(report.failures)
    assert [(s.stage, s.allocation, s.first_offset, s.nbytes) for s in report.measurement.stray] == [
        ("prologue", "prologue", 2 * (q_elements + g.tokens * row), 2 * row)]
    assert {(i.buffer, i.written, i.expected) for i in report.measurement.incomplete} >= {
        ("prologue", q_elements + (g.tokens - 1) * row, q_elements + g.tokens * row)}


def test_a_prologue_rotating_one_position_off_fails_the_reference_and_the_cache(monkeypatch):
    """Every position one past its own: each byte still lands where the statement says, so only the
    output (and the cached K) against the float64 rotation catch it."""
    g, config, _, _ = CASES["decode-rotary"]

    def one_off(real, plan):
        real(replace(plan, past_seqlens=cuda.to_device(plan.past_seqlens.copy_to_host() + 1)))

    rotary_fault(monkeypatch, one_off)
    report = validate_shape(g, config)
    assert report.status == "failed" and report.measurement.stray == () and report.measurement.incomplete == ()
    assert report.max_error > report.tolerance and report.present_cache.status == "failed"
