"""Tiny shapes covering every backend x dtype x layout, named as `attnws validate` flags would read."""

from __future__ import annotations

from dataclasses import replace

from attnws.spec import Op, QkvFormat, RuntimeConfig
from attnws.spec.hints import Geometry

SM75 = RuntimeConfig.make(sm=75)
SM80 = RuntimeConfig.make(sm=80)
SM90 = RuntimeConfig.make(sm=90)
LOW_THRESHOLDS = RuntimeConfig.make(sm=80, env={"ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV": "1",
                                                "ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32": "1"})


def pa(element_size: int, head_size: int, **dims) -> Geometry:
    return Geometry(Op.PA, element_size, **{"batch": 2, "seq": 4, "heads": 2, "tokens": 6, **dims},
                    head_size=head_size)


def pmha(element_size: int, head_size: int, **dims) -> Geometry:
    return Geometry(Op.PMHA, element_size, **{"batch": 2, "seq": 4, "heads": 2, "tokens": 6, **dims},
                    head_size=head_size)


def separate(g: Geometry, **flags) -> Geometry:
    return replace(g, pmha_format=QkvFormat.SEPARATE, **flags)


# id: (geometry, config, expected backend, expected no-QKV-workspace)
ROUTES = {
    "pa-fp16-trt-interleaved": (pa(2, 32, heads=1), SM80, "trt", False),
    "pa-fp16-mea-tokens": (pa(2, 8), SM90, "mea", False),
    "pa-fp32-unfused-padded-width4": (pa(4, 4), SM80, "unfused", False),
    "pa-fp16-unfused-padded-width2": (pa(2, 6), SM80, "unfused", False),
    "pa-fp16-unfused-padded-width1": (pa(2, 3, tokens=8), SM80, "unfused", False),
    "pmha-fp16-flash-direct": (separate(pmha(2, 8)), SM80, "flash", True),
    "pmha-fp16-flash-tokens-bias": (separate(pmha(2, 8), qkv_bias=True), SM80, "flash", False),
    "pmha-fp16-flash-tokens-packed": (pmha(2, 8), LOW_THRESHOLDS, "flash", False),
    "pmha-fp16-trt-direct": (pmha(2, 32, heads=1), SM80, "trt", True),
    "pmha-fp16-trt-interleaved-bias": (pmha(2, 32, heads=1, qkv_bias=True), SM80, "trt", False),
    "pmha-fp16-trt-interleaved-separate": (separate(pmha(2, 32, heads=1)), SM75, "trt", False),
    "pmha-fp16-mea-direct": (separate(pmha(2, 8)), SM75, "mea", True),
    "pmha-fp32-mea-direct": (separate(pmha(4, 8)), LOW_THRESHOLDS, "mea", True),
    "pmha-fp32-mea-tokens-packed": (pmha(4, 8, qkv_bias=True), LOW_THRESHOLDS, "mea", False),
    "pmha-fp16-mea-accumulator-direct": (separate(pmha(2, 8, batch=1, seq=2, heads=1, tokens=2, v_head_size=136)),
                                         SM75, "mea", True),
    "pmha-fp16-mea-accumulator-tokens": (separate(pmha(2, 8, heads=1, tokens=5, v_head_size=136), qkv_bias=True),
                                         SM75, "mea", False),
    "pmha-fp32-unfused-packed": (pmha(4, 8), SM80, "unfused", False),
    "pmha-fp16-unfused-separate-hv": (separate(pmha(2, 4, v_head_size=6), qkv_bias=True), SM80, "unfused", False),
}

# Attention bias with each broadcast: unfused (any S) and MEA (fp16 needs S % 8 == 0).
BIAS_FLAGS = {
    "full": {},
    "broadcast-batch": {"attn_bias_broadcast_batch": True},
    "broadcast-heads": {"attn_bias_broadcast_heads": True},
    "broadcast-both": {"attn_bias_broadcast_batch": True, "attn_bias_broadcast_heads": True},
}
BIAS_ROUTES = {
    **{f"pmha-fp32-unfused-bias-{name}": (separate(pmha(4, 4), attn_bias=True, **flags), SM80, "unfused", False)
       for name, flags in BIAS_FLAGS.items()},
    **{f"pmha-fp16-mea-bias-{name}": (separate(pmha(2, 8, seq=8, tokens=11), attn_bias=True, **flags), SM80, "mea",
                                      True)
       for name, flags in BIAS_FLAGS.items()},
}
