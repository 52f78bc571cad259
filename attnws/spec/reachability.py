"""AOT reachability: which backends some valid runtime shape within the bounds can take.

Mirrors ONNX Runtime's GetPackedAttentionReachableBackendsForBounds and
GetPackedMultiHeadAttentionReachableBackendsForBounds, and attnws's own rules for
MultiHeadAttention: each family states its verdicts (`attnws.spec.<family>.reachability`), the
problem's geometry read as upper bounds (or, for PA with qkv_hidden_sizes, exact head sizes).
"""

from __future__ import annotations

from typing import Any

from .families import family_of
from .gates import HeadDomain, RouteReachability
from .options import RuntimeConfig
from .problem import Backend


def reachability(p: Any, config: RuntimeConfig, domain: HeadDomain) -> list[RouteReachability]:
    """Return every backend of the operator, in its cascade's order, with its AOT verdict."""
    return family_of(p.op).reachability.reachability(p, config, domain)


def abi_scope(d: Any, p: Any, config: RuntimeConfig, backend: Backend) -> Any:
    """Return where the AOT estimate sizes `backend`, one of its reachable routes (a condition over
    the problem p at run time): where `abi_domain` claims the route's checks pass."""
    return family_of(p.op).reachability.abi_scope(d, p, config, backend)


def reachable_backends(p: Any, config: RuntimeConfig, domain: HeadDomain) -> list[Backend]:
    """Return the reachable backends in ORT's order (TRT, Flash, MEA, unfused for the aggregate)."""
    order = list(Backend)
    found = [r.backend for r in reachability(p, config, domain) if r.reachable]
    return sorted(found, key=order.index)
