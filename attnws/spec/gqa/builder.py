"""The GroupQueryAttention builder: ORT's input shapes and attributes to a validated `GqaProblem`.

`build_gqa_problem` performs the checks ONNX Runtime 1.31.1's CUDA GroupQueryAttention kernel
makes of a node's shapes and attributes, in ORT's order, so the first error is the one ORT
reports (`docs/research/gqa-inputs-dispatch.md` §2, which places each check and its text):

1. the constructor, K1-K8 (`contrib_ops/cuda/bert/group_query_attention.cc`, index id
   55040457772, ordered and worded by the 1.31.1 CUDA binary's strings 369446-369456 and
   373133-373141);
2. ComputeInternal before CheckInputs, C1-C6 (same file and strings);
3. the shared `group_query_attention_helper::CheckInputs`, H0-H45
   (`contrib_ops/cpu/bert/group_query_attention_helper.h`: no 1.31.1 copy is stored; the fork
   `tianleiwu/onnxruntime` 9adf238e (2026-02-11) is the skeleton, the 1.31.1 core binary's
   strings 68257-68314 and the CPU wheel's experiments fix the order and texts), called the CUDA
   way: with max threads per block 1024 (H0), and with seqlens_k on the device, so its values are
   never read (H42, the CPU's seqlens_k-against-rotary-cache check, does not run);
4. `CheckCustomAttentionInputs`, X1-X10, with X3 (attention_bias with a windowed cache) enabled
   for CUDA only;
5. the checks of CUDA ComputeInternal after CheckInputs that are about shapes, D1-D3 and D5-D8
   (binary strings 369469-369483 and 369543; conditions inferred from the texts, no 1.31.1
   source is stored).

CUDA-only, absent from (or lenient on) the CPU kernel: K4 (local_window_size range), K7
(qk_norm_epsilon), C1-C6, H0, X3, D1-D8, and H2's bit-width check which the CPU preempts with
its own. Checks of element types (C2 / C3 "must be float tensor", C4, D4) are not expressible:
the inputs are typed by `is_bf16` and `cache_dtype` only. Each failure raises `InvalidArgument`
with ORT's exact text (values appended as ORT appends them); ORT's NOT_IMPLEMENTED statuses say so
with " (ORT: NOT_IMPLEMENTED)". Every dimension must fit int32 (attnws's CUDA ABI rule, checked
when ORT reads the input). A query hidden size that the head count does not divide passes ORT's
checks (the head size is floored) but its kernels then read part of each row: `Unsupported`, as
for MultiHeadAttention.

`total_sequence_length` is the value T of input 6 (a CPU int32 scalar); its shape, which H28
checks, is `total_sequence_length_shape` (a scalar by default). `kv_share_buffer` says the caller
aliases past_key / present_key and past_value / present_value (a bound buffer of P rows, so a
full-length cache needs T <= P: the present is (B, Nk, max(T, P), H)); without present outputs a
non-quantized node borrows its past buffers, which is a shared buffer too (inferred from D6/D8).

Facts read on the 1.31.1 CPU wheel beyond the note: sliding_window_cache, do_rotary and
smooth_softmax count only at 1; past dim 3 with a bit width is H * bits / (8 * sizeof(T_CACHE))
(the CPU passes kv_cache_extra_bits = 0; what CUDA passes there is not known); input 6 must be a
scalar or a one-element vector ([1, 1] is refused).
"""

from __future__ import annotations

import math
from typing import Any

from ..domain import CONCRETE
from ..errors import InvalidArgument, Unsupported
from ..limits import INT32_MAX, MAX_THREADS_PER_BLOCK
from ..validation import Shape, validate_dimension
from .problem import GqaProblem, KvQuantization

CACHE_DTYPES = {"same": 0, "int8": 1, "uint8": 1, "fp8": 1}  # T_CACHE -> element bytes (0: T's, 2)
QUANT_TYPES = {"NONE": KvQuantization.NONE, "PER_TENSOR": KvQuantization.PER_TENSOR,
               "PER_CHANNEL": KvQuantization.PER_CHANNEL}
NOT_IMPLEMENTED = " (ORT: NOT_IMPLEMENTED)"
KV_BOTH = "Input 'key' and 'value' shall be both present, or both absent in the case of packed qkv."


def _fail(message: str) -> Any:
    return lambda: InvalidArgument(message)


def _enforce(condition: str, message: str = "") -> InvalidArgument:
    """An ORT_ENFORCE failure in the kernel constructor (session creation fails)."""
    return InvalidArgument(f"GroupQueryAttention constructor: {condition} was false. {message}".rstrip())


def _dims(d: Any, shape: Shape, name: str) -> list[Any]:
    for axis, dim in enumerate(shape):
        validate_dimension(d, dim, f"{name}.shape[{axis}]")
    return list(shape)


def _quant_type(text: str) -> KvQuantization:
    """K8: StringToKVQuantizationType, case-insensitive."""
    try:
        return QUANT_TYPES[text.upper()]
    except KeyError:
        raise _enforce("StringToKVQuantizationType",
                       f"Invalid KV quantization type: '{text}'. Valid values are: NONE, PER_TENSOR, "
                       "PER_CHANNEL.") from None


def _constructor(d: Any, num_heads: Any, kv_num_heads: Any, local_window_size: int, causal: int,
                 sliding_window_cache: int, qk_norm_epsilon: float, k_quant_type: str,
                 v_quant_type: str) -> tuple[KvQuantization, KvQuantization]:
    """K1-K8, GroupQueryAttention<T, U>'s constructor (ORT_ENFORCE: session creation fails)."""
    for name, value in (("num_heads", num_heads), ("kv_num_heads", kv_num_heads)):
        if value is None:  # both are required by the schema: ORT refuses the model at load, before the constructor
            raise InvalidArgument(f"Required attribute '{name}' is missing.")
    k1 = 'info.GetAttr("num_heads", &num_heads).IsOK() && num_heads > 0'
    d.require(num_heads > 0, lambda: _enforce(k1))
    k2 = 'info.GetAttr("kv_num_heads", &kv_num_heads).IsOK() && kv_num_heads > 0 && num_heads % kv_num_heads == 0'
    d.require(kv_num_heads > 0, lambda: _enforce(k2))
    d.require(d.mod(num_heads, kv_num_heads) == 0, lambda: _enforce(k2))
    validate_dimension(d, num_heads, "num_heads")
    validate_dimension(d, kv_num_heads, "kv_num_heads")
    if causal not in (0, 1):
        raise _enforce("causal == 0 || causal == 1", "causal must be 0 or 1.")
    if not (local_window_size == -1 or 0 < local_window_size <= INT32_MAX):
        raise _enforce("local_window_size_attr == -1 || (local_window_size_attr > 0 && local_window_size_attr <= "
                       "std::numeric_limits<int>::max())",
                       "local_window_size must be -1 or greater than 0 (and not exceed INT_MAX).")
    if causal == 0 and local_window_size != -1:
        raise _enforce("is_unidirectional_ || local_window_size_ == -1",
                       "GroupQueryAttention (CUDA): local_window_size must be -1 when causal is 0.")
    if sliding_window_cache == 1 and local_window_size <= 0:
        raise _enforce("!sliding_window_cache_ || local_window_size_ > 0",
                       "GroupQueryAttention (CUDA): sliding_window_cache=1 requires local_window_size > 0.")
    if not (math.isfinite(qk_norm_epsilon) and qk_norm_epsilon > 0):
        raise _enforce("std::isfinite(qk_norm_epsilon_) && qk_norm_epsilon_ > 0.0f",
                       "GroupQueryAttention (CUDA): qk_norm_epsilon must be finite and positive.")
    return _quant_type(k_quant_type), _quant_type(v_quant_type)


def _before_check_inputs(k_quant: KvQuantization, v_quant: KvQuantization, k_scale: Shape | None,
                         v_scale: Shape | None, attention_bias: Shape | None, head_sink: Shape | None,
                         q_norm_weight: Shape | None, k_norm_weight: Shape | None, smooth_softmax: int) -> None:
    """C1-C6, CUDA ComputeInternal before CheckInputs (C4 and the scales' dtype: not expressible)."""
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise InvalidArgument("GroupQueryAttention (CUDA): q_norm_weight and k_norm_weight must be provided together.")
    if k_quant is not KvQuantization.NONE and k_scale is None:
        raise InvalidArgument("k_scale must be provided when k_quant_type is not NONE")
    if v_quant is not KvQuantization.NONE and v_scale is None:
        raise InvalidArgument("v_scale must be provided when v_quant_type is not NONE")
    if attention_bias is not None:
        if k_quant is not KvQuantization.NONE or v_quant is not KvQuantization.NONE:
            raise InvalidArgument("attention_bias with quantized KV cache is not implemented in GroupQueryAttention "
                                  "cuda kernel." + NOT_IMPLEMENTED)
        if smooth_softmax == 1 or head_sink is not None:
            raise InvalidArgument("attention_bias with smooth softmax or head_sink is not implemented in "
                                  "GroupQueryAttention cuda kernel." + NOT_IMPLEMENTED)


def _check_q_k_v(d: Any, query: Shape, key: Shape, value: Shape | None, n: Any, nk: Any) -> tuple[Any, ...]:
    """H3-H13 (Check_Q_K_V); return (B, S, L, q_hidden, H)."""
    if len(query) != 3:
        raise InvalidArgument(f"Input 'query' is expected to have 3 dimensions, got {len(query)}")
    b, s, q_hidden = _dims(d, query, "query")
    h = d.div(q_hidden, n)
    d.require(d.mod(h, 8) == 0, lambda: InvalidArgument(
        f"head_size must be a multiple of 8. Got head_size % 8 == {d.mod(h, 8)}"))
    if value is None:
        raise InvalidArgument(KV_BOTH)
    if len(key) != 3:
        raise InvalidArgument(f"Input 'key' is expected to have 3 dimensions, got {len(key)}")
    key = _dims(d, key, "key")
    d.require(key[0] == b, _fail("Input 'query' and 'key' shall have same dim 0 (batch size)"))
    kv_hidden = key[2]
    d.require(d.mod(kv_hidden, nk) == 0, lambda: InvalidArgument(
        "kv_hidden_size must be a multiple of kv_num_heads. Got kv_hidden_size % kv_num_heads == "
        f"{d.mod(kv_hidden, nk)}"))
    d.require(d.div(kv_hidden, nk) == h, lambda: InvalidArgument(
        "kv_hidden_size / kv_num_heads must be equal to head_size. Got kv_hidden_size / kv_num_heads == "
        f"{d.div(kv_hidden, nk)}"))
    if len(value) != 3:
        raise InvalidArgument(f"Input 'value' is expected to have 3 dimensions, got {len(value)}")
    value = _dims(d, value, "value")
    d.require(value[0] == b, _fail("Input 'query' and 'value' shall have same dim 0 (batch size)"))
    d.require(value[1] == key[1], _fail("Input 'key' and 'value' shall have same dim 1 (sequence length)"))
    d.require(value[2] == kv_hidden, _fail("Input 'value' is expected to have same hidden size as key."))
    return b, s, key[1], q_hidden, h


def _check_qkv(d: Any, query: Shape, value: Shape | None, n: Any, nk: Any) -> tuple[Any, ...]:
    """H14-H16 (Check_QKV, packed QKV); return (B, S, L = S, packed hidden, H)."""
    if len(query) != 3:
        raise InvalidArgument(f"Input 'query' is expected to have 3 dimensions, got {len(query)}")
    b, s, packed = _dims(d, query, "query")
    heads = d.add(n, d.mul(2, nk, what="2 * kv_num_heads"), what="num_heads + 2 * kv_num_heads")
    h = d.div(packed, heads)
    d.require(d.mod(h, 8) == 0, lambda: InvalidArgument(
        f"head_size must be a multiple of 8. Got head_size % 8 == {d.mod(h, 8)}"))
    if value is not None:
        raise InvalidArgument(KV_BOTH)
    return b, s, s, packed, h


def _check_past(d: Any, past_key: Shape, past_value: Shape, b: Any, nk: Any, h: Any, bit_width: int,
                cache_bytes: int) -> Any:
    """H17-H21 (CheckPast); return P, past_key dim 2. With a bit width, dim 3 is the head packed
    into T_CACHE elements: H * bits / (8 * sizeof(T_CACHE)) (CPU wheel: fp16 cache at 8 bits wants
    H / 2, at 4 bits H / 4; int8 / uint8 at 4 bits H / 2, at 8 bits H)."""
    for name, shape in (("past_key", past_key), ("past_value", past_value)):
        if len(shape) != 4:
            raise InvalidArgument(f"Input '{name}' is expected to have 4 dimensions, got {len(shape)}")
    pk, pv = _dims(d, past_key, "past_key"), _dims(d, past_value, "past_value")
    for name, shape in (("past_key", pk), ("past_value", pv)):
        d.require(shape[0] == b, lambda name=name, shape=shape: InvalidArgument(
            f"Input '{name}' dimension 0 should be batch_size, got {shape[0]}"))
    d.require(pk[2] == pv[2], lambda: InvalidArgument(
        "BNSH Input 'past_key' and 'past_value' should have same dimension 2 (max sequencelength or past sequence "
        f"length), got {pk[1]}"))  # ORT prints past_key's dim 1
    for name, shape in (("past_key", pk), ("past_value", pv)):
        d.require(shape[1] == nk, _fail(f"Input '{name}' shall have kv_num_heads"))
    packed_head = d.div(d.mul(h, bit_width, what="H * kv_cache_bit_width"), 8 * cache_bytes) if bit_width else h
    for name, shape in (("past_key", pk), ("past_value", pv)):
        d.require(shape[3] == packed_head, lambda name=name, shape=shape: InvalidArgument(
            f"Input '{name}' dimension 3 should match the packed KV head dimension, got {shape[3]} expected "
            f"{packed_head}"))
    return pk[2]


def _check_seqlens_k(d: Any, seqlens_k: Shape, b: Any) -> None:
    """H25-H27: the shape of seqlens_k (its values live on the device and are never checked)."""
    if len(seqlens_k) == 0:
        raise InvalidArgument("seqlens_k must be at least 1D, got scalar.")
    dims = _dims(d, seqlens_k, "seqlens_k")
    count = d.mul(*dims, what="seqlens_k elements")
    d.require(count == b, lambda: InvalidArgument(f"seqlens_k must have batch_size ({b}) elements, got {count}."))
    for axis, dim in enumerate(dims):
        d.require(d.any_(dim == 1, dim == b), lambda axis=axis, dim=dim: InvalidArgument(
            f"seqlens_k has unexpected shape. Each dimension must be 1 or batch_size ({b}), got dim[{axis}] = {dim}."))


def _check_total(d: Any, total: Any, total_shape: Shape, windowed: bool, p: Any, kv: Any) -> None:
    """H28-H31: total_sequence_length's shape and value T."""
    # IsScalarOr1ElementVector: a scalar or a one-element vector (CPU wheel: [1, 1] is refused).
    if len(total_shape) > 1:
        raise InvalidArgument("total_sequence_length tensor must be of one element.")
    for dim in _dims(d, total_shape, "total_sequence_length"):
        d.require(dim == 1, _fail("total_sequence_length tensor must be of one element."))
    d.require(total <= INT32_MAX, lambda: InvalidArgument(
        f"total_sequence_length = {total} does not fit its int32 tensor"))
    d.require(total > 0, lambda: InvalidArgument(f"total_sequence_length must be positive, got {total}."))
    if windowed:
        return
    d.require(total >= kv, lambda: InvalidArgument(
        "total_sequence_length must be at least kv_sequence_length for a non-sliding cache. "
        f"Got {total} and {kv}."))
    d.require(d.any_(total == d.add(p, kv, what="P + L"), total <= p), lambda: InvalidArgument(
        "total_sequence_length must equal past_sequence_length + kv_sequence_length for a dynamic cache, or be no "
        f"greater than past_sequence_length for a static cache. Got total_sequence_length={total}, "
        f"past_sequence_length={p}, kv_sequence_length={kv}."))


def _check_windowed(d: Any, has_past: bool, p: Any, kv: Any, h: Any, window: int, bit_width: int) -> None:
    """H32-H37: sliding_window_cache = 1."""
    if window <= 0:
        raise InvalidArgument("sliding_window_cache=1 requires local_window_size > 0.")
    if not has_past:
        raise InvalidArgument("sliding_window_cache=1 requires past_key and past_value to be present.")
    d.require(kv != 0, _fail("sliding_window_cache=1 is not supported when kv_sequence_length == 0 (shared KV)."))
    if bit_width == 8:
        d.require(d.mod(h, 16) == 0, lambda: InvalidArgument(
            f"sliding_window_cache: head_size ({h}) must be a multiple of 16 for an 8-bit KV cache."))
    if bit_width == 4:
        d.require(d.mod(h, 32) == 0, lambda: InvalidArgument(
            f"sliding_window_cache: head_size ({h}) must be a multiple of 32 for a 4-bit KV cache."))
    d.require(p >= window, lambda: InvalidArgument(
        f"sliding_window_cache: KV cache capacity ({p}) must be at least local_window_size ({window})."))


def _shape_text(shape: list[Any]) -> str:
    """TensorShape's operator<<: {d0,d1,...}."""
    return "{" + ",".join(str(dim) for dim in shape) + "}"


def _rotary_dims(d: Any, cache: Shape, name: str) -> list[Any]:
    """A rotary cache's dimensions: dimension 0 (the positions it holds) is only compared with the
    total, as an int64 (ORT's estimate test ValidatesPartialRotaryCaches sizes caches of INT64_MAX
    rows); the others fit the int32 ABI."""
    for axis, dim in enumerate(cache):
        if axis:
            validate_dimension(d, dim, f"{name}.shape[{axis}]")
        else:
            d.require(dim >= 0, lambda: InvalidArgument(f"{name}.shape[0] = {dim} must be non-negative"))
    return list(cache)


def _check_rotary(d: Any, cos_cache: Shape | None, sin_cache: Shape | None, h: Any, total: Any) -> None:
    """H38-H41 and H43 (H42 reads seqlens_k's values on the CPU: it never runs on CUDA)."""
    if cos_cache is None and sin_cache is None:
        return
    if cos_cache is None or sin_cache is None:
        raise InvalidArgument("Input 'cos_cache' and 'sin_cache' shall be both present or both absent.")
    cos, sin = _rotary_dims(d, cos_cache, "cos_cache"), _rotary_dims(d, sin_cache, "sin_cache")
    if len(cos) != len(sin):
        raise InvalidArgument(f"cos_cache and sin_cache must have the same shape. Got cos_cache shape "
                              f"{_shape_text(cos)} and sin_cache shape {_shape_text(sin)}.")
    d.require(d.all_(*(c == s for c, s in zip(cos, sin))), lambda: InvalidArgument(
        f"cos_cache and sin_cache must have the same shape. Got cos_cache shape {_shape_text(cos)} and sin_cache "
        f"shape {_shape_text(sin)}."))
    d.require(d.mod(h, 16) == 0, lambda: InvalidArgument(
        f"head_size shall be a multiple of 16. Got head_size % 16 == {d.mod(h, 16)}"))
    if len(cos) < 2:  # ORT reads dims 0 and 1 unchecked (the CPU process aborts)
        raise InvalidArgument(f"cos_cache must have dims 0 and 1 (max_sequence_length, rotary_dim / 2), got shape "
                              f"{cos} (attnws: ORT reads them unchecked)")
    d.require(cos[0] >= total, _fail("cos_cache dimension 0 shall not be less than total_sequence_length."))
    d.require(d.all_(cos[1] <= d.mul(d.div(h, 16), 8, what="(head_size / 16) * 8"), d.mod(cos[1], 8) == 0),
              _fail("cos_cache dimension 1 must be <= head_size / 2 and a multiple of 8."))


def _check_custom(d: Any, position_ids: Shape | None, attention_bias: Shape | None, head_sink: Shape | None,
                  b: Any, s: Any, n: Any, total: Any, windowed: bool) -> None:
    """X1-X10, CheckCustomAttentionInputs (X3 is enabled by the CUDA kernel only)."""
    if position_ids is not None:
        if len(position_ids) < 2:  # ORT reads dims 0 and 1 unchecked (the CPU process aborts)
            raise InvalidArgument(f"position_ids must have dims 0 and 1 (batch_size, sequence_length), got shape "
                                  f"{list(position_ids)} (attnws: ORT reads them unchecked)")
        ids = _dims(d, position_ids, "position_ids")
        d.require(ids[0] == b, lambda: InvalidArgument(
            f"position_ids dimension 0 must be equal to the batch size, got {ids[0]}"))
        d.require(ids[1] >= s, lambda: InvalidArgument(
            f"position_ids dimension 1 must be at least sequence length, got {ids[1]}"))
    if attention_bias is not None:
        if windowed:
            raise InvalidArgument("attention_bias with sliding_window_cache is not implemented in "
                                  "GroupQueryAttention." + NOT_IMPLEMENTED)
        if len(attention_bias) != 4:
            raise InvalidArgument(f"attention_bias must be a 4D tensor, got {len(attention_bias)} dimensions")
        bias = _dims(d, attention_bias, "attention_bias")
        d.require(d.any_(bias[0] == b, bias[0] == 1), lambda: InvalidArgument(
            f"attention_bias dimension 0 must be equal to the batch size or 1, got {bias[0]}"))
        d.require(d.any_(bias[1] == n, bias[1] == 1), lambda: InvalidArgument(
            f"attention_bias dimension 1 must be equal to the num heads or 1, got {bias[1]}"))
        d.require(bias[2] == s, lambda: InvalidArgument(
            f"attention_bias dimension 2 must be equal to the sequence length, got {bias[2]}"))
        d.require(bias[3] == total, lambda: InvalidArgument(
            f"attention_bias dimension 3 must be equal to total_sequence_length, got {bias[3]}"))
    if head_sink is not None:
        if len(head_sink) != 1:
            raise InvalidArgument("head_sink must be a 1D tensor")
        (sinks,) = _dims(d, head_sink, "head_sink")
        d.require(sinks == n, lambda: InvalidArgument(
            f"head_sink dimension 0 must be equal to the num heads, got {sinks}"))


def _norm_weight(d: Any, name: str, shape: Shape, h: Any) -> None:
    """D2 / D3: q_norm_weight and k_norm_weight are (H,)."""
    error = _fail(f"{name} must be a 1D tensor of shape (head_size={h})")
    if len(shape) != 1:
        raise error()
    (length,) = _dims(d, shape, name)
    d.require(length == h, error)


def build_gqa_problem(
    query: Shape,
    key: Shape | None = None,
    value: Shape | None = None,
    past_key: Shape | None = None,
    past_value: Shape | None = None,
    seqlens_k: Shape | None = None,
    total_sequence_length: Any = None,
    cos_cache: Shape | None = None,
    sin_cache: Shape | None = None,
    position_ids: Shape | None = None,
    attention_bias: Shape | None = None,
    head_sink: Shape | None = None,
    k_scale: Shape | None = None,
    v_scale: Shape | None = None,
    q_norm_weight: Shape | None = None,
    k_norm_weight: Shape | None = None,
    *,
    num_heads: Any,
    kv_num_heads: Any,
    local_window_size: int = -1,
    causal: int = 1,
    sliding_window_cache: int = 0,
    do_rotary: int = 0,
    softcap: float = 0.0,
    smooth_softmax: int = 0,
    qk_norm_epsilon: float = 1e-6,
    kv_cache_bit_width: int = 0,
    k_quant_type: str = "NONE",
    v_quant_type: str = "NONE",
    is_bf16: bool = False,
    cache_dtype: str = "same",
    has_present: bool = True,
    kv_share_buffer: bool = True,
    total_sequence_length_shape: Shape = (),
    d: Any = CONCRETE,
) -> GqaProblem:
    """Return the GroupQueryAttention problem for ORT's input shapes (absent inputs None) on the
    CUDA kernel, or raise the error ORT reports (`InvalidArgument`) or `Unsupported`.

    `total_sequence_length` is T, the value of input 6 (`total_sequence_length_shape` its shape);
    `cache_dtype` is T_CACHE: "same" (T), "int8", "uint8" (packed int4) or "fp8";
    `has_present` says whether the node has the present_key / present_value outputs and
    `kv_share_buffer` whether past and present alias (ignored without a past; a condition on the
    solver's terms where the layout follows T and P: `problem.shares_buffer`)."""
    if cache_dtype not in CACHE_DTYPES:
        raise InvalidArgument(f"no CUDA GroupQueryAttention kernel is registered for T_CACHE = {cache_dtype!r} "
                              f"(registered: {', '.join(CACHE_DTYPES)})")
    k_quant, v_quant = _constructor(d, num_heads, kv_num_heads, local_window_size, causal, sliding_window_cache,
                                    qk_norm_epsilon, k_quant_type, v_quant_type)
    quantized = KvQuantization.NONE is not k_quant or KvQuantization.NONE is not v_quant
    _before_check_inputs(k_quant, v_quant, k_scale, v_scale, attention_bias, head_sink, q_norm_weight,
                         k_norm_weight, smooth_softmax)

    # CheckInputs(..., max_threads_per_block): H0-H45.
    n, nk = num_heads, kv_num_heads
    d.require(n <= MAX_THREADS_PER_BLOCK, _fail(f"num_heads should be no larger than {MAX_THREADS_PER_BLOCK}"))
    d.require(d.mod(n, nk) == 0, lambda: InvalidArgument(
        f"num_heads must be a multiple of kv_num_heads. Got num_heads % kv_num_heads == {d.mod(n, nk)}"))
    if kv_cache_bit_width not in (0, 4, 8):
        raise InvalidArgument(f"kv_cache_bit_width must be 0, 4 or 8. Got kv_cache_bit_width == {kv_cache_bit_width}")
    if query is None:
        raise InvalidArgument("GroupQueryAttention input 'query' is required")
    is_packed_qkv = key is None
    if is_packed_qkv:
        b, s, kv, hidden, h = _check_qkv(d, query, value, n, nk)
        width, heads = hidden, d.add(n, d.mul(2, nk, what="2 * kv_num_heads"), what="N + 2 * Nk")
    else:
        b, s, kv, hidden, h = _check_q_k_v(d, query, key, value, n, nk)
        width, heads = hidden, n
    has_past = past_key is not None and past_value is not None
    p: Any = 0
    if has_past:
        p = _check_past(d, past_key, past_value, b, nk, h, kv_cache_bit_width, CACHE_DTYPES[cache_dtype] or 2)
        d.require(d.any_(kv == s, kv == 0), lambda: InvalidArgument(
            "query and key must have the same sequence length when past_key is provided, or key sequence length "
            f"must be 0 for shared KV (no new KV to append). Got sequence_length={s}, kv_sequence_length={kv}"))
    elif past_key is not None or past_value is not None:
        raise InvalidArgument("Input 'past_key' and 'past_value' shall be both present or both absent.")
    else:
        d.require(kv == s, lambda: InvalidArgument(
            "query and key must have the same sequence length when past_key is not provided. Got "
            f"sequence_length={s}, kv_sequence_length={kv}"))
    if seqlens_k is None:
        raise InvalidArgument("GroupQueryAttention input 'seqlens_k' is required (ONNX schema: input 5)")
    _check_seqlens_k(d, seqlens_k, b)
    if total_sequence_length is None:
        raise InvalidArgument("GroupQueryAttention input 'total_sequence_length' is required (ONNX schema: input 6)")
    t = total_sequence_length
    windowed = sliding_window_cache == 1  # the kernels test == 1 (CPU wheel: 2 is a full-length cache)
    _check_total(d, t, total_sequence_length_shape, windowed, p, kv)
    if windowed:
        _check_windowed(d, has_past, p, kv, h, local_window_size, kv_cache_bit_width)
    _check_rotary(d, cos_cache, sin_cache, h, t)
    d.require(d.any_(s <= 1, s == t, b == 1),
              _fail("batch_size must be 1 when sequence_length > 1 and past context is given."))
    d.require(d.any_(s > 1, s == t, s == 1), _fail("sequence_length shall be 1 when it is not prompt."))
    _check_custom(d, position_ids, attention_bias, head_sink, b, s, n, t, windowed)

    # CUDA ComputeInternal after CheckInputs: D1-D3, D5-D8 (D4, the norm weights' dtype, is not expressible).
    if windowed:
        d.require(p == local_window_size, lambda: InvalidArgument(
            f"GroupQueryAttention (CUDA): sliding_window_cache=1 requires the KV cache capacity ({p}) to equal "
            f"local_window_size ({local_window_size})."))
    if q_norm_weight is not None:
        _norm_weight(d, "q_norm_weight", q_norm_weight, h)
        _norm_weight(d, "k_norm_weight", k_norm_weight, h)
    if do_rotary == 1 and cos_cache is None:
        raise InvalidArgument("cos_cache and sin_cache must be passed to GroupQueryAttention when do_rotary = 1")
    borrowed = not has_present
    if borrowed and (quantized or not has_past):
        raise InvalidArgument("present_key and present_value are required unless borrowing a non-quantized KV cache")
    share = d.all_(has_past, d.any_(kv_share_buffer, borrowed))
    if has_past and not borrowed and not windowed:  # present is (B, Nk, max(T, P), H): it aliases past only if T <= P
        d.require(d.any_(d.not_(share), t <= p), lambda: InvalidArgument(
            f"present_key / present_value of shape (B, Nk, max(T, P) = {t}, H) cannot share the past buffer of length "
            f"P = {p}: a shared past/present buffer needs total_sequence_length <= P (attnws: ORT's output "
            "allocation fails on the bound buffer; a separate present, --cache-layout separate, takes T = P + S)"))
    if windowed:
        d.require(share, _fail("sliding_window_cache=1 requires past_key/present_key and past_value/present_value to "
                               "share the same buffer."))
    if borrowed:
        d.require(t <= p, _fail("total_sequence_length exceeds the borrowed KV cache capacity"))

    # CheckInputs floors H = hidden / heads without a divisibility check; the kernels then read
    # heads * H of each row's columns (ORT's CPU kernel fails on such a node): not sized.
    divisor = "num_heads + 2 * kv_num_heads" if is_packed_qkv else "num_heads"
    d.require(d.mod(width, heads) == 0, lambda: Unsupported(
        f"query hidden size {width} is not a multiple of {divisor} = {heads}: ORT floors the head size to {h} and its "
        "kernels then read only part of each row"))
    element_bytes = CACHE_DTYPES[cache_dtype] or 2
    return GqaProblem(
        batch_size=b, sequence_length=s, kv_sequence_length=kv, past_sequence_length=p, total_sequence_length=t,
        num_heads=n, kv_num_heads=nk, head_size=h, is_bf16=is_bf16, has_past=has_past, kv_share_buffer=share,
        is_packed_qkv=is_packed_qkv, do_rotary=do_rotary == 1, local_window_size=local_window_size,
        sliding_window_cache=windowed, causal=causal == 1, softcap=softcap, smooth_softmax=smooth_softmax == 1,
        has_head_sink=head_sink is not None, use_qk_norm=q_norm_weight is not None,
        has_attention_bias=attention_bias is not None, cache_element_size=element_bytes,
        kv_cache_bit_width=kv_cache_bit_width, k_quantization=k_quant, v_quantization=v_quant,
        cache_is_fp8=cache_dtype == "fp8",
    )
