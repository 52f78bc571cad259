"""Route aggregation: one operator-owned root sized for every reachable route.

Mirrors ORT's AggregatePackedAttentionWorkspace: routes are mutually exclusive, so the attention
component is the MAXIMUM over the routes' recipes (never a sum), each sized at the original
(maximum) geometry. PA's projection is live together with it: the root is
align256(projection) + max(attention); PMHA's root is max(attention). All sizes in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .domain import CONCRETE as D
from .errors import InvalidArgument
from .layout import Recipe
from .dispatch import output_is_empty
from .limits import WORKSPACE_ALIGNMENT
from .problem import Backend, Op
from .recipe import recipe


@dataclass(frozen=True)
class Aggregate:
    """The root layout: projection at [0, projection_bytes), attention at
    [attention_workspace_offset_bytes, total_workspace_bytes). Bytes throughout."""

    projection_bytes: int = 0
    attention_workspace_offset_bytes: int = 0
    attention_workspace_bytes: int = 0
    total_workspace_bytes: int = 0
    routes: tuple[Recipe, ...] = field(default=())


MASK_BITS = {Backend.TRT: 1, Backend.FLASH: 2, Backend.MEA: 4, Backend.UNFUSED: 8}  # PackedAttentionBackendMask


def backends_from_mask(mask: int) -> list[Backend]:
    """Return the backends of an ORT PackedAttentionBackendMask; unknown bits are InvalidArgument."""
    known = sum(MASK_BITS.values())
    if not isinstance(mask, int) or mask < 0 or mask & ~known:
        raise InvalidArgument(f"backend mask {mask!r} has bits outside trt=1, flash=2, mea=4, unfused=8")
    return [b for b, bit in MASK_BITS.items() if mask & bit]


def is_proven_empty(p: Any) -> bool:
    """Return whether the problem runs no backend (its family's early return: a packed output with
    T == 0 or a V hidden size of 0; MultiHeadAttention has none)."""
    return bool(output_is_empty(D, p))


def root_layout(projection_bytes: Any, attention_bytes: Any, d: Any = D) -> tuple[Any, Any]:
    """Return (attention offset, total) in bytes: offset = align256(projection), total = offset +
    attention, with the domain's checked arithmetic (the solver passes its symbolic domain)."""
    offset = d.align_up(projection_bytes, WORKSPACE_ALIGNMENT, what="attention offset align256(projection)")
    return offset, d.add(offset, attention_bytes, what="root total")


def aggregate(p: Any, backends: Sequence[Backend], *, bounds: bool = True) -> Aggregate:
    """Return the root for the given route set, or raise the error ORT reports.

    `bounds=True` is the ForBounds aggregate: route recipes skip the equal-head gates because an
    equal-head route may be reachable below unequal maximum bounds. Any route whose recipe fails
    makes the whole aggregate fail: a route is never silently omitted.
    """
    if p.op is Op.PA and Backend.FLASH in backends:
        raise InvalidArgument("route set for PackedAttention contains Flash, which PA does not have")
    if is_proven_empty(p):
        recipe(p, Backend.UNFUSED, trt_runner_available=False, d=D)
        return Aggregate()
    if not backends:
        raise InvalidArgument("a non-empty packed attention problem needs at least one route")
    ordered = [b for b in Backend if b in backends]
    routes = tuple(recipe(p, b, trt_runner_available=True, route_gates=not bounds) for b in ordered)
    projections = {r.projection_bytes for r in routes}
    if len(projections) != 1:
        raise InvalidArgument(f"route recipes disagree on the projection workspace: {sorted(projections)}")
    projection = routes[0].projection_bytes
    attention = max(r.attention_workspace_bytes for r in routes)
    offset, total = root_layout(projection, attention)
    return Aggregate(projection, offset, attention, total, routes)
