"""The packed family's dispatch cascade: which backend PackedAttention and PackedMultiHeadAttention
run for a concrete problem. PA: TRT, MEA, unfused. PMHA: Flash, TRT, MEA, unfused. Each backend's
eligibility is a list of gates in the order ORT tests them; a zero-element output returns before
any allocation.
"""

from __future__ import annotations

from typing import Any

from ..backends import flash, mea, trt
from ..gates import (
    Gate, built_gate, enabled_gate, equal_heads_gate, fp16_gate, no_attention_bias_gate, trt_flash_enabled,
    trt_unsupported,
)
from ..options import RuntimeConfig
from ..problem import Backend, Op
from .problem import Problem, QkvFormat


def _bias_alignment(d: Any, p: Problem) -> Gate:
    multiple = 4 * p.element_size
    return Gate(
        "attention bias alignment",
        d.any_(not p.has_attention_bias, d.mod(p.sequence_length, multiple) == 0),
        lambda: f"attention bias needs S % {multiple} == 0, S = {p.sequence_length}",
    )


def trt_gates(d: Any, p: Problem, config: RuntimeConfig, runner_valid: Any) -> list[Gate]:
    """Gates of the TRT fused runner (TrtFusedAttention::GetFusedRunner), shared by PA and PMHA."""
    sm, opts = config.device.sm, config.options
    trt_flash = trt_flash_enabled(p, config)
    return [
        built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"),
        fp16_gate(p),
        enabled_gate(opts, "use_trt_fused"),
        no_attention_bias_gate(p),
        equal_heads_gate(p),
        Gate("runner support", trt.supported(d, sm, p.qk_head_size, p.sequence_length, trt_flash),
             lambda: trt_unsupported(p, sm, trt_flash)),
        Gate("runner valid", runner_valid,
             lambda: f"runner for sm{sm}, S = {p.sequence_length} has no loadable cubin (IsValid fails)"),
    ]


def flash_gates(d: Any, p: Problem, config: RuntimeConfig) -> list[Gate]:
    """Gates of PMHA's Flash route."""
    sm, opts = config.device.sm, config.options
    gates = [
        built_gate(config.build.flash, "USE_FLASH_ATTENTION"),
        fp16_gate(p),
        enabled_gate(opts, "use_flash"),
        no_attention_bias_gate(p),
        equal_heads_gate(p),
        Gate("device and head size", flash.supported(d, sm, p.qk_head_size),
             lambda: f"needs sm >= 80, H % 8 == 0 and H <= 256: sm{sm}, H = {p.qk_head_size}"),
    ]
    if p.qkv_format is QkvFormat.PACKED:
        threshold = opts.min_seq_flash_packed_qkv
        gates.append(Gate("packed QKV sequence threshold", p.sequence_length >= threshold,
                          lambda: f"packed QKV needs S >= {threshold}, S = {p.sequence_length}"))
    return gates


def mea_gates(d: Any, p: Problem, config: RuntimeConfig) -> list[Gate]:
    """Gates of the MEA route (PA does not consult UseEfficientAttention and is fp16-only)."""
    sm, opts = config.device.sm, config.options
    gates = [built_gate(config.build.mea, "USE_MEMORY_EFFICIENT_ATTENTION")]
    if p.op is Op.PMHA:
        gates.append(enabled_gate(opts, "use_efficient"))
    gates.append(_bias_alignment(d, p))
    if p.op is Op.PA:
        gates.append(fp16_gate(p, "PA "))
    else:
        threshold = opts.min_seq_mea_fp32
        gates.append(Gate("fp32 sequence threshold", d.any_(p.element_size == 2, p.sequence_length >= threshold),
                          lambda: f"fp32 needs S >= {threshold}, S = {p.sequence_length}"))
    gates.append(Gate("device and head sizes",
                      mea.supported(d, sm, p.element_size == 2, p.qk_head_size, p.v_head_size),
                      lambda: (f"needs H, Hv multiples of 8 and <= 1024 on sm >= "
                               f"{mea.MIN_SM_FP16 if p.element_size == 2 else mea.MIN_SM_FP32}: "
                               f"sm{sm}, H = {p.qk_head_size}, Hv = {p.v_head_size}")))
    return gates


def cascade_gates(d: Any, p: Problem, config: RuntimeConfig, runner_valid: Any) -> list[tuple[Backend, list[Gate]]]:
    """Return the cascade in ORT's order: (backend, gates) pairs; unfused has no gates."""
    routes: list[tuple[Backend, list[Gate]]] = []
    if p.op is Op.PMHA:
        routes.append((Backend.FLASH, flash_gates(d, p, config)))
    routes.append((Backend.TRT, trt_gates(d, p, config, runner_valid)))
    routes.append((Backend.MEA, mea_gates(d, p, config)))
    routes.append((Backend.UNFUSED, []))
    return routes


def output_is_empty(d: Any, p: Problem) -> Any:
    """Return whether the output [T, N*Hv] has zero elements (ORT returns before allocating)."""
    return d.any_(p.token_count == 0, p.v_hidden_size == 0)


def no_route(p: Any) -> str:
    """ORT's error when no backend runs the problem: none, the cascade always ends at the unfused
    fallback ('')."""
    return ""


