"""The runtime cascade: each gate at its threshold, explanations, options, and unknown runners."""

from __future__ import annotations

import pytest

from attnws.spec import Backend, RuntimeConfig, dispatch
from attnws.spec.errors import InvalidArgument

from .helpers import pa, pmha

BERT = dict(batch=1, heads=12, head_size=64)


def picked(problem, **config):
    return dispatch(problem, RuntimeConfig.make(**config)).backend


@pytest.mark.parametrize("seq,expected", [(512, Backend.TRT), (513, Backend.FLASH)])
def test_packed_flash_threshold_513_on_sm80(seq, expected):
    # S = 512 is in no TRT XMMA regime (> 384) but TRT-flash (>= 385) supports H = 64 on sm80.
    assert picked(pmha(seq=seq, **BERT)) is expected


def test_flash_threshold_is_explained():
    outcome = dispatch(pmha(seq=512, **BERT), RuntimeConfig.make(sm=90))
    assert outcome.backend is Backend.MEA
    reasons = dict(outcome.skipped)
    assert reasons[Backend.FLASH] == "flash: packed QKV needs S >= 513, S = 512"
    assert "no TRT kernel for sm90" in reasons[Backend.TRT]


def test_separate_format_has_no_flash_threshold():
    assert picked(pmha(seq=8, fmt="separate", **BERT)) is Backend.FLASH


@pytest.mark.parametrize("seq,expected", [(1, Backend.TRT), (384, Backend.TRT), (385, Backend.TRT)])
def test_trt_regimes_meet_at_384_385(seq, expected):
    assert picked(pmha(seq=seq, **BERT)) is expected


def test_trt_flash_disabled_leaves_a_gap_above_384():
    env = {"ORT_DISABLE_TRT_FLASH_ATTENTION": "1"}
    assert picked(pmha(seq=384, **BERT), env=env) is Backend.TRT
    assert picked(pmha(seq=385, **BERT), env=env) is Backend.MEA


# (sm, H, S): ORT picks TRT and finds its kernel. sm86 and sm89 load the kSM_80 kernels, which
# have d = 32 for every bucket in ORT 1.31.1 (fused_multihead_attention_v2.h @ 0b87bccc; ORT's own
# tests run TRT with head size 32 on sm80: multihead_attention_op_test.cc, test_mha.py).
TRT_LAUNCHES = [
    (80, 64, 128), (80, 32, 1), (80, 32, 300), (80, 32, 385), (89, 64, 128), (89, 32, 100), (89, 32, 512),
    (86, 32, 33), (75, 32, 200), (75, 64, 1),
]


@pytest.mark.parametrize("sm, head, seq", TRT_LAUNCHES, ids=[f"sm{sm} H={h} S={s}" for sm, h, s in TRT_LAUNCHES])
def test_trt_is_picked_on_validity_and_finds_its_kernel(sm, head, seq):
    outcome = dispatch(pa(batch=1, seq=seq, heads=2, head_size=head, tokens=seq), RuntimeConfig.make(sm=sm))
    assert outcome.backend is Backend.TRT
    assert outcome.failure == ""


def test_a_runner_declared_available_is_taken_at_its_word():
    outcome = dispatch(pa(batch=1, seq=64, heads=2, head_size=32, tokens=64), RuntimeConfig.make(sm=80,
                                                                                                 trt_runner="available"))
    assert outcome.backend is Backend.TRT and outcome.failure == ""


def test_unknown_runner_reports_both_outcomes():
    outcome = dispatch(pmha(seq=128, **BERT), RuntimeConfig.make(trt_runner="unknown"))
    assert outcome.backends == (Backend.TRT, Backend.MEA)
    assert outcome.backend is None


def test_fp32_mea_threshold_256():
    assert picked(pmha(seq=255, dtype=4, fmt="separate", **BERT)) is Backend.UNFUSED
    assert picked(pmha(seq=256, dtype=4, fmt="separate", **BERT)) is Backend.MEA


@pytest.mark.parametrize("seq,expected", [(7, Backend.UNFUSED), (8, Backend.MEA), (12, Backend.UNFUSED), (16, Backend.MEA)])
def test_attention_bias_alignment_fp16(seq, expected):
    assert picked(pmha(seq=seq, attn_bias=True, **BERT)) is expected


def test_head_size_limits():
    assert picked(pmha(seq=16, heads=1, head_size=1024, fmt="separate", batch=1), env={"ORT_DISABLE_FLASH_ATTENTION": "1"}) is Backend.MEA
    assert picked(pmha(seq=16, heads=1, head_size=1032, fmt="separate", batch=1), env={"ORT_DISABLE_FLASH_ATTENTION": "1"}) is Backend.UNFUSED
    assert picked(pmha(seq=16, heads=1, head_size=264, fmt="separate", batch=1)) is Backend.MEA  # Flash needs H <= 256


def test_pa_ignores_efficient_option_but_not_build():
    p = pa(seq=128, **BERT)
    assert picked(p, sm=90, env={"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}) is Backend.MEA
    assert picked(p, sm=90, mea_build=False) is Backend.UNFUSED


def test_pa_fp32_always_unfused():
    assert picked(pa(seq=128, dtype=4, **BERT)) is Backend.UNFUSED


def test_sdpa_kernel_bits_override_environment():
    p = pmha(seq=1024, **BERT)
    assert picked(p, sdpa_kernel=16) is Backend.UNFUSED  # MATH only
    assert picked(p, sdpa_kernel=2) is Backend.MEA
    with pytest.raises(InvalidArgument, match="ORT reads the backend variables only when sdpa_kernel is 0"):
        picked(p, sdpa_kernel=2, env={"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"})
    assert picked(pmha(seq=64, **BERT), sdpa_kernel=1) is Backend.FLASH  # packed threshold defaults to 0


def test_min_seq_env_is_read_in_both_modes():
    env = {"ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV": "100"}
    assert picked(pmha(seq=100, **BERT), env=env) is Backend.FLASH
    assert picked(pmha(seq=99, **BERT), sdpa_kernel=1, env=env) is Backend.UNFUSED


def test_empty_output_returns_before_dispatch():
    outcome = dispatch(pmha(tokens=0))
    assert outcome.empty and outcome.backends == ()
