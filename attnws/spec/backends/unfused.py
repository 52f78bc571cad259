"""The unfused route: a strided-batched GEMM for the scores, a softmax, a GEMM for the context.
Its workspace holds two scratch regions of one score matrix each (the scores, then the
probabilities), each rounded up to 256 bytes (AlignSize / GetAttentionScratchSize)."""

from __future__ import annotations

from typing import Any

from ..limits import WORKSPACE_ALIGNMENT


def scratch_region_bytes(d: Any, used: Any) -> Any:
    """Return align256(`used`): one scratch region holding a score matrix of `used` bytes."""
    return d.align_up(used, WORKSPACE_ALIGNMENT, what="unfused scratch alignment")
