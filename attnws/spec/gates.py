"""The vocabulary of every family's dispatch cascade and AOT reachability: a `Gate` is one
condition of a backend's eligibility with the reason shown when it fails; the gates every family
uses (fp16, enabled, built, no attention bias), the TRT runner's validity, and a route's AOT
verdict (`RouteReachability`) with the head-size reading it was made under (`HeadDomain`), and
a route's run-time error once dispatch picked it (`Failure`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from .backends import trt
from .errors import InternalError
from .limits import TRT_FLASH_MIN_SEQUENCE
from .options import RuntimeConfig, TrtRunner
from .problem import Backend


@dataclass(frozen=True)
class Gate:
    """One condition of a backend's eligibility and the explanation shown when it fails."""

    name: str
    cond: Any
    reason: Callable[[], str]


def fp16_gate(p: Any, who: str = "") -> Gate:
    """The backend runs fp16 only."""
    return Gate("fp16", p.element_size == 2, lambda: f"{who}needs fp16, element size = {p.element_size}")


def enabled_gate(options: Any, flag: str) -> Gate:
    """The kernel options enable the backend (`flag`: its KernelOptions field, use_flash, ...)."""
    return Gate("enabled", getattr(options, flag), lambda: options.disabled_reason(flag))


def no_attention_bias_gate(p: Any) -> Gate:
    """The backend takes no attention bias."""
    return Gate("no attention bias", not p.has_attention_bias, lambda: "attention bias present")


def built_gate(built: bool, macro: str) -> Gate:
    """The ORT build compiled the backend in."""
    return Gate("built", built, lambda: f"not compiled in ({macro} off)")


def equal_heads_gate(p: Any) -> Gate:
    """The backend needs the Q/K and V head sizes equal."""
    return Gate("equal head sizes", p.qk_head_size == p.v_head_size,
                lambda: f"needs H == Hv, H = {p.qk_head_size}, Hv = {p.v_head_size}")


def trt_unsupported(p: Any, sm: int, trt_flash: bool) -> str:
    """Return why the TRT runner supports no kernel for (sm, H, S), naming the table entries."""
    xmma, flash = trt.XMMA_HEAD_SIZES.get(sm, ()), trt.FLASH_HEAD_SIZES.get(sm, ())
    if not xmma and not flash:
        return f"no TRT kernel for sm{sm}: ORT's TRT fused kernels are built for sm{', sm'.join(map(str, sorted(trt.XMMA_HEAD_SIZES)))} only"
    return (f"no TRT kernel for sm{sm}, H = {p.qk_head_size}, S = {p.sequence_length} "
            f"(XMMA: H in {{{', '.join(map(str, xmma))}}} and S <= 384; TRT-flash "
            f"{'enabled' if trt_flash else 'disabled'}: H in {{{', '.join(map(str, flash))}}} "
            f"and S >= {TRT_FLASH_MIN_SEQUENCE})")


def trt_flash_enabled(p: Any, config: RuntimeConfig) -> bool:
    """Return whether the TRT runner may use its flash kernels (fp16 and TRT flash enabled)."""
    return p.element_size == 2 and config.options.use_trt_flash


def runner_validity(d: Any, p: Any, config: RuntimeConfig) -> Any:
    """Return whether the TRT runner is valid for the shape (FusedMHARunnerFP16v2::IsValid): from
    the kernel tables (auto) or as configured. `unknown` has no single answer; callers evaluate both.
    A family without the runner (PagedAttention) has none to be valid."""
    from .families import family_backends  # the registry loads the families, which import this module

    if Backend.TRT not in family_backends(p.op):
        return False
    if config.trt_runner is TrtRunner.AUTO:
        return trt.runner_valid(d, config.device.sm, p.sequence_length, trt_flash_enabled(p, config))
    if config.trt_runner is TrtRunner.UNKNOWN:
        raise InternalError("runner_validity called for an unknown runner; evaluate both outcomes")
    return config.trt_runner is TrtRunner.AVAILABLE


def first_open(cascade: list[tuple[Backend, list[Gate]]]) -> tuple[Backend | None, list[tuple[Backend, str]]]:
    """Return the first backend of a concrete cascade whose gates all hold (None when none does)
    and why each earlier one was passed over, in words: its first failing gate's reason."""
    skipped: list[tuple[Backend, str]] = []
    for backend, gates in cascade:
        failing = next((g for g in gates if not g.cond), None)
        if failing is None:
            return backend, skipped
        skipped.append((backend, f"{backend.value}: {failing.reason()}"))
    return None, skipped


class HeadDomain(enum.Enum):
    """Whether head sizes are the runtime values (exact) or upper bounds."""

    EXACT = "exact"
    UPPER_BOUND = "upper_bound"


@dataclass(frozen=True)
class RouteReachability:
    """One backend's AOT verdict and, when unreachable, the first failing condition."""

    backend: Backend
    reachable: bool
    reason: str = ""


def verdict(backend: Backend, gates: list[Gate]) -> RouteReachability:
    """Return the route's verdict: reachable when every gate holds, else the first failing gate's reason."""
    failing = next((g for g in gates if not g.cond), None)
    if failing is None:
        return RouteReachability(backend, True)
    return RouteReachability(backend, False, failing.reason())


@dataclass(frozen=True)
class Failure:
    """One run-time error of a route: its kind, when it happens, and ORT's message for a shape."""

    kind: str
    cond: Any
    message: Callable[[], str]
