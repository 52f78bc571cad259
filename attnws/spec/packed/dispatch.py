"""The runtime dispatch model: which backend ONNX Runtime picks for a concrete problem.

Each backend's eligibility is a list of gates (condition plus the reason shown when it fails),
in the order the cascade tests them. `cascade_gates` is shared: `dispatch` evaluates it
concretely and explains every skipped backend; the solver evaluates the same gates over symbolic
shapes. PA: TRT, MEA, unfused. PMHA: Flash, TRT, MEA, unfused. A zero-element output returns
before any allocation. Where the choice depends on whether the TRT runner's cubin loads and the
configuration says `unknown`, every backend it could lead to is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .backends import flash, mea, trt
from .domain import CONCRETE
from .errors import InternalError
from .limits import TRT_FLASH_MIN_SEQUENCE
from .options import RuntimeConfig, TrtRunner
from .problem import Backend, Op, Problem, QkvFormat
from .runtime_failures import route_failures


@dataclass(frozen=True)
class Gate:
    """One condition of a backend's eligibility and the explanation shown when it fails."""

    name: str
    cond: Any
    reason: Callable[[], str]


def fp16_gate(p: Problem, who: str = "") -> Gate:
    """The backend runs fp16 only."""
    return Gate("fp16", p.element_size == 2, lambda: f"{who}needs fp16, element size = {p.element_size}")


def enabled_gate(options: Any, flag: str) -> Gate:
    """The kernel options enable the backend (`flag`: its KernelOptions field, use_flash, ...)."""
    return Gate("enabled", getattr(options, flag), lambda: options.disabled_reason(flag))


def no_attention_bias_gate(p: Problem) -> Gate:
    """The backend takes no attention bias."""
    return Gate("no attention bias", not p.has_attention_bias, lambda: "attention bias present")


def built_gate(built: bool, macro: str) -> Gate:
    """The ORT build compiled the backend in."""
    return Gate("built", built, lambda: f"not compiled in ({macro} off)")


def _bias_alignment(d: Any, p: Problem) -> Gate:
    multiple = 4 * p.element_size
    return Gate(
        "attention bias alignment",
        d.any_(not p.has_attention_bias, d.mod(p.sequence_length, multiple) == 0),
        lambda: f"attention bias needs S % {multiple} == 0, S = {p.sequence_length}",
    )


def _trt_unsupported(p: Problem, sm: int, trt_flash: bool) -> str:
    """Return why the TRT runner supports no kernel for (sm, H, S), naming the table entries."""
    xmma, flash = trt.XMMA_HEAD_SIZES.get(sm, ()), trt.FLASH_HEAD_SIZES.get(sm, ())
    if not xmma and not flash:
        return f"no TRT kernel for sm{sm}: ORT's TRT fused kernels are built for sm{', sm'.join(map(str, sorted(trt.XMMA_HEAD_SIZES)))} only"
    return (f"no TRT kernel for sm{sm}, H = {p.qk_head_size}, S = {p.sequence_length} "
            f"(XMMA: H in {{{', '.join(map(str, xmma))}}} and S <= 384; TRT-flash "
            f"{'enabled' if trt_flash else 'disabled'}: H in {{{', '.join(map(str, flash))}}} "
            f"and S >= {TRT_FLASH_MIN_SEQUENCE})")


def trt_gates(d: Any, p: Problem, config: RuntimeConfig, runner_valid: Any) -> list[Gate]:
    """Gates of the TRT fused runner (TrtFusedAttention::GetFusedRunner), shared by PA and PMHA."""
    sm, opts = config.device.sm, config.options
    trt_flash = p.element_size == 2 and opts.use_trt_flash
    return [
        built_gate(config.build.trt, "USE_TRT_FUSED_ATTENTION"),
        fp16_gate(p),
        enabled_gate(opts, "use_trt_fused"),
        no_attention_bias_gate(p),
        Gate("equal head sizes", p.qk_head_size == p.v_head_size,
             lambda: f"needs H == Hv, H = {p.qk_head_size}, Hv = {p.v_head_size}"),
        Gate("runner support", trt.supported(d, sm, p.qk_head_size, p.sequence_length, trt_flash),
             lambda: _trt_unsupported(p, sm, trt_flash)),
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
        Gate("equal head sizes", p.qk_head_size == p.v_head_size,
             lambda: f"needs H == Hv, H = {p.qk_head_size}, Hv = {p.v_head_size}"),
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


def trt_flash_enabled(p: Problem, config: RuntimeConfig) -> bool:
    """Return whether the TRT runner may use its flash kernels (fp16 and TRT flash enabled)."""
    return p.element_size == 2 and config.options.use_trt_flash


def runner_validity(d: Any, p: Problem, config: RuntimeConfig) -> Any:
    """Return whether the TRT runner is valid for the shape (FusedMHARunnerFP16v2::IsValid): from
    the kernel tables (auto) or as configured. `unknown` has no single answer; callers evaluate both."""
    if config.trt_runner is TrtRunner.AUTO:
        return trt.runner_valid(d, config.device.sm, p.sequence_length, trt_flash_enabled(p, config))
    if config.trt_runner is TrtRunner.UNKNOWN:
        raise InternalError("runner_validity called for an unknown runner; evaluate both outcomes")
    return config.trt_runner is TrtRunner.AVAILABLE


def cascade_gates(d: Any, p: Problem, config: RuntimeConfig, runner_valid: Any) -> list[tuple[Backend, list[Gate]]]:
    """Return the cascade in ORT's order: (backend, gates) pairs; unfused has no gates.
    MultiHeadAttention has its own cascade (`attnws.spec.mha.dispatch`)."""
    if p.op is Op.MHA:
        from .mha.dispatch import mha_cascade_gates

        return mha_cascade_gates(d, p, config, runner_valid)
    routes: list[tuple[Backend, list[Gate]]] = []
    if p.op is Op.PMHA:
        routes.append((Backend.FLASH, flash_gates(d, p, config)))
    routes.append((Backend.TRT, trt_gates(d, p, config, runner_valid)))
    routes.append((Backend.MEA, mea_gates(d, p, config)))
    routes.append((Backend.UNFUSED, []))
    return routes


def output_is_empty(d: Any, p: Problem) -> Any:
    """Return whether the output [T, N*Hv] has zero elements (ORT returns before allocating).
    MultiHeadAttention has no such early return: it always runs its cascade."""
    if p.op is Op.MHA:
        return False
    return d.any_(p.token_count == 0, p.v_hidden_size == 0)


@dataclass(frozen=True)
class Dispatch:
    """The outcome of ORT's runtime dispatch for one concrete problem.

    `backends` holds the backend ORT picks, or several when the TRT runner's validity is unknown
    (TRT first, then the fallback); it is empty when the output is empty. `skipped` explains each
    backend the cascade passed over, in order. `failure` is set when ORT then fails at run time:
    the backend picked has no kernel for the shape.
    """

    problem: Problem
    backends: tuple[Backend, ...]
    skipped: tuple[tuple[Backend, str], ...] = field(default=())
    empty: bool = False
    failure: str = ""
    failure_kind: str = ""

    @property
    def backend(self) -> Backend | None:
        """The single backend ORT picks, or None when the output is empty or the runner unknown."""
        return self.backends[0] if len(self.backends) == 1 else None


def _first_eligible(p: Problem, config: RuntimeConfig, runner_valid: bool) -> tuple[Backend, list[tuple[Backend, str]]]:
    skipped: list[tuple[Backend, str]] = []
    for backend, gates in cascade_gates(CONCRETE, p, config, runner_valid):
        failing = next((g for g in gates if not g.cond), None)
        if failing is None:
            return backend, skipped
        skipped.append((backend, f"{backend.value}: {failing.reason()}"))
    raise InternalError("the cascade ended without the unfused fallback")


def launch_failure(p: Problem, config: RuntimeConfig, backends: tuple[Backend, ...]) -> tuple[str, str]:
    """Return (kind, why) ORT fails at run time on the route(s) it picked for p (('', '') when it
    runs); the kinds are those of `attnws.spec.runtime_failures`."""
    for backend in backends:
        failed = next((f for f in route_failures(CONCRETE, p, config, backend) if f.cond), None)
        if failed is not None:
            prefix = "ORT fails at run time" if len(backends) == 1 else f"ORT fails at run time if it takes {backend.value}"
            return failed.kind, f"{prefix}: {failed.message()}; Run returns an error and nothing falls back"
    return "", ""


def dispatch(p: Problem, config: RuntimeConfig | None = None) -> Dispatch:
    """Return the backend(s) ORT's runtime cascade picks for the concrete problem p."""
    config = config or RuntimeConfig()
    if output_is_empty(CONCRETE, p):
        return Dispatch(p, (), (), empty=True)
    if config.trt_runner is not TrtRunner.UNKNOWN:
        chosen, skipped = _first_eligible(p, config, runner_validity(CONCRETE, p, config))
        kind, failure = launch_failure(p, config, (chosen,))
        return Dispatch(p, (chosen,), tuple(skipped), failure=failure, failure_kind=kind)
    with_runner, skipped = _first_eligible(p, config, True)
    without_runner, skipped_without = _first_eligible(p, config, False)
    picked = (with_runner,) if with_runner is without_runner else (with_runner, without_runner)
    fallback_note = [] if len(picked) == 1 else [(b, r) for b, r in skipped_without if b is Backend.TRT]
    kind, failure = launch_failure(p, config, picked)
    return Dispatch(p, picked, tuple(skipped + fallback_note), failure=failure, failure_kind=kind)
