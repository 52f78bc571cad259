"""Workspace recipes: exact bytes and every view's offset for one problem on one backend, each
family's own (`attnws.spec.<family>.recipe`), mirroring ONNX Runtime field for field and check
for check. All sizes are bytes.
"""

from __future__ import annotations

from typing import Any

from .domain import CONCRETE
from .families import family_of
from .problem import Backend


def unsized_routes(op: Any) -> dict[Backend, str]:
    """Return the routes of the operator's family that ORT runs but whose workspace no graph-free
    recipe states (backend -> why in words): the solver leaves their shapes out of every bound."""
    return family_of(op).recipe.UNSIZED_ROUTES


def recipe(p: Any, backend: Backend, *, trt_runner_available: bool = True, route_gates: bool = True,
           d: Any = CONCRETE, config: Any = None) -> Any:
    """Return the exact workspace recipe of problem p on backend, or raise ORT's error.

    `route_gates=False` skips the equal-head and runner gates, as ORT's bounds aggregate does when
    it sizes a route that is reachable below unequal maximum head sizes. `config` (a
    RuntimeConfig) sizes the routes whose workspace depends on the device (GroupQueryAttention's).
    """
    return family_of(p.op).recipe.recipe(p, backend, trt_runner_available=trt_runner_available,
                                         route_gates=route_gates, d=d, config=config)
