"""MultiHeadAttention's part of the AOT estimate (attnws's own; ORT has no estimator for it): how
the node's head sizes are read, and what the bound leaves out.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..gates import HeadDomain
from ..options import RuntimeConfig
from ..ort_version import CUDNN_ASSUMED
from ..problem import Backend, Op

# Whose AOT estimate this is, in words: ORT 1.31.1 has no estimator for MultiHeadAttention.
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
        notes.append("Flash also allocates its softmax LSE (4 * B * N * S bytes) and, when it splits the key/value "
                     "sequence, its accumulators separately: not covered")
    if Backend.CUDNN in backends:
        notes.append(f"cuDNN's frontend allocates its own workspace: not covered (cuDNN's rules are those of "
                     f"{CUDNN_ASSUMED})")
    return "; ".join(notes + [failures] * bool(failures)) + "."


def has_projection(op: Op) -> bool:
    """MultiHeadAttention's root is its one workspace allocation (no projection GEMM)."""
    return False
