"""The runtime dispatch model: which backend ONNX Runtime picks for a concrete problem.

Each family states its cascade as gates (`attnws.spec.<family>.dispatch.cascade_gates`): per
backend, in the order ORT tests them, conditions with the reason shown when one fails.
`dispatch` evaluates them concretely and explains every skipped backend; the solver evaluates the
same gates over symbolic shapes. Where the choice depends on whether the TRT runner's cubin loads
and the configuration says `unknown`, every backend it could lead to is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .domain import CONCRETE
from .errors import InternalError
from .families import family_of
from .gates import Gate, first_open, runner_validity
from .options import RuntimeConfig, TrtRunner
from .problem import Backend
from .runtime_failures import route_failures


def cascade_gates(d: Any, p: Any, config: RuntimeConfig, runner_valid: Any) -> list[tuple[Backend, list[Gate]]]:
    """Return the problem's family cascade in ORT's order: (backend, gates) pairs."""
    return family_of(p.op).dispatch.cascade_gates(d, p, config, runner_valid)


def output_is_empty(d: Any, p: Any) -> Any:
    """Return whether ORT returns before any allocation because the output has no elements."""
    return family_of(p.op).dispatch.output_is_empty(d, p)


@dataclass(frozen=True)
class Dispatch:
    """The outcome of ORT's runtime dispatch for one concrete problem.

    `backends` holds the backend ORT picks, or several when the TRT runner's validity is unknown
    (TRT first, then the fallback); it is empty when the output is empty. `skipped` explains each
    backend the cascade passed over, in order. `failure` is set when ORT then fails at run time:
    the backend picked has no kernel for the shape.
    """

    problem: Any
    backends: tuple[Backend, ...]
    skipped: tuple[tuple[Backend, str], ...] = field(default=())
    empty: bool = False
    failure: str = ""
    failure_kind: str = ""

    @property
    def backend(self) -> Backend | None:
        """The single backend ORT picks, or None when the output is empty or the runner unknown."""
        return self.backends[0] if len(self.backends) == 1 else None


def _first_eligible(p: Any, config: RuntimeConfig, runner_valid: bool) -> tuple[Backend | None, list[tuple[Backend, str]]]:
    """Return the first backend whose gates hold (None when none does) and why each earlier one
    was passed over."""
    return first_open(cascade_gates(CONCRETE, p, config, runner_valid))


def _no_route(p: Any, skipped: list[tuple[Backend, str]]) -> Dispatch:
    """The dispatch of a problem no backend runs: ORT's error (GroupQueryAttention's cascade may
    end so; the others always end at the unfused fallback)."""
    message = family_of(p.op).dispatch.no_route(p)
    if not message:
        raise InternalError("the cascade ended without the unfused fallback")
    return Dispatch(p, (), tuple(skipped), failure=f"ORT fails at run time: {message}", failure_kind="no_route")


def launch_failure(p: Any, config: RuntimeConfig, backends: tuple[Backend, ...]) -> tuple[str, str]:
    """Return (kind, why) ORT fails at run time on the route(s) it picked for p (('', '') when it
    runs); the kinds are those of `attnws.spec.runtime_failures`."""
    for backend in backends:
        failed = next((f for f in route_failures(CONCRETE, p, config, backend) if f.cond), None)
        if failed is not None:
            prefix = "ORT fails at run time" if len(backends) == 1 else f"ORT fails at run time if it takes {backend.value}"
            return failed.kind, f"{prefix}: {failed.message()}; Run returns an error and nothing falls back"
    return "", ""


def dispatch(p: Any, config: RuntimeConfig | None = None) -> Dispatch:
    """Return the backend(s) ORT's runtime cascade picks for the concrete problem p."""
    config = config or RuntimeConfig()
    if output_is_empty(CONCRETE, p):
        return Dispatch(p, (), (), empty=True)
    if config.trt_runner is not TrtRunner.UNKNOWN:
        chosen, skipped = _first_eligible(p, config, runner_validity(CONCRETE, p, config))
        if chosen is None:
            return _no_route(p, skipped)
        kind, failure = launch_failure(p, config, (chosen,))
        return Dispatch(p, (chosen,), tuple(skipped), failure=failure, failure_kind=kind)
    with_runner, skipped = _first_eligible(p, config, True)
    without_runner, skipped_without = _first_eligible(p, config, False)
    if with_runner is None or without_runner is None:
        return _no_route(p, skipped)
    picked = (with_runner,) if with_runner is without_runner else (with_runner, without_runner)
    fallback_note = [] if len(picked) == 1 else [(b, r) for b, r in skipped_without if b is Backend.TRT]
    kind, failure = launch_failure(p, config, picked)
    return Dispatch(p, picked, tuple(skipped + fallback_note), failure=failure, failure_kind=kind)
