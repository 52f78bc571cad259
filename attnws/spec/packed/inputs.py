"""The packed family's inputs: PackedAttention's and PackedMultiHeadAttention's positional inputs,
the shapes ORT's adapter would see for a `Geometry`, the problem those shapes build, and what
the node's attributes may get wrong.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..domain import CONCRETE
from ..errors import InvalidArgument
from ..hints import MISSING, Geometry, Hint, hint_at, required_shapes, shape_of
from ..limits import INT32_MAX
from ..problem import Op
from .builder import build_pa_problem, build_pmha_problem
from .problem import Problem, QkvFormat

PA_INPUTS = ("input", "weights", "bias", "token_offset", "cumulative_sequence_length", "attention_bias")


PMHA_INPUTS = ("query", "key", "value", "bias", "token_offset", "cumulative_sequence_length", "attention_bias")


def input_names(op: Op) -> tuple[str, ...]:
    """Return the operator's positional input names."""
    return PA_INPUTS if op is Op.PA else PMHA_INPUTS


def attention_bias_shape(g: Geometry) -> list[int] | None:
    """Return [B or 1, N or 1, S, S] for the geometry, or None without attention bias."""
    if not g.attn_bias:
        return None
    return [1 if g.attn_bias_broadcast_batch else g.batch, 1 if g.attn_bias_broadcast_heads else g.heads,
            g.seq, g.seq]


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return the positional input shapes ORT would see for the geometry."""
    bias = attention_bias_shape(g)
    common = [[g.batch, g.seq], [g.batch + 1], bias if bias is not None else MISSING]
    if g.op is Op.PA:
        if g.qkv_hidden_sizes is not None:
            q, k, v = g.qkv_hidden_sizes
        elif g.v_head_size is not None and g.v_head_size != g.head_size:
            raise InvalidArgument(
                f"PackedAttention without qkv_hidden_sizes has equal head sizes (bias / 3 each); "
                f"head_size = {g.head_size}, v_head_size = {g.hv} needs qkv_hidden_sizes"
            )
        else:
            q = k = g.heads * g.head_size
            v = g.heads * g.hv
        hidden = g.heads * g.head_size if g.input_hidden is None else g.input_hidden
        return [[g.t, hidden], [hidden, q + k + v], [q + k + v], *common]
    q_hidden, v_hidden = g.heads * g.head_size, g.heads * g.hv
    qkv_bias = [[2 * q_hidden + v_hidden]] if g.qkv_bias else [MISSING]
    if g.pmha_format is QkvFormat.PACKED:
        if g.v_head_size is not None and g.v_head_size != g.head_size:
            raise InvalidArgument(
                f"packed QKV [T, N, 3, H] has one head size; got head_size = {g.head_size}, "
                f"v_head_size = {g.hv} (use the separate format)"
            )
        return [[g.t, g.heads, 3, g.head_size], MISSING, MISSING, *qkv_bias, *common]
    return [[g.t, q_hidden], [g.t, q_hidden], [g.t, v_hidden], *qkv_bias, *common]


def problem_from_hints(
    op: Op, element_size: int, num_heads: int, hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None = None,
    *, has_present: bool = False, unidirectional: bool = False,
) -> tuple[Problem | None, str]:
    """Return (problem, '') from positional shapes, or (None, reason) when they do not suffice.
    Builder errors propagate as typed errors. `has_present` and `unidirectional` are
    MultiHeadAttention's; a packed node has neither."""
    if op is Op.PA:
        missing = required_shapes(hints, range(5), (5,))
        if missing:
            return None, missing
        shapes = [shape_of(hint_at(hints, i)) for i in range(6)]
        problem = build_pa_problem(*shapes[:5], element_size=element_size, num_heads=num_heads,
                                   qkv_hidden_sizes=qkv_hidden_sizes or None, attention_bias=shapes[5])
        return problem, ""
    missing = required_shapes(hints, (0, 4, 5), (1, 2, 3, 6))
    if missing:
        return None, missing
    query = shape_of(hint_at(hints, 0))
    has_key, has_value = hint_at(hints, 1) is not MISSING, hint_at(hints, 2) is not MISSING
    if (len(query) == 4 and (has_key or has_value)) or (len(query) == 2 and not (has_key and has_value)) \
            or len(query) not in (2, 4):
        return None, f"query rank {len(query)} does not match the presence of key ({has_key}) and value ({has_value})"
    shapes = [shape_of(hint_at(hints, i)) for i in range(7)]
    problem = build_pmha_problem(*shapes, element_size=element_size, num_heads=num_heads)
    return problem, ""


def attribute_problem(op: Op, num_heads: int, qkv_hidden_sizes: Sequence[int]) -> str:
    """Return what the node's qkv_hidden_sizes gets wrong, or '' (ORT's IsValidConfig): PMHA has
    no such attribute; PA's has 0 or 3 values within int32, q == k, q and v divisible by N."""
    sizes = list(qkv_hidden_sizes)
    if op is Op.PMHA:
        return f"PackedMultiHeadAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""
    if len(sizes) not in (0, 3):
        return f"qkv_hidden_sizes = {sizes} must have exactly 3 values"
    if any(not 0 <= s <= INT32_MAX for s in sizes):
        return f"qkv_hidden_sizes = {sizes} must be within [0, {INT32_MAX}]"
    if sizes:
        q, k, v = sizes
        if q != k or q % num_heads or v % num_heads or q + k + v > INT32_MAX:
            return f"qkv_hidden_sizes = {sizes} need q == k, q and v divisible by num_heads = {num_heads}, and a sum within int32"
    return ""


def nonzero_dims(index: int, shape: list[Any]) -> list[Any]:
    """Return the dimensions of input `index` a hint may not give as 0: all of them."""
    return shape


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> Problem:
    """Return the validated problem for the geometry taken as the concrete runtime shapes (ORT's
    positional input shapes through the builder; under the solver's domain the builder's checks
    become obligations instead of errors)."""
    shapes = [shape_of(h) for h in geometry_hints(g)]
    if g.op is Op.PA:
        return build_pa_problem(*shapes[:5], element_size=g.element_size, num_heads=g.heads,
                                qkv_hidden_sizes=g.qkv_hidden_sizes, attention_bias=shapes[5], d=d)
    return build_pmha_problem(*shapes, element_size=g.element_size, num_heads=g.heads, d=d)
