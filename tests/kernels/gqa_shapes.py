"""GroupQueryAttention shapes for the kernel tests, built the way every layer builds them: a
`GqaBox` (one node, B, S and T exact) and its `problem`."""

from __future__ import annotations

from typing import Any

from attnws.spec.domain import CONCRETE
from attnws.spec.gqa.node import GqaBox
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.target import DimRange


def gqa(batch: int, seq: int, heads: int, kv_heads: int, head_size: int, total: int, past: int | None = None,
        **flags: Any) -> GqaProblem:
    """Return the problem of S = `seq` new tokens of B = `batch` entries, N = `heads`, Nk = `kv_heads`,
    H = `head_size`, T = `total`, over a cache of `past` rows (default T); `flags` are GqaBox's
    (local_window_size, softcap, do_rotary, is_packed_qkv, sliding_window_cache, is_bf16, ...)."""
    box = GqaBox("test", heads, kv_heads, head_size, total if past is None else past, DimRange(batch, batch),
                 DimRange(seq, seq), DimRange(total, total), **flags)
    return box.problem(CONCRETE, batch, seq, total)
