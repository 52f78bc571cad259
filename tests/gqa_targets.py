"""GroupQueryAttention targets for tests, written as a node is: N, Nk, H and the cache capacity P
fixed, B, S and T over their ranges."""

from __future__ import annotations

from typing import Any

from attnws.spec.gqa.problem import GqaFormat
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op
from attnws.spec.target import DimRange, Pattern, Target


def gqa_target(name: str, heads: int, kv_heads: int, head_size: int, past: int, batch: DimRange, seq: DimRange,
               total_seq: DimRange, config: RuntimeConfig | None = None, *, packed_qkv: bool = False,
               patterns: dict[str, dict[str, DimRange]] | None = None, **flags: Any) -> Target:
    """Return the target (`flags`: Target fields such as window, softcap, rotary, max_total_seq)."""
    return Target(op=Op.GQA, element_size=2, batch=batch, seq=seq, heads=DimRange(heads, heads),
                  head_size=DimRange(head_size, head_size), kv_heads=DimRange(kv_heads, kv_heads),
                  total_seq=total_seq, past=DimRange(past, past), config=config or RuntimeConfig.make(), name=name,
                  gqa_format=GqaFormat.PACKED_QKV if packed_qkv else GqaFormat.SEPARATE,
                  patterns=tuple(Pattern(n, tuple(d.items())) for n, d in (patterns or {}).items()), **flags)
