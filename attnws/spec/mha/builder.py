"""The MultiHeadAttention builder: ORT's input shapes and attributes to a validated `MhaProblem`.

`build_mha_problem` performs the checks of ONNX Runtime's CheckInputs for MultiHeadAttention
(`contrib_ops/cpu/bert/multihead_attention_helper.h`) and then the past/present arity and format
checks of `contrib_ops/cuda/bert/multihead_attention.cc`, in that order, so the first error is
the one ORT reports. Like ORT, it derives H = D / N by floor division without a divisibility
check. Each dimension must also fit the int32 CUDA ABI (as for the packed builders). Inputs
ORT accepts but attnws does not model raise `Unsupported`: the shared past/present buffer
(input 8, past_sequence_length) and beam-search cache indirection (input 9, the decoder-masked
kernel).
"""

from __future__ import annotations

from typing import Any

from ..domain import CONCRETE
from ..errors import InvalidArgument, Unsupported
from ..limits import INT32_MAX, MAX_THREADS_PER_BLOCK
from ..validation import Shape, validate_dimension, validate_element_size
from .problem import MhaFormat, MhaProblem


def _dims(d: Any, shape: Shape, name: str) -> list[Any]:
    for axis, dim in enumerate(shape):
        validate_dimension(d, dim, f"{name}.shape[{axis}]")
    return list(shape)


def _rank_error(name: str, shape: Shape, expected: str) -> InvalidArgument:
    return InvalidArgument(f"input '{name}' must have {expected} dimensions, got shape {list(shape)} "
                           f"(rank {len(shape)})")


def _packed_kv(d: Any, query: Shape, key: Shape, b: Any, n: Any, h: Any) -> Any:
    """Check key [B, L, N, 2, H] for packed KV; return L."""
    if len(query) != 3:
        raise _rank_error("query", query, "3 (packed key/value needs query [B, S, N*H])")
    if len(key) != 5:
        raise _rank_error("key", key, "5 for packed key/value [B, L, N, 2, H]")
    key = _dims(d, key, "key")
    d.require(d.all_(key[0] == b, key[2] == n, key[3] == 2, key[4] == h),
              lambda: InvalidArgument(f"packed key/value shape {key} must be [B = {b}, L, N = {n}, 2, H = {h}]"))
    return key[1]


def _separate(d: Any, query: Shape, key: Shape, value: Shape, b: Any, n: Any, h: Any) -> tuple[MhaFormat, Any, Any]:
    """Check separate key and value (rank 3 BSNH or rank 4 BNSH); return (format, L, Dv)."""
    if len(query) != 3:
        raise _rank_error("query", query, "3 when key and value are separate")
    if len(key) != len(value) or len(key) not in (3, 4):
        raise InvalidArgument(f"key {list(key)} and value {list(value)} must have the same rank, 3 or 4")
    key, value = _dims(d, key, "key"), _dims(d, value, "value")
    d.require(d.all_(key[0] == b, value[0] == b),
              lambda: InvalidArgument(f"query, key and value must share dim 0 (batch): {b}, {key[0]}, {value[0]}"))
    if len(key) == 3:
        d.require(key[2] == query[2],
                  lambda: InvalidArgument(f"key dim 2 = {key[2]} must equal the query hidden size {query[2]}"))
        d.require(key[1] == value[1],
                  lambda: InvalidArgument(f"key and value must share dim 1 (kv sequence): {key[1]} != {value[1]}"))
        return MhaFormat.SEPARATE, key[1], value[2]
    d.require(d.all_(*(k == v for k, v in zip(key, value)), key[1] == n, key[3] == h),
              lambda: InvalidArgument(f"key {key} and value {value} must both be [B, N = {n}, L, H = {h}]"))
    return MhaFormat.CROSS, key[2], d.mul(value[1], value[3], what="cross value hidden N * Hv")


def _mask_kind(d: Any, mask: Shape, b: Any, s: Any, t: Any) -> tuple[int, Any]:
    """Return (rank, is_start) of the key padding mask; is_start is the [3B + 2] form of rank 1."""
    mask = _dims(d, mask, "key_padding_mask")
    error = lambda: InvalidArgument(  # noqa: E731
        f"key_padding_mask shape {mask} is not [B], [3B + 2], [B, T] or [B, S, T] (B = {b}, S = {s}, T = {t})")
    if len(mask) == 1:
        starts = mask[0] == 3 * b + 2
        d.require(d.any_(mask[0] == b, starts), error)
        return 1, d.all_(mask[0] != b, starts)
    if len(mask) == 2:
        d.require(d.all_(mask[0] == b, mask[1] == t), error)
        return 2, False
    if len(mask) == 3:
        d.require(d.all_(mask[0] == b, mask[1] == s, mask[2] == t), error)
        return 3, False
    raise error()


def _attention_bias(d: Any, shape: Shape, b: Any, n: Any, s: Any, t: Any) -> list[Any]:
    if len(shape) != 4:
        raise _rank_error("attention_bias", shape, "4")
    shape = _dims(d, shape, "attention_bias")
    d.require(d.any_(shape[0] == b, shape[0] == 1),
              lambda: InvalidArgument(f"attention_bias dim 0 = {shape[0]} must be the batch size {b} or 1"))
    d.require(d.any_(shape[1] == n, shape[1] == 1),
              lambda: InvalidArgument(f"attention_bias dim 1 = {shape[1]} must be num_heads = {n} or 1"))
    d.require(shape[2] == s, lambda: InvalidArgument(f"attention_bias dim 2 = {shape[2]} must be S = {s}"))
    d.require(shape[3] == t, lambda: InvalidArgument(f"attention_bias dim 3 = {shape[3]} must be T = P + L = {t}"))
    return shape


def _past(d: Any, past_key: Shape, past_value: Shape, b: Any, n: Any, h: Any) -> Any:
    """CheckPast: both [B, N, P, H] (past_value's dim 3 is checked against H, as ORT does); return P."""
    for name, shape in (("past_key", past_key), ("past_value", past_value)):
        if len(shape) != 4:
            raise _rank_error(name, shape, "4")
    pk, pv = _dims(d, past_key, "past_key"), _dims(d, past_value, "past_value")
    for axis, expected, what in ((0, b, "the batch size"), (1, n, "num_heads")):
        for name, shape in (("past_key", pk), ("past_value", pv)):
            d.require(shape[axis] == expected,
                      lambda name=name, shape=shape, axis=axis, expected=expected, what=what: InvalidArgument(
                          f"{name} dim {axis} = {shape[axis]} must be {what} = {expected}"))
    d.require(pk[2] == pv[2],
              lambda: InvalidArgument(f"past_key and past_value must share dim 2 (past length): {pk[2]} != {pv[2]}"))
    for name, shape in (("past_key", pk), ("past_value", pv)):
        d.require(shape[3] == h, lambda name=name, shape=shape: InvalidArgument(
            f"{name} dim 3 = {shape[3]} must be the head size H = {h}"))
    return pk[2]


def build_mha_problem(
    query: Shape,
    key: Shape | None = None,
    value: Shape | None = None,
    bias: Shape | None = None,
    key_padding_mask: Shape | None = None,
    attention_bias: Shape | None = None,
    past_key: Shape | None = None,
    past_value: Shape | None = None,
    past_sequence_length: Shape | None = None,
    cache_indirection: Shape | None = None,
    *,
    element_size: int,
    num_heads: Any,
    has_present: bool = False,
    unidirectional: bool = False,
    d: Any = CONCRETE,
) -> MhaProblem:
    """Return the MultiHeadAttention problem for ORT's input shapes (absent inputs None), or
    raise the error ORT reports (InvalidArgument) or `Unsupported`. `has_present` says whether
    the node has the present_key / present_value outputs."""
    validate_element_size(element_size)
    d.require(d.all_(num_heads > 0, num_heads <= INT32_MAX),
              lambda: InvalidArgument(f"MultiHeadAttention num_heads = {num_heads} must be in [1, {INT32_MAX}]"))
    d.require(num_heads <= MAX_THREADS_PER_BLOCK, lambda: InvalidArgument(
        f"num_heads = {num_heads} exceeds the device's max threads per block ({MAX_THREADS_PER_BLOCK})"))
    if query is None or len(query) not in (3, 5):
        raise InvalidArgument(f"input 'query' must have 3 or 5 dimensions, got "
                              f"{'none' if query is None else f'shape {list(query)} (rank {len(query)})'}")
    query = _dims(d, query, "query")
    b, s = query[0], query[1]
    hidden = query[2] if len(query) == 3 else d.mul(num_heads, query[4], what="query hidden N * H")
    h = d.div(hidden, num_heads)
    kv, v_hidden = s, hidden
    packed_3d = False
    if key is not None and value is None:
        fmt, kv = MhaFormat.PACKED_KV, _packed_kv(d, query, key, b, num_heads, h)
    elif key is not None:
        fmt, kv, v_hidden = _separate(d, query, key, value, b, num_heads, h)
    elif value is not None:
        raise InvalidArgument("input 'value' must be absent when 'key' is absent")
    elif len(query) == 3:
        fmt, packed_3d = MhaFormat.PACKED_QKV, True
    else:
        d.require(query[3] == 3, lambda: InvalidArgument(
            f"packed QKV query {query} must be [B, S, N, 3, H]: dim 3 = {query[3]}"))
        fmt = MhaFormat.PACKED_QKV
    if (past_key is None) != (past_value is None):
        raise InvalidArgument("past_key and past_value must be both present or both absent")
    past = 0
    if past_key is not None:
        past = _past(d, past_key, past_value, b, num_heads, h)
    if packed_3d:
        raise InvalidArgument(f"packed QKV of 3D [B, S, 3*N*H] shape {query} is not supported by MultiHeadAttention")
    if fmt is MhaFormat.PACKED_KV and bias is not None:
        raise InvalidArgument("input 'bias' must be absent when key and value are packed")
    if bias is not None:
        if len(bias) != 1:
            raise _rank_error("bias", bias, "1")
        (length,) = _dims(d, bias, "bias")
        expected = d.add(d.add(hidden, hidden, what="2 * D"), v_hidden, what="2 * D + Dv")
        d.require(length == expected, lambda: InvalidArgument(
            f"bias length {length} must be 2 * hidden + v_hidden = {expected}"))
    total = d.add(past, kv, what="total sequence P + L")
    mask_rank, mask_start = (0, False) if key_padding_mask is None else _mask_kind(d, key_padding_mask, b, s, total)
    broadcast = (False, False)
    if attention_bias is not None:
        shape = _attention_bias(d, attention_bias, b, num_heads, s, total)
        broadcast = (shape[0] == 1, shape[1] == 1)
    if past_sequence_length is not None and past_key is not None:
        raise Unsupported("past_sequence_length with past_key (input 8: past and present share one buffer) is not "
                          "modelled")
    if cache_indirection is not None:
        raise Unsupported("cache_indirection (input 9: beam search, the decoder-masked kernel) is not modelled")
    has_past = past_key is not None
    if has_past and not has_present:
        raise InvalidArgument("past_key and past_value need the present_key and present_value outputs")
    if (has_past or has_present) and fmt is not MhaFormat.SEPARATE:
        raise InvalidArgument(f"past_key, past_value and the present outputs must be absent for the "
                              f"{fmt.value} key/value format")
    # CheckInputs floors H = D / N without a divisibility check; the kernels then read N * H of
    # the D columns (ORT's CPU kernel fails on such a node): a node attnws does not size.
    for width, what in ((hidden, "hidden size D"), (v_hidden, "value hidden size Dv")):
        d.require(d.mod(width, num_heads) == 0, lambda width=width, what=what: Unsupported(
            f"{what} = {width} is not a multiple of num_heads = {num_heads}: ORT floors the head size and its "
            "kernels then read only part of each row"))
    return MhaProblem(
        element_size=element_size, batch_size=b, sequence_length=s, kv_sequence_length=kv,
        past_sequence_length=past, num_heads=num_heads, qk_head_size=h, v_head_size=d.div(v_hidden, num_heads),
        qkv_format=fmt, has_bias=bias is not None, mask_rank=mask_rank, mask_is_start=mask_start,
        has_attention_bias=attention_bias is not None, broadcast_attn_bias_dim_0=broadcast[0],
        broadcast_attn_bias_dim_1=broadcast[1], has_past=has_past, has_present=has_present,
        is_unidirectional=unidirectional,
    )
