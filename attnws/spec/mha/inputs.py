"""MultiHeadAttention's inputs: its ten positional inputs, the shapes ORT's adapter would see for a
`Geometry`, the problem those shapes build, and what the node's attributes may get wrong.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..domain import CONCRETE
from ..hints import MISSING, Geometry, Hint, hint_at, required_shapes, shape_of
from ..problem import Op
from .builder import build_mha_problem
from .problem import MaskType, MhaFormat, MhaProblem

MHA_INPUTS = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value",
              "past_sequence_length", "cache_indirection")
PAST_INPUTS = (6, 7)  # past_key [B, N, P, H] and past_value [B, N, P, Hv]


def input_names(op: Op) -> tuple[str, ...]:
    """Return the operator's positional input names."""
    return MHA_INPUTS


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return MultiHeadAttention's ten positional input shapes for the geometry."""
    b, s, n, h, hv, kv = g.batch, g.seq, g.heads, g.head_size, g.hv, g.l
    total = g.past + kv
    if g.mha_format is MhaFormat.PACKED_QKV:
        qkv = [[b, s, n, 3, h], MISSING, MISSING]
    elif g.mha_format is MhaFormat.PACKED_KV:
        qkv = [[b, s, n * h], [b, kv, n, 2, h], MISSING]
    elif g.mha_format is MhaFormat.CROSS:
        qkv = [[b, s, n * h], [b, n, kv, h], [b, n, kv, hv]]
    else:
        qkv = [[b, s, n * h], [b, kv, n * h], [b, kv, n * hv]]
    masks = {MaskType.NONE: MISSING, MaskType.KEY_SEQ_LEN: [b], MaskType.KEY_SEQ_LEN_START: [3 * b + 2],
             MaskType.KEY_PADDING: [b, total], MaskType.ATTENTION: [b, s, total]}
    bias = MISSING
    if g.attn_bias:
        bias = [1 if g.attn_bias_broadcast_batch else b, 1 if g.attn_bias_broadcast_heads else n, s, total]
    past = [[b, n, g.past, h]] * 2 if g.with_past else [MISSING, MISSING]
    return [*qkv, [2 * n * h + n * hv] if g.qkv_bias else MISSING, masks[g.mask], bias, *past, MISSING, MISSING]


def problem_from_hints(
    op: Op, element_size: int, num_heads: int, hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None = None,
    *, has_present: bool = False, unidirectional: bool = False,
) -> tuple[MhaProblem | None, str]:
    """Return (problem, '') from positional shapes, or (None, reason) when they do not suffice.
    Builder errors propagate as typed errors. `has_present` and `unidirectional` describe the
    node (its present outputs and its attribute)."""
    missing = required_shapes(hints, (0,), range(1, 10))
    if missing:
        return None, missing
    shapes = [shape_of(hint_at(hints, i)) for i in range(10)]
    return build_mha_problem(*shapes, element_size=element_size, num_heads=num_heads, has_present=has_present,
                             unidirectional=unidirectional), ""


def attribute_problem(op: Op, num_heads: int, qkv_hidden_sizes: Sequence[int]) -> str:
    """Return what the node's attributes get wrong, or '': MultiHeadAttention has no qkv_hidden_sizes."""
    sizes = list(qkv_hidden_sizes)
    return f"MultiHeadAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""


def nonzero_dims(index: int, shape: list[Any]) -> list[Any]:
    """Return the dimensions of input `index` a hint may not give as 0: all but a past's P (an empty
    past is a real shape, the first decoding step)."""
    if index in PAST_INPUTS and len(shape) == 4:
        return shape[:2] + shape[3:]
    return shape


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> MhaProblem:
    """Return the validated problem for the geometry taken as the concrete runtime shapes (ORT's
    positional input shapes through the builder; under the solver's domain the builder's checks
    become obligations instead of errors)."""
    shapes = [shape_of(h) for h in geometry_hints(g)]
    return build_mha_problem(*shapes, element_size=g.element_size, num_heads=g.heads,
                             has_present=g.with_present, unidirectional=g.unidirectional, d=d)
