"""GroupQueryAttention shapes for the kernel tests, built the way every layer builds them: a
`Geometry` (B, S, T exact) and the family's `runtime_problem`."""

from __future__ import annotations

from typing import Any

from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.hints import Geometry
from attnws.spec.problem import Op


def gqa_geometry(batch: int, seq: int, heads: int, kv_heads: int, head_size: int, total: int, past: int | None = None,
                 **flags: Any) -> Geometry:
    """Return the fp16 geometry of S = `seq` new tokens of B = `batch` entries, N = `heads`,
    Nk = `kv_heads`, H = `head_size`, T = `total`, over a cache of `past` rows (default T); `flags`
    are Geometry's (window, softcap, rotary, gqa_format, sliding_window_cache, bf16, ...)."""
    return Geometry(op=Op.GQA, element_size=2, batch=batch, seq=seq, heads=heads, head_size=head_size,
                    kv_heads=kv_heads, total_seq=total, past=total if past is None else past, **flags)


def gqa(batch: int, seq: int, heads: int, kv_heads: int, head_size: int, total: int, past: int | None = None,
        **flags: Any) -> GqaProblem:
    """Return the problem of `gqa_geometry` (the same arguments)."""
    return runtime_problem(gqa_geometry(batch, seq, heads, kv_heads, head_size, total, past, **flags))
