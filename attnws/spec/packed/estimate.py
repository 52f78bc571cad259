"""The packed family's part of the AOT estimate: how the node's head sizes are read, and what the
estimate adds in words.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..gates import HeadDomain
from ..options import RuntimeConfig
from ..problem import Backend, Op

# Whose AOT estimate this is, in words: ORT's own estimator sizes the packed operators.
ORT_ESTIMATOR = True  # ORT 1.31.1 estimates these operators' workspace itself
WHOSE = "ORT's"
BOUND_NAME = "ORT's estimator"
READING = "ORT reads every dimension at its maximum"


def head_domain(op: Op, qkv_hidden_sizes: Sequence[int] | None) -> HeadDomain:
    """PA's head sizes are exact when the node carries qkv_hidden_sizes; otherwise, and always for
    PMHA, they are upper bounds."""
    exact = op is Op.PA and bool(qkv_hidden_sizes) and len(qkv_hidden_sizes) == 3
    return HeadDomain.EXACT if exact else HeadDomain.UPPER_BOUND


def note(p: Any, config: RuntimeConfig, backends: Sequence[Backend], failures: str) -> str:
    """Return the estimate's note: the run-time failures its range holds, as a sentence ('' when none)."""
    return f"{failures[:1].upper()}{failures[1:]}." if failures else ""


def side_allocations_of(p: Any, config: RuntimeConfig, backend: Backend) -> tuple[str, dict[str, int]] | None:
    """Return None: the packed operators' routes allocate nothing beside the workspace that attnws
    sizes (PackedMultiHeadAttention's Flash never splits, and its LSE is inside the workspace)."""
    return None


def routes_apart(p: Any, config: RuntimeConfig) -> list[tuple[str, bool, str]]:
    """The routes the estimator sizes apart from their backend's (name, reachable, why not): none."""
    return []


def has_projection(op: Op) -> bool:
    """Whether the operator's root holds a projection allocation before the attention one (PA's GEMM)."""
    return op is Op.PA


OWN_ESTIMATE = None  # the shared estimator (attnws.spec.estimate): the aggregate over the reachable routes' recipes
