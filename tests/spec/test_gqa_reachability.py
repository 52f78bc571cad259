"""GroupQueryAttention's AOT reachability (`attnws.spec.gqa.reachability`): each route of ORT's
estimator unreachable for its own reason, in words with the values; every route reachable at
once; `estimate.reachable_routes` equal to the verdicts and to the research note's table
(`docs/research/gqa-workspace.md` §8) over a grid of nodes; a gate dropped on purpose caught by
ORT's own estimate test (`NonWindowedRequiresExplicitTotalKvBound`, replayed in
`tests/model/test_gqa_golden_nodes.py`); the routes and reasons in `attnws estimate --op gqa`."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import pytest

from attnws.spec.backends import flash, mea
from attnws.spec.domain import CONCRETE
from attnws.spec.gates import HeadDomain
from attnws.spec.gqa import reachability as gqa_reachability
from attnws.spec.gqa.estimate import FAST_DECODE, reachable_routes
from attnws.spec.gqa.problem import BACKENDS, GqaProblem, KvQuantization
from attnws.spec.gqa.reachability import (
    fast_decode_reachability, reachability, route_gates, route_verdicts, unreachable_routes,
)
from attnws.spec.gqa.recipe import XQA_GROUPS, XQA_QUANTIZED_GROUPS
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Backend

from tests.cli.helpers import REPR_MARKS, attnws
import tests.model.test_gqa_golden_nodes as golden

LLAMA = GqaProblem(4, 4096, 4096, 4096, 4096, 32, 8, 128)  # every dimension at its bound
PER_TENSOR = dict(k_quantization=KvQuantization.PER_TENSOR, v_quantization=KvQuantization.PER_TENSOR)
INT8 = dict(cache_element_size=1, kv_cache_bit_width=8, **PER_TENSOR)
INT4 = dict(cache_element_size=1, kv_cache_bit_width=4, **PER_TENSOR)
FP8 = dict(INT8, cache_is_fp8=True)
WINDOWED = dict(local_window_size=128, sliding_window_cache=True)
ALL_ROUTES = {*BACKENDS, FAST_DECODE}


def config(sm: int = 80, sdpa: int = 0, **env: str) -> RuntimeConfig:
    return RuntimeConfig.make(sm=sm, sdpa_kernel=sdpa, env=env)


def reasons(p: GqaProblem, c: RuntimeConfig) -> dict[str, str]:
    return dict(unreachable_routes(p, c))


# (route, node changes, config, the reason's words)
UNREACHABLE = [
    ("xqa", {}, config(ORT_ENABLE_XQA="0"), "disabled by ORT_ENABLE_XQA=0"),
    ("xqa", dict(causal=False), config(), "needs causal attention"),
    ("xqa", {}, config(sm=75), "needs sm >= 80: sm75"),
    ("xqa", dict(softcap=30.0), config(), "softcap = 30.0"),
    ("xqa", dict(smooth_softmax=True), config(), "smooth softmax without a head sink"),
    ("xqa", INT4, config(), "a quantized cache needs 8-bit elements: kv_cache_bit_width = 4"),
    ("xqa", dict(head_size=56), config(), "needs a head size 64, 128 or 256 up to the bound: H <= 56"),
    ("xqa", dict(num_heads=12, kv_num_heads=2), config(),
     "needs a group size N / Nk of 1, 2, 4, 5, 8, 16 or 32: N = 12, Nk = 2"),
    ("xqa", dict(INT8, num_heads=16, kv_num_heads=8), config(),
     "needs a group size N / Nk of 4, 8, 16 or 32 with a quantized cache: N = 16, Nk = 8"),
    ("xqa", FP8, config(sm=86), "an fp8 cache needs sm89 or sm >= 90: sm86"),
    ("cudnn", {}, config(),
     "disabled (ORT_ENABLE_CUDNN_FLASH_ATTENTION is off by default), and not automatic before sm90: sm80"),
    ("cudnn", {}, config(sm=90, sdpa=1),
     "disabled by sdpa_kernel = 1 (bit 8 not set), which also turns off its automatic choice on sm90"),
    ("cudnn", {}, config(sm=90, ORT_ENABLE_CUDNN_FLASH_ATTENTION="0"),
     "disabled by ORT_ENABLE_CUDNN_FLASH_ATTENTION=0, which also turns off its automatic choice on sm90"),
    ("cudnn", dict(local_window_size=128), config(sm=90), "local window 128"),
    ("cudnn", dict(has_head_sink=True), config(sm=90), "smooth softmax or head sink"),
    ("flash", {}, config(ORT_DISABLE_FLASH_ATTENTION="1"), "disabled by ORT_DISABLE_FLASH_ATTENTION=1"),
    ("flash", dict(has_attention_bias=True), config(), "attention bias present"),
    ("flash", {}, config(sm=75), "needs sm >= 80 and a head size >= 8: sm75, H <= 128"),
    ("flash_fast_decode", {}, config(ORT_DISABLE_FLASH_DECODE="1"), "disabled by ORT_DISABLE_FLASH_DECODE"),
    ("flash_fast_decode", WINDOWED, config(), "a windowed cache (sliding_window_cache = 1)"),
    ("flash_fast_decode", dict(use_qk_norm=True), config(), "QK-norm"),
    ("flash_fast_decode", INT8, config(), "quantized cache"),
    ("mea", {}, config(ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION="1"),
     "disabled by ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION=1"),
    ("mea", INT8, config(), "quantized cache"),
    ("mea", dict(is_bf16=True), config(sm=75), "needs sm >= 80 (bf16) and a head size >= 8: sm75, H <= 128"),
    ("unfused", dict(has_head_sink=True), config(), "smooth softmax or head sink"),
    ("unfused", INT8, config(), "quantized cache"),
]


@pytest.mark.parametrize("route, changes, c, words", UNREACHABLE,
                         ids=[f"{r}-{words}" for r, _, _, words in UNREACHABLE])
def test_a_route_is_unreachable_for_its_first_failing_gate(route, changes, c, words):
    p = replace(LLAMA, **changes)
    assert reasons(p, c)[route] == words
    assert route not in {getattr(r, "value", r) for r in reachable_routes(p, c)}


def test_every_route_of_the_cascade_is_unreachable_in_some_case():
    assert {route for route, *_ in UNREACHABLE} == {getattr(r, "value", r) for r in ALL_ROUTES}


def test_every_route_is_reachable_for_a_llama_node_on_sm90():
    """N 32 / Nk 8 (group 4), H 128, no window: XQA, cuDNN (automatic on sm90), Flash with its
    fast decode, MEA and unfused are all reachable."""
    c = config(sm=90)
    assert unreachable_routes(LLAMA, c) == []
    assert reachable_routes(LLAMA, c) == ALL_ROUTES
    assert all(r.reachable and r.reason == "" for r in reachability(LLAMA, c, HeadDomain.UPPER_BOUND))
    assert fast_decode_reachability(LLAMA, c).reachable


def test_the_hook_lists_the_backends_in_cascade_order_whatever_the_domain():
    p, c = replace(LLAMA, num_heads=12, kv_num_heads=2), config()
    exact, bound = (reachability(p, c, domain) for domain in HeadDomain)
    assert exact == bound
    assert [r.backend for r in bound] == list(BACKENDS)
    assert [route for route, _ in route_gates(p, c)] == [Backend.XQA, Backend.CUDNN, Backend.FLASH, FAST_DECODE,
                                                         Backend.MEA, Backend.UNFUSED]


def test_fast_decode_fails_first_on_flash_s_own_gates():
    verdict = fast_decode_reachability(LLAMA, config(sm=75))
    assert verdict.reason == "needs sm >= 80 and a head size >= 8: sm75, H <= 128"


# -- the estimator's route bits against the verdicts and the research note's table -----------------
def note_table(p: GqaProblem, c: RuntimeConfig) -> frozenset:
    """The dispatch facts of `docs/research/gqa-workspace.md` §8, written apart from the gates."""
    sm, opts = c.device.sm, c.options
    xqa = (opts.use_xqa and p.causal and not p.has_attention_bias and sm // 10 >= 8 and p.softcap == 0
           and (not p.smooth_softmax or p.has_head_sink) and not (p.use_qk_norm and p.quantized)
           and (not p.quantized or p.kv_cache_bit_width == 8) and p.head_size >= 64
           and p.num_heads // p.kv_num_heads in (XQA_QUANTIZED_GROUPS if p.quantized else XQA_GROUPS)
           and (not p.cache_is_fp8 or sm == 89 or sm >= 90))
    on_flash = not p.has_attention_bias and opts.use_flash and flash.any_head_supported(CONCRETE, sm, p.head_size)
    routes = {Backend.XQA: xqa, Backend.FLASH: on_flash,
              FAST_DECODE: on_flash and opts.use_flash_decode and not p.quantized and not p.use_qk_norm
              and not p.sliding_window_cache,
              Backend.MEA: not p.quantized and not p.has_attention_bias and opts.use_efficient
              and mea.any_head_supported(CONCRETE, sm, True, p.head_size, p.head_size, p.is_bf16),
              Backend.UNFUSED: not p.quantized and not p.use_smooth_softmax,
              Backend.CUDNN: not p.has_attention_bias and not p.quantized and p.softcap == 0
              and not p.use_smooth_softmax and p.local_window_size == -1
              and (opts.use_cudnn or (opts.cudnn_auto and sm // 10 >= 9))}
    return frozenset(r for r, on in routes.items() if on)


def verdict_routes(p: GqaProblem, c: RuntimeConfig) -> frozenset:
    hook = {r.backend for r in reachability(p, c, HeadDomain.UPPER_BOUND) if r.reachable}
    return frozenset(hook | ({FAST_DECODE} if fast_decode_reachability(p, c).reachable else set()))


HEADS = [(32, 8), (12, 2), (8, 8), (64, 2), (16, 8)]
HEAD_SIZES = [8, 56, 64, 96, 128, 256, 512]
CACHES = [{}, INT8, INT4, FP8, dict(INT8, k_quantization=KvQuantization.PER_CHANNEL)]
WINDOWS = [{}, dict(local_window_size=128), WINDOWED]
SHAPES = [dict(num_heads=n, kv_num_heads=nk, head_size=h, softcap=softcap, has_attention_bias=bias, **cache, **window)
          for (n, nk), h, cache, window, softcap, bias
          in itertools.product(HEADS, HEAD_SIZES, CACHES, WINDOWS, (0.0, 30.0), (False, True))]
FLAGS = [dict(causal=False), dict(smooth_softmax=True), dict(has_head_sink=True),
         dict(smooth_softmax=True, has_head_sink=True), dict(use_qk_norm=True), dict(is_bf16=True)]
CONFIGS = [config(sm=sm) for sm in (75, 80, 86, 89, 90, 120)] + [
    config(ORT_ENABLE_XQA="0"), config(ORT_DISABLE_FLASH_DECODE="1"), config(ORT_ENABLE_CUDNN_FLASH_ATTENTION="1"),
    config(sm=90, ORT_ENABLE_CUDNN_FLASH_ATTENTION="0"), config(sm=90, sdpa=1), config(sdpa=2)]


def grid() -> list[tuple[GqaProblem, RuntimeConfig]]:
    shapes = [(replace(LLAMA, **s), c) for s in SHAPES for c in (CONFIGS[0], CONFIGS[1], CONFIGS[4])]
    flags = [(replace(LLAMA, **f, **cache), c) for f in FLAGS for cache in CACHES for c in CONFIGS]
    return shapes + flags


def test_the_estimator_s_routes_are_the_verdicts_and_the_note_s_table_over_a_grid():
    cases = grid()
    mismatches = [(p, c.device.sm) for p, c in cases
                  if not reachable_routes(p, c) == verdict_routes(p, c) == note_table(p, c)]
    assert mismatches == []
    seen = set().union(*(reachable_routes(p, c) for p, c in cases))
    unseen = set().union(*({route for route, _ in unreachable_routes(p, c)} for p, c in cases))
    assert seen == ALL_ROUTES and unseen == {getattr(r, "value", r) for r in ALL_ROUTES}


def test_route_verdicts_are_what_both_readers_share():
    p, c = replace(LLAMA, **WINDOWED), config()
    verdicts = route_verdicts(p, c)
    assert reachable_routes(p, c) == {route for route, v in verdicts if v.reachable}
    assert unreachable_routes(p, c) == [(getattr(route, "value", route), v.reason) for route, v in verdicts
                                        if not v.reachable]


# -- a gate dropped on purpose: ORT's own estimate test catches it --------------------------------
def without_gate(monkeypatch: Any, family: str, name: str) -> None:
    """Plant a bug: the route's gate list (`reachability.<family>`) loses the gate `name`."""
    real = getattr(gqa_reachability, family)
    monkeypatch.setattr(gqa_reachability, family, lambda p, c: [g for g in real(p, c) if g.name != name])


NON_WINDOWED = {"past_key": [golden.B, golden.NK, 128, golden.H], "past_value": [golden.B, golden.NK, 128, golden.H]}


def test_a_dropped_cudnn_gate_fails_ort_s_non_windowed_estimate_case(monkeypatch):
    """NonWindowedRequiresExplicitTotalKvBound (sm80, XQA off, no window): ORT gives a value at
    max_total_sequence_length 64, 128 and 256. Without cuDNN's `enabled` gate, cuDNN counts as
    reachable on sm80, and a reachable cuDNN makes the estimate Unavailable: the case fails."""
    (case,) = [c for c in golden.ESTIMATE_CASES if c["test"].endswith("NonWindowedRequiresExplicitTotalKvBound")]
    assert case["expected"]["64"].startswith("has value")
    model = golden.gqa_model(NON_WINDOWED, **golden.NONWINDOWED)
    assert golden.estimate(model, golden.NO_XQA, 64).ok
    golden.test_a_non_windowed_cache_needs_the_session_option_and_is_bounded_by_the_larger()

    without_gate(monkeypatch, "cudnn_gates", "enabled")
    planted = golden.estimate(model, golden.NO_XQA, 64)
    assert not planted.ok and "cuDNN" in planted.message
    with pytest.raises(AssertionError):
        golden.test_a_non_windowed_cache_needs_the_session_option_and_is_bounded_by_the_larger()


def test_a_dropped_xqa_group_gate_changes_the_verdict_for_group_six(monkeypatch):
    """Every ORT estimate case has N 8 / Nk 2 (group 4, XQA's): none can see the group gate go.
    Qwen2.5-1.5B's group 6 does: XQA turns reachable and the estimate changes."""
    qwen, c = replace(LLAMA, num_heads=12, kv_num_heads=2), config()
    assert Backend.XQA not in reachable_routes(qwen, c)
    without_gate(monkeypatch, "xqa_gates", "group size")
    assert Backend.XQA in reachable_routes(qwen, c)


# -- the command line -----------------------------------------------------------------------------------
QWEN = ("--batch", "1", "--seq", "1", "--heads", "12", "--kv-heads", "2", "--head-size", "128", "--total-seq", "4096",
        "--max-total-seq", "4096")


def test_estimate_says_which_routes_are_not_reachable_and_why():
    run = attnws("estimate", "--op", "gqa", *QWEN)
    rows = {line.split()[0]: line for line in run.out.splitlines()
            if line.startswith("  ") and len(line.split()) > 2 and line.split()[1] in ("yes", "no")}
    assert run.code == 0
    assert rows["xqa"].split()[1:3] == ["no", "-"]
    assert rows["xqa"].endswith("needs a group size N / Nk of 1, 2, 4, 5, 8, 16 or 32: N = 12, Nk = 2")
    assert rows["cudnn"].endswith("disabled (ORT_ENABLE_CUDNN_FLASH_ATTENTION is off by default), and not automatic "
                                  "before sm90: sm80")
    assert not any(mark in line for line in rows.values() for mark in REPR_MARKS)
    doc = attnws("estimate", "--op", "gqa", *QWEN, "--env", "ORT_DISABLE_FLASH_DECODE=1", "--json").json()
    unreachable = {r["backend"]: r["reason"] for r in doc["routes"] if not r["reachable"]}
    assert list(unreachable) == ["xqa", "cudnn", "flash_fast_decode"]
    assert unreachable["flash_fast_decode"] == "disabled by ORT_DISABLE_FLASH_DECODE"