"""Small builders shared by the spec tests (problems from geometry, in ORT's terms)."""

from __future__ import annotations

from attnws.spec import Geometry, Op, QkvFormat, runtime_problem
from attnws.spec.mha.builder import build_mha_problem


def pmha(batch=2, seq=4, heads=2, head_size=4, v_head_size=None, tokens=None, fmt="packed", dtype=2, **flags):
    """Return a PMHA problem from its geometry (fp16 by default)."""
    return runtime_problem(Geometry(Op.PMHA, dtype, batch=batch, seq=seq, heads=heads, head_size=head_size,
                                    v_head_size=v_head_size, tokens=tokens, pmha_format=QkvFormat(fmt), **flags))


def pa(batch=2, seq=4, heads=2, head_size=4, v_head_size=None, tokens=None, dtype=2, **flags):
    """Return a PA problem from its geometry (fp16 by default)."""
    return runtime_problem(Geometry(Op.PA, dtype, batch=batch, seq=seq, heads=heads, head_size=head_size,
                                    v_head_size=v_head_size, tokens=tokens, **flags))


def mha_problem(fmt="separate", b=2, s=3, l=5, n=2, h=8, hv=None, e=2, bias=False, past=None, present=False,
                mask=None, attn_bias=False, causal=False):
    """Return a MultiHeadAttention problem built from ORT's input shapes: `past` = P adds past_key
    and past_value (and the present outputs); mask is None, 'B', '3B+2', 'BT' or 'BST'."""
    hv = h if hv is None else hv
    if fmt == "separate":
        q, k, v = [b, s, n * h], [b, l, n * h], [b, l, n * hv]
    elif fmt == "cross":
        q, k, v = [b, s, n * h], [b, n, l, h], [b, n, l, hv]
    elif fmt == "packed_kv":
        q, k, v = [b, s, n * h], [b, l, n, 2, h], None
    else:
        q, k, v = [b, s, n, 3, h], None, None
        l = s
    t = l + (past or 0)
    masks = {None: None, "B": [b], "3B+2": [3 * b + 2], "BT": [b, t], "BST": [b, s, t]}
    cache = dict(past_key=[b, n, past, h], past_value=[b, n, past, h]) if past is not None else {}
    return build_mha_problem(q, k, v, [2 * n * h + n * hv] if bias else None, masks[mask],
                             [b, n, s, t] if attn_bias else None, **cache, element_size=e, num_heads=n,
                             has_present=present or past is not None, unidirectional=causal)
