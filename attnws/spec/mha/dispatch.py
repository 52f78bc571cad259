"""MultiHeadAttention's runtime cascade (`multihead_attention.cc`, ComputeInternal), as gates.

Order: Flash, cuDNN SDPA, TRT fused cross attention, TRT fused runner (self attention),
memory-efficient attention (MEA), unfused. Each later backend is tried only when no earlier one
was picked. The shared `attnws.spec.dispatch` evaluates these gates concretely and the solver symbolically.
Lean attention is compiled only with USE_LEAN_ATTENTION, which ORT 1.31.1's released build lacks,
so it never runs (ORT_ENABLE_LEAN_ATTENTION and sdpa_kernel bit 256 have no effect).
cuDNN's causal rule is ORT 1.31.1's `cudnn_sdpa::is_supported` (`cudnn_fmha/cudnn_flash_attention.cu`)
with cuDNN 9.6 or newer: for S > 1 the query may not be longer than T (S = T top-left aligned,
S < T bottom-right); below 9.6, S != T also needs S and T multiples of 64, which attnws does not
model (`ort_version.CUDNN_ASSUMED`; cuDNN is off unless enabled).
"""

from __future__ import annotations

from typing import Any

from ..backends import cudnn, flash, mea, trt
from ..gates import (
    Gate, built_gate, enabled_gate, equal_heads_gate, fp16_gate, no_attention_bias_gate, trt_flash_enabled,
    trt_unsupported,
)
from ..options import RuntimeConfig
from ..ort_version import CUDNN_ASSUMED
from ..problem import Backend
from .problem import MhaFormat, MhaProblem


def _gate(name: str, cond: Any, reason: str) -> Gate:
    return Gate(name, cond, lambda: reason)


def no_mask_gate(p: MhaProblem) -> Gate:
    return _gate("no key padding mask", p.mask_rank == 0, f"key padding mask present (rank {p.mask_rank})")


def mask_none_or_key_lengths(d: Any, p: MhaProblem) -> Gate:
    """The mask is absent or the [B] key-length form."""
    cond = True if p.mask_rank == 0 else d.not_(p.mask_is_start) if p.mask_rank == 1 else False
    return _gate("mask absent or [B] key lengths", cond, "needs no mask or a [B] key-length mask")


def no_cache_gate(p: MhaProblem) -> Gate:
    return _gate("no past or present", not (p.has_past or p.has_present), "past or present key/value present")


def bidirectional_gate(p: MhaProblem) -> Gate:
    return _gate("not unidirectional", not p.is_unidirectional, "unidirectional (causal) attention")


def flash_gates(d: Any, p: MhaProblem, config: RuntimeConfig) -> list[Gate]:
    """Flash: fp16, no attention bias, no mask, H == Hv, flash::is_supported (past allowed)."""
    sm = config.device.sm
    return [
        built_gate(config.build.flash, "USE_FLASH_ATTENTION"), fp16_gate(p), enabled_gate(config.options, "use_flash"),
        no_attention_bias_gate(p), no_mask_gate(p), equal_heads_gate(p),
        Gate("device and head size", flash.supported(d, sm, p.qk_head_size),
             lambda: f"needs sm >= 80, H % 8 == 0 and H <= 256: sm{sm}, H = {p.qk_head_size}"),
    ]


def cudnn_gates(d: Any, p: MhaProblem, config: RuntimeConfig) -> list[Gate]:
    """cuDNN SDPA: fp16, enabled (off by default), mask none or [B], cudnn_sdpa::is_supported
    (its seq_len_kv is T)."""
    sm = config.device.sm
    s, t = p.sequence_length, p.total_sequence_length
    causal_ok = True if not p.is_unidirectional else d.any_(s <= 1, s <= t)
    return [
        fp16_gate(p), enabled_gate(config.options, "use_cudnn"),
        mask_none_or_key_lengths(d, p),
        Gate("device and head sizes", cudnn.supported(d, sm, p.qk_head_size, p.v_head_size),
             lambda: f"needs sm >= 80, H and Hv multiples of 8 and <= 256: sm{sm}, H = {p.qk_head_size}, "
                     f"Hv = {p.v_head_size}"),
        Gate("causal alignment", causal_ok,
             lambda: f"causal attention needs S <= 1 or S <= T (bottom-right alignment, {CUDNN_ASSUMED}): "
                     f"S = {s}, T = {t}"),
    ]


def trt_cross_gates(d: Any, p: MhaProblem, config: RuntimeConfig) -> list[Gate]:
    """TRT fused cross attention: fp16, bidirectional, no mask, bias or cache, BSNH or bias-free
    packed KV, D == Dv, has_fused_cross_attention_kernel(sm, H, L)."""
    sm = config.device.sm
    fmt_ok = p.qkv_format is MhaFormat.SEPARATE or (p.qkv_format is MhaFormat.PACKED_KV and not p.has_bias)
    return [
        built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"), fp16_gate(p), enabled_gate(config.options, "use_trt_cross"), bidirectional_gate(p), no_mask_gate(p),
        no_attention_bias_gate(p), no_cache_gate(p),
        _gate("format", fmt_ok, f"format {p.qkv_format.value}{' with bias' if p.has_bias else ''} is not served"),
        equal_heads_gate(p),
        Gate("cross kernel", trt.cross_supported(d, sm, p.qk_head_size, p.kv_sequence_length),
             lambda: f"no cross-attention kernel for sm{sm}, H = {p.qk_head_size}, L = {p.kv_sequence_length} "
                     f"(sm in {trt.CROSS_SMS}, 0 < H <= {trt.cross_max_head_size(sm)}, "
                     f"L <= {trt.CROSS_MAX_KV_SEQUENCE})"),
    ]


def trt_gates(d: Any, p: MhaProblem, config: RuntimeConfig, runner_valid: Any) -> list[Gate]:
    """The TRT fused runner: fp16, bidirectional, no attention bias, BSNH or packed QKV, no cache,
    mask none or [B], D == Dv, S == L, IsSupported, then IsValid of the normalized S."""
    sm = config.device.sm
    fmt_ok = p.qkv_format in (MhaFormat.SEPARATE, MhaFormat.PACKED_QKV)
    return [
        built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"), fp16_gate(p), enabled_gate(config.options, "use_trt_fused"), bidirectional_gate(p), no_attention_bias_gate(p),
        _gate("format", fmt_ok, f"format {p.qkv_format.value} is not served"), no_cache_gate(p),
        mask_none_or_key_lengths(d, p), equal_heads_gate(p),
        Gate("self attention", p.sequence_length == p.kv_sequence_length,
             lambda: f"self attention only: S = {p.sequence_length}, L = {p.kv_sequence_length}"),
        Gate("runner support", trt.supported(d, sm, p.qk_head_size, p.sequence_length, trt_flash_enabled(p, config)),
             lambda: trt_unsupported(p, sm, trt_flash_enabled(p, config))),
        Gate("runner valid", runner_valid,
             lambda: f"runner for sm{sm}, S = {p.sequence_length} has no loadable cubin (IsValid fails)"),
    ]


def mea_gates(d: Any, p: MhaProblem, config: RuntimeConfig) -> list[Gate]:
    """MEA: long sequence (fp16, or S or L >= the fp32 threshold), attention bias alignment,
    mask none or [3B + 2], has_memory_efficient_attention(sm, fp16, H, Hv) (past allowed)."""
    sm, opts = config.device.sm, config.options
    threshold, multiple = opts.min_seq_mea_fp32, 4 * p.element_size
    mask_ok = True if p.mask_rank == 0 else p.mask_is_start if p.mask_rank == 1 else False
    return [
        built_gate(config.build.mea, "USE_MEMORY_EFFICIENT_ATTENTION"), enabled_gate(opts, "use_efficient"),
        Gate("fp32 sequence threshold",
             d.any_(p.element_size == 2, p.sequence_length >= threshold, p.kv_sequence_length >= threshold),
             lambda: f"fp32 needs S or L >= {threshold}, S = {p.sequence_length}, L = {p.kv_sequence_length}"),
        Gate("attention bias alignment", d.any_(not p.has_attention_bias, d.mod(p.sequence_length, multiple) == 0),
             lambda: f"attention bias needs S % {multiple} == 0, S = {p.sequence_length}"),
        _gate("mask absent or [3B + 2]", mask_ok, "needs no mask or the [3B + 2] key-start mask"),
        Gate("device and head sizes", mea.supported(d, sm, p.element_size == 2, p.qk_head_size, p.v_head_size),
             lambda: f"needs H, Hv multiples of 8 and <= 1024 on sm >= "
                     f"{mea.MIN_SM_FP16 if p.element_size == 2 else mea.MIN_SM_FP32}: sm{sm}, "
                     f"H = {p.qk_head_size}, Hv = {p.v_head_size}"),
    ]


def cascade_gates(d: Any, p: MhaProblem, config: RuntimeConfig, runner_valid: Any) -> list[tuple[Backend, list[Gate]]]:
    """Return MultiHeadAttention's cascade in ORT's order: (backend, gates); unfused has none.
    `runner_valid` is the TRT fused runner's IsValid (the cross-attention kernel's is taken as
    valid wherever it exists)."""
    return [
        (Backend.FLASH, flash_gates(d, p, config)),
        (Backend.CUDNN, cudnn_gates(d, p, config)),
        (Backend.TRT_CROSS, trt_cross_gates(d, p, config)),
        (Backend.TRT, trt_gates(d, p, config, runner_valid)),
        (Backend.MEA, mea_gates(d, p, config)),
        (Backend.UNFUSED, []),
    ]


def output_is_empty(d: Any, p: MhaProblem) -> Any:
    """MultiHeadAttention has no early return for an empty output: it always runs its cascade."""
    return False



def no_route(p: Any) -> str:
    """ORT's error when no backend runs the problem: none, the cascade always ends at the unfused
    fallback ('')."""
    return ""