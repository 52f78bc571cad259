"""GroupQueryAttention shapes for the kernel tests, built the way every layer builds them: a
`Geometry` (B, S, T exact) and the family's `runtime_problem`; and what a validation report
measured, by name (`allocated`, `touched`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.hints import Geometry
from attnws.spec.problem import Op

if TYPE_CHECKING:
    from attnws.kernels.report import ValidationReport


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


def allocated(report: ValidationReport) -> dict[str, int]:
    """Return the payload bytes of each root (the output, the workspace) measured on the device."""
    return {r.purpose: r.nbytes for r in report.allocations if r.guard_bytes}


def touched(report: ValidationReport) -> dict[str, int]:
    """Return the bytes of each buffer's elements its writers wrote."""
    return {b.name: b.touched_bytes for b in report.buffers}
