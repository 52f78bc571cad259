"""Small builders shared by the spec tests (problems from geometry, in ORT's terms)."""

from __future__ import annotations

from attnws.spec import Geometry, Op, QkvFormat, runtime_problem


def pmha(batch=2, seq=4, heads=2, head_size=4, v_head_size=None, tokens=None, fmt="packed", dtype=2, **flags):
    """Return a PMHA problem from its geometry (fp16 by default)."""
    return runtime_problem(Geometry(Op.PMHA, dtype, batch, seq, heads, head_size, v_head_size, tokens,
                                    pmha_format=QkvFormat(fmt), **flags))


def pa(batch=2, seq=4, heads=2, head_size=4, v_head_size=None, tokens=None, dtype=2, **flags):
    """Return a PA problem from its geometry (fp16 by default)."""
    return runtime_problem(Geometry(Op.PA, dtype, batch, seq, heads, head_size, v_head_size, tokens, **flags))
