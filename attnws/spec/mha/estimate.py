"""MultiHeadAttention's part of the AOT estimate (attnws's own; ORT has no estimator for it): how
the node's head sizes are read, and what the bound leaves out.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..gates import HeadDomain
from ..options import RuntimeConfig
from ..ort_version import CUDNN_ASSUMED
from ..problem import Backend, Op
from ..units import format_bytes
from .recipe import side_allocation_bound, side_allocations

# Whose AOT estimate this is, in words: ORT 1.31.1 has no estimator for MultiHeadAttention.
ORT_ESTIMATOR = False  # ORT 1.31.1 has no estimator for MultiHeadAttention: the bound is attnws's own
WHOSE = "attnws's"
BOUND_NAME = "attnws's bound"
READING = "attnws's bound, read at every dimension's maximum as ORT's estimators read them"


def head_domain(op: Op, qkv_hidden_sizes: Sequence[int] | None) -> HeadDomain:
    """The head sizes are always upper bounds (the node has no qkv_hidden_sizes)."""
    return HeadDomain.UPPER_BOUND


def note(p: Any, config: RuntimeConfig, backends: Sequence[Backend], failures: str) -> str:
    """Return what a MultiHeadAttention bound leaves out, and the run-time failures its range holds."""
    notes = ["The bound covers ORT's workspace allocation; the present key/value outputs are not workspace"]
    if Backend.FLASH in backends:
        notes.append(flash_side_note(p, config.device.sm_count))
    if Backend.CUDNN in backends:
        notes.append(f"cuDNN's frontend allocates its own workspace: not covered (cuDNN's rules are those of "
                     f"{CUDNN_ASSUMED})")
    return "; ".join(notes + [failures] * bool(failures)) + "."


def flash_side_note(p: Any, sm_count: int) -> str:
    """Return, in words, Flash's side allocations outside the workspace: their upper bound
    (`side_allocation_bound`) over every shape up to the maximum p, on sm_count multiprocessors."""
    bound = side_allocation_bound(p, sm_count)
    lse = format_bytes(bound.softmax_lse_bytes)
    text = f"Flash also allocates, outside the workspace, its float32 softmax LSE (4 * B * N * S: {lse} at the maximum)"
    if not bound.out_accum_bytes:
        return f"{text}; on {sm_count:,} SMs no shape up to the maximum splits the key/value sequence (no accumulators)"
    return (f"{text} and, when it splits the key/value sequence (at most {bound.splits} splits on {sm_count:,} SMs), "
            f"two float32 accumulators; an upper bound of these side allocations for every shape up to the maximum "
            f"is {format_bytes(bound.total_bytes)} (LSE {lse}, LSE accumulator "
            f"{format_bytes(bound.softmax_lse_accum_bytes)}, output accumulator {format_bytes(bound.out_accum_bytes)})")


def side_allocations_of(p: Any, config: RuntimeConfig, backend: Backend) -> tuple[str, dict[str, int]] | None:
    """Return, for one shape on the route `backend`, what it allocates beside the workspace (in
    words, and as bytes by buffer), or None where it allocates nothing there that attnws sizes:
    Flash's LSE and, when the heuristic splits the key/value sequence, its two accumulators."""
    if backend is not Backend.FLASH:
        return None
    side = side_allocations(p, config.device.sm_count)
    doc = {"splits": side.splits, "softmax_lse_bytes": side.softmax_lse_bytes,
           "softmax_lse_accum_bytes": side.softmax_lse_accum_bytes, "out_accum_bytes": side.out_accum_bytes,
           "total_bytes": side.total_bytes}
    split = (f"{side.splits} splits on {config.device.sm_count:,} SMs: LSE accumulator "
             f"{format_bytes(side.softmax_lse_accum_bytes)}, output accumulator {format_bytes(side.out_accum_bytes)}"
             if side.out_accum_bytes else f"no split on {config.device.sm_count:,} SMs (no accumulators)")
    return (f"Flash also allocates, outside the workspace, {format_bytes(side.total_bytes)}: softmax LSE "
            f"{format_bytes(side.softmax_lse_bytes)}; {split}", doc)


def routes_apart(p: Any, config: RuntimeConfig) -> list[tuple[str, bool, str]]:
    """The routes the estimator sizes apart from their backend's (name, reachable, why not): none."""
    return []


def has_projection(op: Op) -> bool:
    """MultiHeadAttention's root is its one workspace allocation (no projection GEMM)."""
    return False


OWN_ESTIMATE = None  # the shared estimator (attnws.spec.estimate): the aggregate over the reachable routes' recipes
