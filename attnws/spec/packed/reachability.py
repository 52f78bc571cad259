"""The packed family's AOT reachability: which backends some valid runtime shape within the bounds can take.

Mirrors ONNX Runtime's GetPackedAttentionReachableBackendsForBounds and
GetPackedMultiHeadAttentionReachableBackendsForBounds. The problem's geometry is read as upper
bounds. Unfused is always kept (nobody proves it unreachable); TRT is probed at S = 1 and at the
bound, which covers the down-closed XMMA regime (S <= 384) and the up-closed TRT-flash regime
(S >= 385). PA head sizes are exact when the node carries `qkv_hidden_sizes`; otherwise, and
always for PMHA, head sizes are upper bounds and a route is kept if some smaller head qualifies.
"""

from __future__ import annotations

from typing import Any

from ..backends import flash, mea, trt
from ..domain import CONCRETE as D
from ..gates import (
    Gate, HeadDomain, RouteReachability, built_gate, enabled_gate, fp16_gate, no_attention_bias_gate, verdict,
)
from ..options import RuntimeConfig
from ..problem import Backend, Op
from .problem import Problem, QkvFormat


def trt_route_reachable(p: Problem, domain: HeadDomain, config: RuntimeConfig) -> bool:
    """IsTrtRouteReachable: some S in [1, S_bound] and some admissible head size is supported."""
    sm, trt_flash, seq = config.device.sm, config.options.use_trt_flash, p.sequence_length
    if seq <= 0:
        return False
    if domain is HeadDomain.EXACT:
        h = p.qk_head_size
        return h == p.v_head_size and (
            trt.supported(D, sm, h, 1, trt_flash) or trt.supported(D, sm, h, seq, trt_flash)
        )
    bound = min(p.qk_head_size, p.v_head_size)
    return trt.any_head_supported(D, sm, bound, 1, trt_flash) or trt.any_head_supported(
        D, sm, bound, seq, trt_flash
    )


def _bias_alignment_possible(p: Problem) -> Gate:
    multiple = 4 * p.element_size
    return Gate(
        "attention bias alignment possible",
        not p.has_attention_bias or p.sequence_length >= multiple,
        lambda: f"attention bias needs some S <= {p.sequence_length} with S % {multiple} == 0",
    )


def _trt_gates(p: Problem, domain: HeadDomain, config: RuntimeConfig) -> list[Gate]:
    return [
        built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"),
        fp16_gate(p),
        enabled_gate(config.options, "use_trt_fused"),
        no_attention_bias_gate(p),
        Gate("supported head and sequence", trt_route_reachable(p, domain, config),
             lambda: (f"no supported TRT kernel on sm{config.device.sm} for S in [1, {p.sequence_length}] and "
                      f"{'H = ' + str(p.qk_head_size) if domain is HeadDomain.EXACT else 'head sizes <= ' + str(min(p.qk_head_size, p.v_head_size))}")),
    ]


def _mea_gates(p: Problem, domain: HeadDomain, config: RuntimeConfig) -> list[Gate]:
    sm, opts, is_half = config.device.sm, config.options, p.element_size == 2
    gates = [built_gate(config.build.mea, "USE_MEMORY_EFFICIENT_ATTENTION")]
    if p.op is Op.PMHA:
        gates.append(enabled_gate(opts, "use_efficient"))
    gates.append(_bias_alignment_possible(p))
    if p.op is Op.PA:
        gates.append(fp16_gate(p, "PA "))
    else:
        gates.append(Gate("fp32 sequence threshold", is_half or p.sequence_length >= opts.min_seq_mea_fp32,
                          lambda: f"fp32 needs S >= {opts.min_seq_mea_fp32}, S bound = {p.sequence_length}"))
    if domain is HeadDomain.EXACT:
        heads = mea.supported(D, sm, is_half, p.qk_head_size, p.v_head_size)
    else:
        heads = mea.any_head_supported(D, sm, is_half, p.qk_head_size, p.v_head_size)
    gates.append(Gate("device and head sizes", heads,
                      lambda: f"no supported MEA head sizes on sm{sm} for H = {p.qk_head_size}, Hv = {p.v_head_size}"))
    return gates


def _flash_gates(p: Problem, config: RuntimeConfig) -> list[Gate]:
    sm, opts = config.device.sm, config.options
    bound = min(p.qk_head_size, p.v_head_size)
    gates = [
        built_gate(config.build.flash, "USE_FLASH_ATTENTION"),
        fp16_gate(p),
        enabled_gate(opts, "use_flash"),
        no_attention_bias_gate(p),
        Gate("device and head size", bound > 0 and flash.any_head_supported(D, sm, bound),
             lambda: f"needs sm >= 80 and some head size 8..256 <= {bound}: sm{sm}"),
    ]
    if p.qkv_format is QkvFormat.PACKED:
        gates.append(Gate("packed QKV sequence threshold", p.sequence_length >= opts.min_seq_flash_packed_qkv,
                          lambda: f"packed QKV needs S >= {opts.min_seq_flash_packed_qkv}, S bound = {p.sequence_length}"))
    return gates


def abi_scope(d: Any, p: Problem, config: RuntimeConfig, backend: Backend) -> Any:
    """Where ORT's estimate sizes a route of its reachable set: at every shape up to the bounds
    (the ForBounds aggregate sizes each route at the maximum geometry without its route gates)."""
    return True


def reachability(p: Problem, config: RuntimeConfig, domain: HeadDomain) -> list[RouteReachability]:
    """Return every backend of the operator, in ORT's order, with its AOT reachability verdict."""
    out: list[RouteReachability] = []
    if p.op is Op.PMHA:
        out.append(verdict(Backend.FLASH, _flash_gates(p, config)))
    out.append(verdict(Backend.TRT, _trt_gates(p, domain, config)))
    out.append(verdict(Backend.MEA, _mea_gates(p, domain, config)))
    out.append(RouteReachability(Backend.UNFUSED, True, ""))
    return out
