"""GroupQueryAttention's runtime cascade (`attnws.spec.gqa.dispatch`) on the cases the research
note works through (`docs/research/gqa-inputs-dispatch.md` §3): decode goes to XQA where its
kernels exist, a prompt to cuDNN on sm90 by default and to Flash elsewhere, Flash's fast decode
also takes multi-token steps, and what is left fails as ORT does."""

from __future__ import annotations

import pytest

from attnws.spec.gqa.dispatch import NO_ROUTE, QUANTIZED_NO_ROUTE, select
from attnws.spec.gqa.estimate import FAST_DECODE, ort_estimate, reachable_routes
from attnws.spec.gqa.problem import GqaProblem, KvQuantization
from attnws.spec.errors import Unavailable
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Backend

LLAMA_DECODE = GqaProblem(1, 1, 1, 4096, 2048, 32, 8, 128)  # one token, static 4,096-row shared cache
LLAMA_PROMPT = GqaProblem(1, 512, 512, 4096, 512, 32, 8, 128)


def backend(p, sm=80, env=None, sdpa=0):
    chosen = select(p, RuntimeConfig.make(sm=sm, env=env or {}, sdpa_kernel=sdpa))
    return chosen.route.backend if chosen.route else chosen.failure


def test_decode_takes_xqa_and_a_prompt_flash_or_cudnn():
    assert backend(LLAMA_DECODE) is Backend.XQA
    assert backend(LLAMA_PROMPT) is Backend.FLASH
    assert backend(LLAMA_PROMPT, sm=90) is Backend.CUDNN  # AllowCudnnFlashAttentionAuto on sm >= 90
    assert backend(LLAMA_PROMPT, sm=90, env={"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "0"}) is Backend.FLASH
    assert backend(LLAMA_PROMPT, sm=90, sdpa=1) is Backend.FLASH  # a pinned kernel set turns the auto off


def test_xqa_off_sends_decode_to_flash_fast_decode():
    chosen = select(LLAMA_DECODE, RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0"}))
    assert chosen.route.backend is Backend.FLASH and chosen.route.fast_decode
    assert "ORT_ENABLE_XQA=0" in chosen.skipped[0][1]
    chunk = GqaProblem(1, 64, 64, 4096, 1024, 32, 8, 128)  # a later prompt chunk: not the first prompt
    assert select(chunk).route.fast_decode
    no_decode = select(chunk, RuntimeConfig.make(env={"ORT_DISABLE_FLASH_DECODE": "1"}))
    assert no_decode.route.backend is Backend.FLASH and not no_decode.route.fast_decode


def test_xqa_groups_and_head_sizes():
    qwen_15b = GqaProblem(1, 1, 1, 4096, 2048, 12, 2, 128)  # group 6: no XQA kernel
    assert backend(qwen_15b) is Backend.FLASH
    phi3 = GqaProblem(1, 1, 1, 4096, 2048, 32, 32, 96)  # head size 96: no XQA kernel
    assert backend(phi3) is Backend.FLASH


def test_sm75_and_bf16_and_the_failures():
    assert backend(LLAMA_PROMPT, sm=75) is Backend.MEA
    bf16 = GqaProblem(1, 512, 512, 4096, 512, 32, 8, 128, is_bf16=True)
    assert backend(bf16, sm=75) is Backend.UNFUSED
    sink = GqaProblem(1, 512, 512, 4096, 512, 32, 8, 128, is_bf16=True, has_head_sink=True)
    assert backend(sink, sm=75) == NO_ROUTE
    quantized = GqaProblem(1, 512, 512, 4096, 512, 32, 8, 128, cache_element_size=1, kv_cache_bit_width=8,
                           k_quantization=KvQuantization.PER_TENSOR, v_quantization=KvQuantization.PER_TENSOR)
    assert backend(quantized, sm=75) == QUANTIZED_NO_ROUTE
    assert backend(quantized) is Backend.FLASH


def test_ort_estimator_routes_and_unavailability():
    bounds = GqaProblem(4, 4096, 4096, 4096, 4096, 32, 8, 128)
    assert reachable_routes(bounds, RuntimeConfig.make()) == {Backend.XQA, Backend.FLASH, FAST_DECODE, Backend.MEA,
                                                             Backend.UNFUSED}
    with pytest.raises(Unavailable, match="gqa_workspace_max_total_sequence_length"):
        ort_estimate(bounds, RuntimeConfig.make())
    with pytest.raises(Unavailable, match="cuDNN"):
        ort_estimate(bounds, RuntimeConfig.make(sm=90), 4096)
    smaller = ort_estimate(bounds, RuntimeConfig.make(), 2048).total_workspace_bytes
    assert smaller == ort_estimate(bounds, RuntimeConfig.make(), 4096).total_workspace_bytes  # max(option, P)
    assert ort_estimate(bounds, RuntimeConfig.make(), 8192).total_workspace_bytes > smaller


def test_windowed_estimate_needs_capacity_equal_to_the_window():
    windowed = GqaProblem(1, 1, 1, 4096, 9000, 32, 8, 128, local_window_size=4096, sliding_window_cache=True)
    assert ort_estimate(windowed, RuntimeConfig.make()).total_workspace_bytes > 0
    wider = GqaProblem(1, 1, 1, 8192, 9000, 32, 8, 128, local_window_size=4096, sliding_window_cache=True)
    with pytest.raises(Unavailable, match="not the local window"):
        ort_estimate(wider, RuntimeConfig.make())


def test_sm_count_defaults_per_part_and_overrides():
    assert RuntimeConfig.make(sm=80).device.sm_count == 108
    assert RuntimeConfig.make(sm=90).device.sm_count == 132
    assert RuntimeConfig.make(sm=89, sm_count=128).device.sm_count == 128
    decode = GqaProblem(1, 1, 1, 16384, 13825, 2, 2, 64)
    on = {c: select(decode, RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0"}, sm_count=c)).route for c in (108, 132)}
    assert all(r.backend is Backend.FLASH and r.sm_count == c for c, r in on.items())


def test_a_windowed_cache_keeps_its_capacity_past_the_window():
    from attnws.spec.domain import CONCRETE
    windowed = GqaProblem(1, 1, 1, 4, 20, 8, 2, 64, local_window_size=4, sliding_window_cache=True)
    assert windowed.present_capacity(CONCRETE) == 4
    assert GqaProblem(1, 1, 1, 4, 20, 8, 2, 64).present_capacity(CONCRETE) == 20
