"""GroupQueryAttention's runtime cascade (`group_query_attention.cc` ComputeInternal and
`QkvToContext` in `group_query_attention_impl.cu`, ORT 1.31.1), as gates.

Order: XQA, cuDNN SDPA, Flash (its single-token fast decode, or the regular route), MEA,
unfused; when none runs, ORT fails ("No available GroupQueryAttention kernel supports the
quantized KV cache." for a quantized cache, else "Unfused Group Query Attention not implemented
yet."). The facts and their sources are `docs/research/gqa-inputs-dispatch.md` §3 (rebuilt from
the binary's strings and the newest stored sources; no 1.31.1 copy of the file is stored).
Not modelled, each named: XQA's shared-memory probe (taken to fit), per-channel XQA (its gate
is not read: XQA is taken as off for per-channel scales), XQA's check that k_scale and v_scale
are one tensor (taken as given), and cuDNN's run-time library (cuDNN >= 9.6 and stable assumed,
`ort_version.CUDNN_ASSUMED`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends import cudnn, flash, mea
from ..domain import CONCRETE
from ..gates import Gate, enabled_gate, first_open, no_attention_bias_gate
from ..options import ENV_ENABLE_XQA, RuntimeConfig
from ..problem import Backend
from .problem import GqaProblem, KvQuantization
from .recipe import XQA_GROUPS, XQA_HEAD_SIZES, XQA_QUANTIZED_GROUPS, Route, route_of

QUANTIZED_NO_ROUTE = "No available GroupQueryAttention kernel supports the quantized KV cache."
NO_ROUTE = "Unfused Group Query Attention not implemented yet."


def _gate(name: str, cond: Any, reason: str) -> Gate:
    return Gate(name, cond, lambda: reason)


def decode_step(d: Any, p: GqaProblem) -> Any:
    """A single new token after the prompt, appended in place (XQA's and fast decode's shape)."""
    return d.all_(p.sequence_length == 1, d.not_(p.is_first_prompt(d)))


def _group_supported(d: Any, p: GqaProblem, groups: tuple[int, ...]) -> Any:
    return d.any_(*(p.num_heads == d.mul(g, p.kv_num_heads, what="XQA group g * Nk") for g in groups))


def xqa_gates(d: Any, p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    sm = config.device.sm
    per_tensor = p.k_quantization is KvQuantization.PER_TENSOR and p.v_quantization is KvQuantization.PER_TENSOR
    quant_ok = (not p.quantized or (per_tensor and p.kv_cache_bit_width == 8
                                    and (not p.cache_is_fp8 or sm == 89 or sm >= 90)))
    groups = XQA_QUANTIZED_GROUPS if p.quantized else XQA_GROUPS
    return [
        _gate("enabled", config.options.use_xqa, f"disabled by {ENV_ENABLE_XQA}=0"),
        _gate("causal", p.causal, "needs causal attention"), no_attention_bias_gate(p),
        _gate("device", sm // 10 >= 8, f"needs sm >= 80: sm{sm}"),
        Gate("decode step", decode_step(d, p),
             lambda: f"needs one new token after the prompt: S = {p.sequence_length}, T = {p.total_sequence_length}"),
        Gate("new key/value", p.kv_sequence_length > 0, lambda: "shared KV step (no new key/value)"),
        _gate("shared buffer", p.kv_share_buffer, "past and present do not share one buffer"),
        _gate("no softcap", p.softcap == 0, f"softcap = {p.softcap}"),
        _gate("QK-norm", not (p.use_qk_norm and p.quantized), "QK-norm with a quantized cache"),
        _gate("smooth softmax", (not p.smooth_softmax or p.has_head_sink) and not (p.has_head_sink and p.quantized),
              "smooth softmax without a head sink, or a head sink with a quantized cache"),
        _gate("cache type", quant_ok, "the cache is not fp16 / bf16, per-tensor int8, or per-tensor fp8 on sm89+"),
        Gate("head size", d.member(p.head_size, XQA_HEAD_SIZES),
             lambda: f"needs H in {XQA_HEAD_SIZES}: H = {p.head_size}"),
        Gate("group size", _group_supported(d, p, groups),
             lambda: f"needs N / Nk in {groups}: N = {p.num_heads}, Nk = {p.kv_num_heads}"),
    ]


def cudnn_gates(d: Any, p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    sm, opts = config.device.sm, config.options
    on = opts.use_cudnn or (opts.cudnn_auto and sm // 10 >= 9)
    why = ("off (needs ORT_ENABLE_CUDNN_FLASH_ATTENTION=1 or sdpa_kernel bit 8, or sm >= 90 without sdpa_kernel "
           "and without ORT_ENABLE_CUDNN_FLASH_ATTENTION=0)")
    return [
        _gate("enabled", on, why), no_attention_bias_gate(p),
        _gate("unquantized", not p.quantized, "quantized cache"),
        _gate("no softcap", p.softcap == 0, f"softcap = {p.softcap}"),
        _gate("plain softmax", not p.use_smooth_softmax, "smooth softmax or head sink"),
        _gate("no window", p.local_window_size == -1, f"local window {p.local_window_size}"),
        Gate("device and head size", cudnn.supported(d, sm, p.head_size, p.head_size),
             lambda: f"needs sm >= 80, H % 8 == 0 and H <= 256: sm{sm}, H = {p.head_size}"),
        Gate("causal alignment", d.any_(p.sequence_length <= 1, p.sequence_length <= p.present_capacity(d)),
             lambda: f"causal attention needs S <= C: S = {p.sequence_length}"),
    ]


def flash_gates(d: Any, p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    sm = config.device.sm
    return [
        enabled_gate(config.options, "use_flash"), no_attention_bias_gate(p),
        Gate("device and head size", flash.supported(d, sm, p.head_size),
             lambda: f"needs sm >= 80, H % 8 == 0 and H <= 256: sm{sm}, H = {p.head_size}"),
    ]


def mea_gates(d: Any, p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    sm = config.device.sm
    return [
        enabled_gate(config.options, "use_efficient"), no_attention_bias_gate(p),
        _gate("unquantized", not p.quantized, "quantized cache"),
        Gate("device and head size", mea.supported(d, sm, True, p.head_size, p.head_size, p.is_bf16),
             lambda: f"needs H % 8 == 0, H <= 1024 on sm >= {mea.MIN_SM_BF16 if p.is_bf16 else mea.MIN_SM_FP16} "
                     f"({'bf16' if p.is_bf16 else 'fp16'}): sm{sm}, H = {p.head_size}"),
    ]


def unfused_gates(p: GqaProblem) -> list[Gate]:
    return [_gate("unquantized", not p.quantized, "quantized cache"),
            _gate("plain softmax", not p.use_smooth_softmax, "smooth softmax or head sink")]


def cascade_gates(d: Any, p: GqaProblem, config: RuntimeConfig, runner_valid: Any = None) -> list[tuple[Backend, list[Gate]]]:
    """GroupQueryAttention's cascade in ORT's order: (backend, gates). It has no TRT runner:
    `runner_valid` does not apply."""
    return [
        (Backend.XQA, xqa_gates(d, p, config)), (Backend.CUDNN, cudnn_gates(d, p, config)),
        (Backend.FLASH, flash_gates(d, p, config)), (Backend.MEA, mea_gates(d, p, config)),
        (Backend.UNFUSED, unfused_gates(p)),
    ]


def output_is_empty(d: Any, p: GqaProblem) -> Any:
    """GroupQueryAttention has no early return for an empty output: its builder refuses a zero
    batch or sequence, and the cascade always runs."""
    return False


def no_route(p: GqaProblem) -> str:
    """ORT's error when no backend of the cascade runs the problem."""
    return QUANTIZED_NO_ROUTE if p.quantized else NO_ROUTE


@dataclass(frozen=True)
class Selection:
    """The route ORT takes for a concrete problem (None when none runs: `failure` says ORT's
    error), and why each earlier backend was passed over."""

    route: Route | None
    skipped: tuple[tuple[Backend, str], ...]
    failure: str = ""


def select(p: GqaProblem, config: RuntimeConfig | None = None) -> Selection:
    """Return the route ORT's cascade picks for the concrete problem p."""
    config = config or RuntimeConfig()
    backend, skipped = first_open(cascade_gates(CONCRETE, p, config))
    if backend is None:
        return Selection(None, tuple(skipped), no_route(p))
    return Selection(route_of(CONCRETE, p, config, backend), tuple(skipped))
