"""The packed family's builders: ORT-style input shapes and attributes to a validated `Problem`.

Each builder performs every validation ONNX Runtime's BuildPackedAttentionProblem /
BuildPackedMultiHeadAttentionProblem performs, in the same order, so the first error reported is
the one ORT reports. Shapes are sequences of dimensions; an absent optional input is None.
Builders validate host-visible geometry only, never token_offset or cumulative_sequence_length
values.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..domain import CONCRETE
from ..errors import InvalidArgument
from ..limits import INT32_MAX
from ..problem import Op
from ..validation import Shape, validate_dimension, validate_element_size, validate_shape
from .problem import Problem, QkvFormat, qkv_materialization_index_width


def validate_num_heads(d: Any, num_heads: Any, op: Op) -> None:
    """Check that num_heads is positive and fits int32."""
    d.require(
        d.all_(num_heads > 0, num_heads <= INT32_MAX),
        lambda: InvalidArgument(f"{op.onnx_name} num_heads = {num_heads} must be in [1, {INT32_MAX}]"),
    )


def validate_cumulative_sequence_length(d: Any, shape: Shape, batch_size: Any) -> None:
    """Check cumulative_sequence_length has shape [B + 1] with B + 1 within int32."""
    batch_plus_one = d.add(batch_size, 1, what="B + 1")
    d.require(
        d.all_(batch_plus_one <= INT32_MAX, shape[0] == batch_plus_one),
        lambda: InvalidArgument(
            f"cumulative_sequence_length.shape[0] = {shape[0]} must equal B + 1 = {batch_plus_one} "
            f"(within int32)"
        ),
    )


def validate_attention_bias(d: Any, shape: Shape, batch_size: Any, num_heads: Any, seq: Any) -> None:
    """Check the attention bias has shape [B or 1, N or 1, S, S]."""
    validate_shape(d, shape, 4, "attention_bias")
    d.require(
        d.all_(
            d.any_(shape[0] == 1, shape[0] == batch_size),
            d.any_(shape[1] == 1, shape[1] == num_heads),
            shape[2] == seq,
            shape[3] == seq,
        ),
        lambda: InvalidArgument(
            f"attention_bias shape {list(shape)} must be [B or 1, N or 1, S, S] = "
            f"[{batch_size} or 1, {num_heads} or 1, {seq}, {seq}]"
        ),
    )


def validate_core_geometry(d: Any, p: Problem) -> None:
    """Check the problem's own consistency: N > 0, N*H and N*Hv equal the hidden sizes, T <= B*S."""
    d.require(
        d.all_(
            p.token_count >= 0, p.batch_size >= 0, p.sequence_length >= 0, p.num_heads > 0,
            p.hidden_size >= 0, p.v_hidden_size >= 0, p.qk_head_size >= 0, p.v_head_size >= 0,
        ),
        lambda: InvalidArgument(f"problem dimensions are invalid: {p.as_dict()}"),
    )
    q_hidden = d.mul(p.num_heads, p.qk_head_size, what="N * H")
    v_hidden = d.mul(p.num_heads, p.v_head_size, what="N * Hv")
    d.require(
        d.all_(q_hidden == p.hidden_size, v_hidden == p.v_hidden_size),
        lambda: InvalidArgument(
            f"hidden sizes {p.hidden_size}, {p.v_hidden_size} do not match N * H = {q_hidden}, "
            f"N * Hv = {v_hidden}"
        ),
    )
    padded_tokens = d.mul(p.batch_size, p.sequence_length, what="B * S")
    d.require(
        p.token_count <= padded_tokens,
        lambda: InvalidArgument(f"token count T = {p.token_count} exceeds B * S = {padded_tokens}"),
    )


def _with_bias_flags(attention_bias: Shape | None) -> dict[str, Any]:
    if attention_bias is None:
        return {"has_attention_bias": False}
    return {
        "has_attention_bias": True,
        "broadcast_attn_bias_dim_0": attention_bias[0] == 1,
        "broadcast_attn_bias_dim_1": attention_bias[1] == 1,
    }


def _finish(d: Any, **fields: Any) -> Problem:
    fields["qkv_materialization_index_width"] = qkv_materialization_index_width(
        d, fields["qk_head_size"], fields["v_head_size"]
    )
    problem = Problem(**fields)
    validate_core_geometry(d, problem)
    return problem


def build_pa_problem(
    input: Shape,
    weights: Shape,
    bias: Shape,
    token_offset: Shape,
    cumulative_sequence_length: Shape,
    *,
    element_size: int,
    num_heads: Any,
    qkv_hidden_sizes: Sequence[Any] | None = None,
    attention_bias: Shape | None = None,
    d: Any = CONCRETE,
) -> Problem:
    """Return the PackedAttention problem for ORT input shapes, or raise the error ORT reports.

    input [T, input_hidden], weights [input_hidden, q+k+v], bias [q+k+v], token_offset [B, S],
    cumulative_sequence_length [B + 1], optional attention_bias [B or 1, N or 1, S, S].
    Without qkv_hidden_sizes the three hidden sizes are bias / 3 each.
    """
    validate_element_size(element_size)
    validate_num_heads(d, num_heads, Op.PA)
    validate_shape(d, input, 2, "input")
    validate_shape(d, weights, 2, "weights")
    validate_shape(d, bias, 1, "bias")
    validate_shape(d, token_offset, 2, "token_offset")
    validate_shape(d, cumulative_sequence_length, 1, "cumulative_sequence_length")
    token_count, input_hidden = input
    batch_size, seq = token_offset
    d.require(
        weights[0] == input_hidden,
        lambda: InvalidArgument(f"weights.shape[0] = {weights[0]} must equal input hidden size {input_hidden}"),
    )
    d.require(
        bias[0] == weights[1],
        lambda: InvalidArgument(f"bias.shape[0] = {bias[0]} must equal weights.shape[1] = {weights[1]}"),
    )
    validate_cumulative_sequence_length(d, cumulative_sequence_length, batch_size)
    if qkv_hidden_sizes is None or len(qkv_hidden_sizes) == 0:
        q_hidden = k_hidden = v_hidden = d.div(bias[0], 3)
    elif len(qkv_hidden_sizes) != 3:
        raise InvalidArgument(
            f"qkv_hidden_sizes = {list(qkv_hidden_sizes)} must contain exactly three values"
        )
    else:
        q_hidden, k_hidden, v_hidden = qkv_hidden_sizes
    for name, value in (("q", q_hidden), ("k", k_hidden), ("v", v_hidden)):
        validate_dimension(d, value, f"{name} hidden size")
    d.require(
        q_hidden == k_hidden,
        lambda: InvalidArgument(f"Q and K hidden sizes must match: q = {q_hidden}, k = {k_hidden}"),
    )
    d.require(
        d.all_(d.mod(q_hidden, num_heads) == 0, d.mod(v_hidden, num_heads) == 0),
        lambda: InvalidArgument(
            f"hidden sizes q = {q_hidden}, v = {v_hidden} must be divisible by num_heads = {num_heads}"
        ),
    )
    qkv_hidden = d.add(d.add(q_hidden, k_hidden, what="q + k"), v_hidden, what="q + k + v")
    d.require(
        d.all_(qkv_hidden == bias[0], qkv_hidden <= INT32_MAX),
        lambda: InvalidArgument(
            f"q + k + v = {qkv_hidden} must equal the projection output size bias.shape[0] = {bias[0]} "
            f"and fit int32"
        ),
    )
    if attention_bias is not None:
        validate_attention_bias(d, attention_bias, batch_size, num_heads, seq)
    return _finish(
        d,
        op=Op.PA,
        element_size=element_size,
        token_count=token_count,
        batch_size=batch_size,
        sequence_length=seq,
        num_heads=num_heads,
        input_hidden_size=input_hidden,
        hidden_size=q_hidden,
        v_hidden_size=v_hidden,
        qk_head_size=d.div(q_hidden, num_heads),
        v_head_size=d.div(v_hidden, num_heads),
        **_with_bias_flags(attention_bias),
    )


def build_pmha_problem(
    query: Shape,
    key: Shape | None,
    value: Shape | None,
    bias: Shape | None,
    token_offset: Shape,
    cumulative_sequence_length: Shape,
    attention_bias: Shape | None = None,
    *,
    element_size: int,
    num_heads: Any,
    d: Any = CONCRETE,
) -> Problem:
    """Return the PackedMultiHeadAttention problem for ORT input shapes, or raise ORT's error.

    Packed format: query [T, N, 3, H] with key and value absent (Hv = H). Separate format: query
    and key [T, N*H], value [T, N*Hv]. Optional QKV bias [2*N*H + N*Hv]; token_offset [B, S];
    cumulative_sequence_length [B + 1]; optional attention_bias [B or 1, N or 1, S, S].
    """
    validate_element_size(element_size)
    validate_num_heads(d, num_heads, Op.PMHA)
    if query is None or len(query) not in (2, 4):
        raise InvalidArgument(
            f"query must have rank 2 or 4, got {None if query is None else list(query)}"
        )
    validate_shape(d, query, len(query), "query")
    validate_shape(d, token_offset, 2, "token_offset")
    validate_shape(d, cumulative_sequence_length, 1, "cumulative_sequence_length")
    token_count = query[0]
    batch_size, seq = token_offset
    if len(query) == 4:
        if key is not None or value is not None:
            raise InvalidArgument("key and value must be absent when query is packed QKV [T, N, 3, H]")
        d.require(
            d.all_(query[1] == num_heads, query[2] == 3),
            lambda: InvalidArgument(f"packed QKV query {list(query)} must have shape [T, N = {num_heads}, 3, H]"),
        )
        # ORT reports an overflowing N * H here as INVALID_ARGUMENT, not as Overflow.
        hidden = num_heads * query[3]
        d.require(
            hidden <= INT32_MAX,
            lambda: InvalidArgument(f"packed QKV hidden size N * H = {hidden} does not fit int32"),
        )
        v_hidden = hidden
        qkv_format = QkvFormat.PACKED
    else:
        if key is None or value is None:
            raise InvalidArgument("separate query, key and value must all be present when query has rank 2")
        validate_shape(d, key, 2, "key")
        validate_shape(d, value, 2, "value")
        d.require(
            d.all_(key[0] == query[0], key[1] == query[1]),
            lambda: InvalidArgument(f"key shape {list(key)} must equal query shape {list(query)}"),
        )
        d.require(
            value[0] == token_count,
            lambda: InvalidArgument(f"value.shape[0] = {value[0]} must equal query token count {token_count}"),
        )
        hidden, v_hidden = query[1], value[1]
        qkv_format = QkvFormat.SEPARATE
    d.require(
        d.all_(d.mod(hidden, num_heads) == 0, d.mod(v_hidden, num_heads) == 0),
        lambda: InvalidArgument(
            f"hidden sizes {hidden} (Q/K) and {v_hidden} (V) must be divisible by num_heads = {num_heads}"
        ),
    )
    qk_sum = d.add(hidden, hidden, what="2 * hidden")
    qkv_hidden = qk_sum + v_hidden
    d.require(
        qkv_hidden <= INT32_MAX,
        lambda: InvalidArgument(f"Q/K/V hidden-size sum {qkv_hidden} does not fit int32"),
    )
    if bias is not None:
        if len(bias) != 1:
            raise InvalidArgument(f"QKV bias must have rank 1, got shape {list(bias)}")
        validate_dimension(d, bias[0], "bias.shape[0]")
        d.require(
            bias[0] == qkv_hidden,
            lambda: InvalidArgument(f"QKV bias length {bias[0]} must equal 2 * {hidden} + {v_hidden} = {qkv_hidden}"),
        )
    validate_cumulative_sequence_length(d, cumulative_sequence_length, batch_size)
    if attention_bias is not None:
        validate_attention_bias(d, attention_bias, batch_size, num_heads, seq)
    return _finish(
        d,
        op=Op.PMHA,
        element_size=element_size,
        token_count=token_count,
        batch_size=batch_size,
        sequence_length=seq,
        num_heads=num_heads,
        hidden_size=hidden,
        v_hidden_size=v_hidden,
        qk_head_size=d.div(hidden, num_heads),
        v_head_size=d.div(v_hidden, num_heads),
        qkv_format=qkv_format,
        has_bias=bias is not None,
        **_with_bias_flags(attention_bias),
    )

