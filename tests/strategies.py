"""Hypothesis strategies drawn from declared targets: the same bounds the solver quantifies over."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, strategies as st

from attnws.spec import Op, QkvFormat, RuntimeConfig
from attnws.spec.errors import InvalidArgument
from attnws.spec.gqa.problem import GqaFormat
from attnws.spec.hints import Geometry
from attnws.spec.mha.problem import MaskType, MhaFormat
from attnws.spec.paged.problem import PagedFormat
from attnws.spec.target import DimRange, Target

SMS = (75, 80, 86, 89, 90, 120)
SDPA_MASKS = (0, 1, 2, 4, 16, 18, 32 | 4, 55)
HEAD_SIZES = (1, 2, 3, 4, 8, 16, 24, 32, 40, 64, 72, 80, 96, 128, 136, 160, 256, 264)


@st.composite
def ranges(draw, lo_max: int, hi_max: int) -> DimRange:
    hi = draw(st.integers(1, hi_max))
    lo = draw(st.integers(1, min(hi, lo_max)))
    return DimRange(lo, hi)


@st.composite
def mha_flags(draw) -> dict:
    """Return MultiHeadAttention's discrete flags and its own ranges (kv_seq, past)."""
    fmt = draw(st.sampled_from(list(MhaFormat)))
    cache = fmt is MhaFormat.SEPARATE and draw(st.booleans())
    with_past = cache and draw(st.booleans())
    return {
        "mha_format": fmt, "mask": draw(st.sampled_from(list(MaskType))), "with_past": with_past,
        "with_present": cache, "unidirectional": draw(st.booleans()),
        "kv_seq": None if fmt is MhaFormat.PACKED_QKV else draw(ranges(200, 600)),
        "past": DimRange(0, draw(st.integers(0, 300))) if with_past else None,
    }


GQA_ENV = ({}, {}, {"ORT_ENABLE_XQA": "0"}, {"ORT_DISABLE_FLASH_DECODE": "1"},
           {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "0"}, {"ORT_DISABLE_FLASH_ATTENTION": "1"})


@st.composite
def gqa_target(draw) -> Target:
    """Return a small GroupQueryAttention target: a node (N = group * Nk, H, the cache capacity P
    and its options fixed) over B, S and T ranges that cross XQA's decode step, Flash's split
    changes and the prompt / decode switch, on any device and option mode ORT reads."""
    kv_heads, group = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4, 5, 6, 8]))
    head = draw(st.sampled_from([32, 64, 80, 96, 128, 256]))
    past = draw(st.sampled_from([16, 64, 256, 1024]))
    window = draw(st.sampled_from([None, None, 8, 16, past]))
    windowed = window is not None and window == past and head % 32 == 0 and draw(st.booleans())
    quant = draw(st.sampled_from([None, None, None, "int8", "fp8"]))
    try:
        return Target(
            op=Op.GQA, element_size=2, batch=draw(ranges(2, 3)), seq=draw(ranges(past, past)),
            heads=DimRange(kv_heads * group, kv_heads * group), head_size=DimRange(head, head),
            kv_heads=DimRange(kv_heads, kv_heads), past=DimRange(past, past), total_seq=draw(ranges(past, past)),
            gqa_format=GqaFormat.PACKED_QKV if draw(st.booleans()) else GqaFormat.SEPARATE,
            bf16=draw(st.booleans()), rotary=head % 16 == 0 and draw(st.booleans()), window=window,
            sliding_window_cache=windowed, softcap=draw(st.sampled_from([None, None, 30.0])),
            smooth_softmax=draw(st.booleans()), head_sink=draw(st.sampled_from([None, "initializer", "input"])),
            kv_quant=quant,
            max_total_seq=draw(st.sampled_from([None, past, past])),
            config=RuntimeConfig.make(sm=draw(st.sampled_from(SMS)), sdpa_kernel=draw(st.sampled_from([0, 0, 1, 2, 8])),
                                      env=draw(st.sampled_from(GQA_ENV))),
        )
    except InvalidArgument:
        assume(False)


PAGED_ENV = ({}, {}, {"ORT_ENABLE_XQA": "0"}, {"ORT_DISABLE_FLASH_ATTENTION": "1"}, {"ORT_ENABLE_XQA_NATIVE_KV": "1"},
             {"ORT_DISABLE_DECODER_ATTENTION": "1"}, {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "0"})


@st.composite
def paged_target(draw) -> Target:
    """Return a small PagedAttention target: a node (N = group * Nk, H, the block size and M fixed,
    its cache and options) over B, S, T and L ranges that cross T == B, one-token decode, the
    speculative lengths and the decode kernel's split changes, on any device and option mode."""
    kv_heads, group = draw(st.sampled_from([1, 2, 8])), draw(st.sampled_from([1, 4, 6, 8]))
    head = draw(st.sampled_from([64, 128, 256]))
    block, blocks = draw(st.sampled_from([16, 64, 128, 256])), draw(st.sampled_from([1, 2, 4]))
    quant = draw(st.sampled_from([None, None, "int8", "fp8", "int4"]))
    seq = draw(ranges(2, 9))
    try:
        return Target(
            op=Op.PAGED, element_size=2, batch=draw(ranges(3, 4)), seq=seq, tokens=draw(ranges(4, 36)),
            heads=DimRange(kv_heads * group, kv_heads * group), head_size=DimRange(head, head),
            kv_heads=DimRange(kv_heads, kv_heads), block_size=DimRange(block, block),
            max_blocks=DimRange(blocks, blocks), kv_len=DimRange(seq.hi, draw(st.integers(seq.hi, max(seq.hi, block * blocks)))),
            paged_format=PagedFormat.PACKED_QKV if draw(st.booleans()) else PagedFormat.SEPARATE,
            bf16=draw(st.booleans()), rotary=draw(st.booleans()), window=draw(st.sampled_from([None, None, 8])),
            softcap=draw(st.sampled_from([None, None, 30.0])), head_sink=draw(st.sampled_from([None, None, "input"])),
            qk_norm=draw(st.booleans()), kv_quant=quant,
            kv_scale=draw(st.sampled_from([None, "per_channel"])) if quant in ("int8", "fp8") else None,
            metadata=draw(st.sampled_from([None, "bounds"])),
            config=RuntimeConfig.make(sm=draw(st.sampled_from(SMS)), sdpa_kernel=draw(st.sampled_from([0, 0, 1, 2, 512])),
                                      env=draw(st.sampled_from(PAGED_ENV))),
        )
    except InvalidArgument:
        assume(False)


@st.composite
def targets(draw) -> Target:
    """Return a small target of any operator whose boxes cross the dispatch thresholds (S 384/385,
    512/513, 256; MultiHeadAttention's L 128/129; GroupQueryAttention's decode step and split
    changes)."""
    op = draw(st.sampled_from(list(Op)))
    if op is Op.GQA:
        return draw(gqa_target())
    if op is Op.PAGED:
        return draw(paged_target())
    if op is Op.MHA:
        flags = draw(mha_flags())
        head = draw(st.sampled_from(HEAD_SIZES))
        separate = flags["mha_format"] is MhaFormat.SEPARATE
        v_head = DimRange(1, draw(st.sampled_from(HEAD_SIZES))) if separate and draw(st.booleans()) else None
        attn_bias = draw(st.booleans())
        config = RuntimeConfig.make(sm=draw(st.sampled_from(SMS)), sdpa_kernel=draw(st.sampled_from(SDPA_MASKS)),
                                    trt_runner=draw(st.sampled_from(["auto", "available", "unknown"])))
        return Target(
            op=op, element_size=draw(st.sampled_from([2, 4])), batch=draw(ranges(2, 3)), seq=draw(ranges(600, 600)),
            heads=draw(ranges(2, 3)), head_size=DimRange(1, head), v_head_size=v_head,
            qkv_bias=flags["mha_format"] is not MhaFormat.PACKED_KV and draw(st.booleans()), attn_bias=attn_bias,
            attn_bias_broadcast_batch=attn_bias and draw(st.booleans()),
            attn_bias_broadcast_heads=attn_bias and draw(st.booleans()), config=config, **flags,
        )
    head = draw(st.sampled_from(HEAD_SIZES))
    fmt = draw(st.sampled_from(list(QkvFormat)))
    equal_heads = op is Op.PA or fmt is QkvFormat.PACKED or draw(st.booleans())
    v_head = None if equal_heads else DimRange(1, draw(st.sampled_from(HEAD_SIZES)))
    attn_bias = draw(st.booleans())
    config = RuntimeConfig.make(sm=draw(st.sampled_from(SMS)), sdpa_kernel=draw(st.sampled_from(SDPA_MASKS)),
                                trt_runner=draw(st.sampled_from(["auto", "available", "unknown"])))
    return Target(
        op=op, element_size=draw(st.sampled_from([2, 4])), batch=draw(ranges(2, 3)),
        seq=draw(ranges(600, 600)), heads=draw(ranges(2, 3)), head_size=DimRange(1, head), v_head_size=v_head,
        pmha_format=fmt, qkv_bias=op is Op.PMHA and draw(st.booleans()), attn_bias=attn_bias,
        attn_bias_broadcast_batch=attn_bias and draw(st.booleans()),
        attn_bias_broadcast_heads=attn_bias and draw(st.booleans()), config=config,
    )


@st.composite
def geometries_in(draw, target: Target) -> Geometry:
    """Return a concrete geometry inside the target's box (same flags)."""
    def pick(r: DimRange) -> int:
        return draw(st.integers(r.lo, r.hi))

    batch, seq, heads = pick(target.batch), pick(target.seq), pick(target.heads)
    head = pick(target.head_size)
    if target.op is Op.GQA:
        return target.geometry(batch=batch, seq=seq, heads=heads, head_size=head, kv_heads=target.kv_heads.hi,
                               total_seq=pick(target.total_seq), past=target.past.hi)
    if target.op is Op.PAGED:
        return target.geometry(batch=batch, seq=seq, heads=heads, head_size=head, tokens=pick(target.tokens),
                               kv_len=pick(target.kv_len), kv_heads=target.kv_heads.hi,
                               block_size=target.block_size.hi, max_blocks=target.max_blocks.hi)
    v_head = head if target.v_head_size is None else pick(target.v_head_size)
    if target.op is Op.MHA:
        extra = {"kv_seq": pick(target.kv_seq) if target.kv_seq else None,
                 "past": pick(target.past) if target.past else 0}
        return target.geometry(batch=batch, seq=seq, heads=heads, head_size=head, v_head_size=v_head, **extra)
    tokens = pick(target.tokens) if target.tokens else draw(st.integers(1, batch * seq))
    return target.geometry(batch=batch, seq=seq, heads=heads, head_size=head, v_head_size=v_head, tokens=tokens)


def point_target(target: Target, g: Geometry) -> Target:
    """Return the target narrowed to one geometry (every range a point)."""
    return replace(target, batch=DimRange(g.batch, g.batch), seq=DimRange(g.seq, g.seq),
                   heads=DimRange(g.heads, g.heads), head_size=DimRange(g.head_size, g.head_size),
                   v_head_size=None if target.v_head_size is None else DimRange(g.hv, g.hv),
                   tokens=None if target.op in (Op.MHA, Op.GQA) else DimRange(g.t, g.t),
                   kv_seq=None if target.kv_seq is None else DimRange(g.l, g.l),
                   past=None if target.past is None else DimRange(g.past, g.past),
                   total_seq=None if target.total_seq is None else DimRange(g.total_seq, g.total_seq),
                   kv_len=None if target.kv_len is None else DimRange(g.kv_len, g.kv_len))
