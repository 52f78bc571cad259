"""MultiHeadAttention's AOT reachability: which backends some runtime shape within the bounds
can take, the problem's dimensions read as upper bounds (B, S, L, P, H, Hv; N is the attribute).

A route is kept unless one of its gates fails for every shape of the range: gates on the flags
(dtype, options, format, mask kind, bias, cache, direction) are exact; gates on dimensions ask
whether some value up to the bound passes. Keeping a route that no shape takes only loosens the
bound; dropping one that some shape takes would under-size, which the solver's `reachability`
theorem looks for.
"""

from __future__ import annotations

from typing import Any

from ..backends import cudnn, flash, mea, trt
from ..domain import CONCRETE as D
from ..gates import (
    Gate, HeadDomain, RouteReachability, built_gate, enabled_gate, fp16_gate, no_attention_bias_gate, verdict,
)
from ..options import RuntimeConfig
from ..problem import Backend
from .dispatch import bidirectional_gate, mask_none_or_key_lengths, no_cache_gate, no_mask_gate
from .problem import MhaFormat, MhaProblem


def _possible(name: str, cond: bool, reason: str) -> Gate:
    return Gate(name, cond, lambda: reason)


def head_bound(p: MhaProblem) -> int:
    """The largest head size some shape with H == Hv can have."""
    return min(p.qk_head_size, p.v_head_size)


def trt_reachable(p: MhaProblem, config: RuntimeConfig) -> bool:
    """Some S = L in [1, min(S, L)] and some head size <= the bound is supported by the runner."""
    seq = min(p.sequence_length, p.kv_sequence_length)
    if seq <= 0:
        return False
    trt_flash = config.options.use_trt_flash
    return any(trt.any_head_supported(D, config.device.sm, head_bound(p), s, trt_flash) for s in (1, seq))


def abi_scope(d: Any, p: MhaProblem, config: RuntimeConfig, backend: Backend) -> Any:
    """Where attnws's estimate sizes a route of its reachable set: at every shape up to the bounds,
    as ORT's ForBounds aggregates size theirs (each route at the maximum geometry, no route gates)."""
    return True


def reachability(p: MhaProblem, config: RuntimeConfig, domain: HeadDomain) -> list[RouteReachability]:
    """Return every MultiHeadAttention backend, in cascade order, with its AOT verdict. The head
    sizes are always upper bounds (the node has no qkv_hidden_sizes), whatever `domain` says."""
    sm, opts, bound = config.device.sm, config.options, head_bound(p)
    cross_fmt = p.qkv_format is MhaFormat.SEPARATE or (p.qkv_format is MhaFormat.PACKED_KV and not p.has_bias)
    routes = {
        Backend.FLASH: [
            built_gate(config.build.flash, "USE_FLASH_ATTENTION"), fp16_gate(p), enabled_gate(opts, "use_flash"),
            no_attention_bias_gate(p), no_mask_gate(p),
            _possible("device and head size", flash.any_head_supported(D, sm, bound),
                      f"needs sm >= 80 and some head size 8..256 <= {bound}: sm{sm}"),
        ],
        Backend.CUDNN: [
            fp16_gate(p), enabled_gate(opts, "use_cudnn"),
            mask_none_or_key_lengths(D, p),
            _possible("device and head sizes", sm // 10 >= cudnn.MIN_SM_MAJOR and min(p.qk_head_size, p.v_head_size) >= 8,
                      f"needs sm >= 80 and head sizes >= 8: sm{sm}"),
        ],
        Backend.TRT_CROSS: [
            built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"), fp16_gate(p), enabled_gate(opts, "use_trt_cross"), bidirectional_gate(p), no_mask_gate(p),
            no_attention_bias_gate(p), no_cache_gate(p),
            _possible("format", cross_fmt, f"format {p.qkv_format.value} is not served"),
            _possible("cross kernel", sm in trt.CROSS_SMS and bound > 0,
                      f"no cross-attention kernel on sm{sm} for head sizes <= {bound}"),
        ],
        Backend.TRT: [
            built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"), fp16_gate(p), enabled_gate(opts, "use_trt_fused"), bidirectional_gate(p), no_attention_bias_gate(p),
            _possible("format", p.qkv_format in (MhaFormat.SEPARATE, MhaFormat.PACKED_QKV),
                      f"format {p.qkv_format.value} is not served"),
            no_cache_gate(p), mask_none_or_key_lengths(D, p),
            _possible("supported head and sequence", trt_reachable(p, config),
                      f"no TRT kernel on sm{sm} for S = L <= {min(p.sequence_length, p.kv_sequence_length)} and "
                      f"head sizes <= {bound}"),
        ],
        Backend.MEA: [
            built_gate(config.build.mea, "USE_MEMORY_EFFICIENT_ATTENTION"), enabled_gate(opts, "use_efficient"),
            _possible("fp32 sequence threshold", p.element_size == 2 or max(p.sequence_length, p.kv_sequence_length)
                      >= opts.min_seq_mea_fp32, f"fp32 needs S or L >= {opts.min_seq_mea_fp32}"),
            _possible("attention bias alignment possible",
                      not p.has_attention_bias or p.sequence_length >= 4 * p.element_size,
                      f"attention bias needs some S <= {p.sequence_length} with S % {4 * p.element_size} == 0"),
            _possible("mask absent or [3B + 2]", p.mask_rank == 0 or (p.mask_rank == 1 and bool(p.mask_is_start)),
                      "needs no mask or the [3B + 2] key-start mask"),
            _possible("device and head sizes",
                      mea.any_head_supported(D, sm, p.element_size == 2, p.qk_head_size, p.v_head_size),
                      f"no supported MEA head sizes on sm{sm} for H = {p.qk_head_size}, Hv = {p.v_head_size}"),
        ],
    }
    return [*(verdict(b, gates) for b, gates in routes.items()), RouteReachability(Backend.UNFUSED, True, "")]
