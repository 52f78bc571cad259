"""The PagedAttention builder: ORT's input shapes and attributes to a validated `PagedProblem`.

`build_paged_problem` makes the checks ONNX Runtime 1.31.1's CUDA PagedAttention kernel makes of a
node's shapes and attributes, with ORT's texts (`docs/research/paged-attention.md` §2.2-§2.3).
No 1.31.1 source copy is stored: the texts are the 1.31.1 CUDA binary's (strings 369881-369966 of
`libonnxruntime_providers_cuda.so`), and the order is their order in the binary's string table,
which follows the source: the constructor, `paged_attention_helper::CheckInputs` (369915-369966),
then ComputeInternal's quantization and metadata-value checks (369898-369914; their place after
CheckInputs is inferred from the fork copy ykhrustalev f5c8354f, §3.3). Element types are not
expressible here (the inputs are typed by `is_bf16` and `cache_type` only).

The step's lengths are values, not shapes: `max_query_len` S and `max_kv_len` L are what the
kernel sizes with (the attention_metadata bounds when the input is given, the step's own maxima
copied back otherwise), and `kv_lower_bound` the metadata's third entry. ORT never checks them
against the shapes; attnws requires what any step the shapes can carry has (S <= T <= B * S,
S <= L <= M * bs), each refusal saying it is attnws's, not ORT's.
"""

from __future__ import annotations

import math
from typing import Any

from ..domain import CONCRETE
from ..errors import InvalidArgument
from ..validation import Shape, validate_dimension
from .problem import CACHE_TYPES, METADATA, KvQuantization, PagedProblem

QUANT_TYPES = {"NONE": KvQuantization.NONE, "PER_TENSOR": KvQuantization.PER_TENSOR,
               "PER_CHANNEL": KvQuantization.PER_CHANNEL}
KV_BOTH = "Input 'key' and 'value' shall be both present, or both absent in the case of packed qkv."
BLOCK_SIZES = tuple(2**k for k in range(4, 31))  # a power of two >= 16 within int32
INT4_MAX_HEAD_SIZE = 1024


def _fail(message: str) -> Any:
    return lambda: InvalidArgument(message)


def _dims(d: Any, shape: Shape, name: str) -> list[Any]:
    for axis, dim in enumerate(shape):
        validate_dimension(d, dim, f"{name}.shape[{axis}]")
    return list(shape)


def _constructor(num_heads: Any, kv_num_heads: Any, qk_norm_epsilon: float, kv_cache_layout: str,
                 v_head_size: int, rotary_offset: int, k_quant_type: str, v_quant_type: str) -> tuple[Any, Any]:
    """The kernel's constructor: its attribute checks (ORT_ENFORCE: session creation fails)."""
    if num_heads is None or kv_num_heads is None:
        raise InvalidArgument(f"PagedAttention needs the {'num_heads' if num_heads is None else 'kv_num_heads'} "
                              "attribute (required by the schema)")
    if not (math.isfinite(qk_norm_epsilon) and qk_norm_epsilon > 0):
        raise InvalidArgument("qk_norm_epsilon must be a positive finite number")
    if kv_cache_layout not in ("SEPARATE", "LATENT"):
        raise InvalidArgument(f"'kv_cache_layout' must be 'SEPARATE' or 'LATENT', got '{kv_cache_layout}'")
    if v_head_size < 0:
        raise InvalidArgument(f"'v_head_size' must be non-negative, got {v_head_size}")
    if rotary_offset < 0:
        raise InvalidArgument(f"'rotary_offset' must be non-negative, got {rotary_offset}")
    quant = []
    for text in (k_quant_type, v_quant_type):
        if text.upper() not in QUANT_TYPES:
            raise InvalidArgument(f"Invalid KV quantization type: '{text}'. Valid values are: NONE, PER_TENSOR, "
                                  "PER_CHANNEL.")
        quant.append(QUANT_TYPES[text.upper()])
    return quant[0], quant[1]


def _check_q_k_v(d: Any, query: Shape, key: Shape | None, value: Shape | None, n: Any, nk: Any,
                 latent: bool) -> tuple[Any, Any, bool]:
    """The query, key and value (or the packed query); return (T, H, packed)."""
    if latent and key is None:
        raise InvalidArgument("Input 'key' is required when 'kv_cache_layout' is 'LATENT'.")
    if len(query) != 2:
        raise InvalidArgument(f"Input 'query' is expected to have 2 dimensions, got {len(query)}")
    t, hidden = _dims(d, query, "query")
    if key is None:
        if value is not None:
            raise InvalidArgument(KV_BOTH)
        heads = d.add(n, d.mul(2, nk, what="2 * kv_num_heads"), what="num_heads + 2 * kv_num_heads")
        d.require(d.mod(hidden, heads) == 0, lambda: InvalidArgument(
            f"Packed input 'query' hidden size must be a multiple of num_heads + 2 * kv_num_heads. Got {hidden}"))
        h = d.div(hidden, heads)
        d.require(d.mod(h, 8) == 0, lambda: InvalidArgument(
            f"head_size must be a multiple of 8. Got head_size % 8 == {d.mod(h, 8)}"))
        return t, h, True
    d.require(d.mod(hidden, n) == 0, lambda: InvalidArgument(
        f"Input 'query' hidden size must be a multiple of num_heads. Got {hidden}"))
    h = d.div(hidden, n)
    d.require(d.mod(h, 8) == 0, lambda: InvalidArgument(
        f"head_size must be a multiple of 8. Got head_size % 8 == {d.mod(h, 8)}"))
    if len(key) != 2:
        raise InvalidArgument(f"Input 'key' is expected to have 2 dimensions, got {len(key)}")
    k = _dims(d, key, "key")
    d.require(k[0] == t, _fail("Input 'query' and 'key' shall have same dim 0 (token count)"))
    if latent:
        expected = d.mul(nk, h, what="kv_num_heads * head_size")
        d.require(k[1] == expected, lambda: InvalidArgument(
            f"Input 'key' is expected to have hidden size kv_num_heads * head_size = {expected}, got {k[1]}"))
        if value is not None:
            raise InvalidArgument("Input 'value' must be absent when 'kv_cache_layout' is 'LATENT': the value of "
                                  "every head is the leading 'v_head_size' channels of its key.")
        return t, h, False
    if value is None:
        raise InvalidArgument(KV_BOTH)
    d.require(d.mod(k[1], nk) == 0, lambda: InvalidArgument(
        f"kv_hidden_size must be a multiple of kv_num_heads. Got kv_hidden_size % kv_num_heads == {d.mod(k[1], nk)}"))
    d.require(d.div(k[1], nk) == h, lambda: InvalidArgument(
        f"kv_hidden_size / kv_num_heads must be equal to head_size. Got kv_hidden_size / kv_num_heads == "
        f"{d.div(k[1], nk)}"))
    if len(value) != 2:
        raise InvalidArgument(f"Input 'value' is expected to have 2 dimensions, got {len(value)}")
    v = _dims(d, value, "value")
    d.require(v[0] == t, _fail("Input 'query' and 'value' shall have same dim 0 (token count)"))
    d.require(v[1] == k[1], _fail("Input 'value' is expected to have same hidden size as key."))
    return t, h, False


def _check_latent(d: Any, h: Any, v_head_size: int, has_scale: bool, nk: Any, value_cache: Shape | None,
                  head_sink: Shape | None, qk_norm: bool, v_quantized: bool) -> Any:
    """The latent layout's own checks; return Hv."""
    d.require(v_head_size <= h, lambda: InvalidArgument(
        f"'v_head_size' must be 0 (meaning head_size) or in [1, head_size] = [1, {h}], got {v_head_size} when "
        "'kv_cache_layout' is 'LATENT'."))
    hv = h if v_head_size == 0 else v_head_size
    d.require(d.any_(has_scale, hv == h), lambda: InvalidArgument(
        f"An explicit 'scale' attribute is required when 'v_head_size' ({hv}) differs from head_size ({h}): the "
        "default 1/sqrt(head_size) is not the intended scale for absorbed MLA."))
    if value_cache is not None:
        raise InvalidArgument("Input 'value_cache' must be absent when 'kv_cache_layout' is 'LATENT': the value cache "
                              "is the leading 'v_head_size' channels of 'key_cache'.")
    d.require(nk == 1, lambda: InvalidArgument(f"'kv_num_heads' must be 1 when 'kv_cache_layout' is 'LATENT', got {nk}"))
    if head_sink is not None:
        raise InvalidArgument("Input 'head_sink' is not supported when 'kv_cache_layout' is 'LATENT'.")
    if qk_norm:
        raise InvalidArgument("Inputs 'q_norm_weight' / 'k_norm_weight' are not supported when 'kv_cache_layout' is "
                              "'LATENT': DeepSeek normalizes the latent projections in the graph, before absorption.")
    if v_quantized:
        raise InvalidArgument("Input 'v_scale' and attributes 'v_quant_type' / 'v_cache_dtype' must be unset when "
                              "'kv_cache_layout' is 'LATENT': the value elements are the key elements, so 'k_scale' "
                              "and 'k_cache_dtype' describe both.")
    return hv


def _check_caches(d: Any, key_cache: Shape, value_cache: Shape | None, nk: Any, h: Any, latent: bool,
                  cache_type: str | None) -> tuple[Any, Any]:
    """The paged caches; return (num_blocks, block_size)."""
    if not latent and value_cache is None:
        raise InvalidArgument("Input 'value_cache' is required unless 'kv_cache_layout' is 'LATENT'.")
    if len(key_cache) != 4:
        raise InvalidArgument(f"Input 'key_cache' is expected to have 4 dimensions, got {len(key_cache)}")
    blocks, bs, heads, head = _dims(d, key_cache, "key_cache")
    d.require(d.member(bs, BLOCK_SIZES), lambda: InvalidArgument(
        f"block_size must be a power of two and at least 16. Got block_size == {bs}"))
    d.require(heads == nk, lambda: InvalidArgument(f"Input 'key_cache' shall have kv_num_heads, got {heads}"))
    packed = d.div(d.add(h, 1, what="head_size + 1"), 2) if cache_type == "int4" else h
    d.require(head == packed, lambda: InvalidArgument(
        f"Input 'key_cache' dimension 3 should be same as head_size, got {head}"))
    if value_cache is not None:
        if len(value_cache) != 4:
            raise InvalidArgument(f"Input 'value_cache' is expected to have 4 dimensions, got {len(value_cache)}")
        vb, vbs, vheads, vhead = _dims(d, value_cache, "value_cache")
        d.require(vb == blocks, lambda: InvalidArgument(f"Input 'value_cache' dimension 0 should be num_blocks, got {vb}"))
        d.require(vbs == bs, lambda: InvalidArgument(f"Input 'value_cache' dimension 1 should be block_size, got {vbs}"))
        d.require(vheads == heads, lambda: InvalidArgument(
            f"Input 'key_cache' and 'value_cache' dimension 2 (kv num heads) should be the same, got {vheads}"))
        d.require(vhead == head, lambda: InvalidArgument(
            f"Input 'key_cache' and 'value_cache' dimension 3 (head size) should be the same, got {vhead}"))
    if latent and cache_type == "int4":
        raise InvalidArgument("LATENT does not support an INT4 cache.")
    if cache_type == "int4":
        d.require(h <= INT4_MAX_HEAD_SIZE, _fail("INT4 caches require head_size <= 1024."))
    return blocks, bs


def _check_positions(d: Any, cumulative: Shape, past_seqlens: Shape, block_table: Shape, slot_mapping: Shape | None,
                     t: Any) -> tuple[Any, Any]:
    """The sequence-length tensors, the block table and slot_mapping; return (B, M)."""
    if len(cumulative) != 1:
        raise InvalidArgument("cumulative_sequence_length must be shape (batch_size + 1).")
    (count,) = _dims(d, cumulative, "cumulative_sequence_length")
    d.require(count >= 1, _fail("cumulative_sequence_length must be shape (batch_size + 1)."))
    b = count - 1
    if len(past_seqlens) != 1:
        raise InvalidArgument("seqlens must be shape (batch_size).")
    (seqs,) = _dims(d, past_seqlens, "past_seqlens")
    d.require(seqs == b, _fail("seqlens must be shape (batch_size)."))
    if len(block_table) != 2:
        raise InvalidArgument("block_table must be 2D.")
    rows, m = _dims(d, block_table, "block_table")
    d.require(rows == b, lambda: InvalidArgument(f"block_table dimension 0 should be batch_size, got {rows}"))
    if slot_mapping is not None:
        if len(slot_mapping) != 1:
            raise InvalidArgument(f"Input 'slot_mapping' is expected to have 1 dimension, got {len(slot_mapping)}")
        (slots,) = _dims(d, slot_mapping, "slot_mapping")
        d.require(slots == t, lambda: InvalidArgument(
            f"Input 'slot_mapping' dimension 0 should be token_count ({t}), got {slots}"))
    return b, m


def _check_norm_rotary(d: Any, q_norm_weight: Shape | None, k_norm_weight: Shape | None, qk_norm_epsilon: float,
                       cos_cache: Shape | None, sin_cache: Shape | None, h: Any, rotary_offset: int) -> None:
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise InvalidArgument("Input 'q_norm_weight' and 'k_norm_weight' must be provided together.")
    for name, shape in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)):
        if shape is not None:
            message = f"Input '{name}' must be a 1D tensor of shape (head_size) = ({h}), got {list(shape)}"
            if len(shape) != 1:
                raise InvalidArgument(message)
            d.require(_dims(d, shape, name)[0] == h, _fail(message))
    if q_norm_weight is not None and not qk_norm_epsilon > 0:
        raise InvalidArgument(f"qk_norm_epsilon must be positive, got {qk_norm_epsilon}")
    if (cos_cache is None) != (sin_cache is None):
        raise InvalidArgument("Input 'cos_cache' and 'sin_cache' shall be both present or both absent.")
    if rotary_offset % 8:
        raise InvalidArgument(f"'rotary_offset' must be non-negative and a multiple of 8, got {rotary_offset}")
    if cos_cache is not None:
        cos = _dims(d, cos_cache, "cos_cache")
        if len(cos) != 2:
            raise InvalidArgument(f"cos_cache must have 2 dimensions (max total seqlen, rotary_dim / 2), got {cos} "
                                  "(attnws: ORT reads them unchecked)")
        rotary_dim = d.mul(cos[1], 2, what="rotary_dim")
        end = d.add(rotary_offset, rotary_dim, what="rotary_offset + rotary_dim")
        d.require(end <= h, lambda: InvalidArgument(
            f"'rotary_offset' + rotary_dim must not exceed head_size. Got {rotary_offset} + {rotary_dim} > {h}"))


def _check_metadata(metadata: str, attention_metadata: Shape | None) -> None:
    if metadata not in METADATA:
        raise InvalidArgument(f"metadata {metadata!r}: expected one of {METADATA}")
    if attention_metadata is not None and (len(attention_metadata) != 1 or attention_metadata[0] not in (2, 3)):
        raise InvalidArgument(f"Input 'attention_metadata' must have shape (2) or (3), got {list(attention_metadata)}")


def _check_quantization(d: Any, cache_type: str | None, k_quant: KvQuantization, v_quant: KvQuantization,
                        k_scale: Shape | None, v_scale: Shape | None, nk: Any, h: Any, latent: bool) -> None:
    """ComputeInternal's quantization checks: a quantization type exactly when the cache is
    quantized, and the scale of each."""
    sides = (("k", k_quant, k_scale),) if latent else (("k", k_quant, k_scale), ("v", v_quant, v_scale))
    for side, quant, scale in sides:
        attribute = f"{side}_quant_type"
        if cache_type is not None and quant is KvQuantization.NONE:
            raise InvalidArgument(f"The KV cache has a quantized element type, so '{attribute}' must be 'PER_TENSOR' "
                                  "or 'PER_CHANNEL'.")
        if cache_type is None and quant is not KvQuantization.NONE:
            raise InvalidArgument(f"'{attribute}' is set, but the KV cache element type is not quantized. Use an int8, "
                                  f"float8e4m3fn, or packed int4 cache, or set '{attribute}' to 'NONE'.")
        if quant is KvQuantization.NONE:
            if scale is not None:
                raise InvalidArgument(f"Input '{side}_scale' must not be provided when '{attribute}' is 'NONE'.")
            continue
        if scale is None:
            raise InvalidArgument(f"Input '{side}_scale' is required when '{attribute}' is not 'NONE'.")
        dims = _dims(d, scale, f"{side}_scale")
        if quant is KvQuantization.PER_TENSOR:
            count = d.mul(*dims, what=f"{side}_scale elements") if dims else 1
            d.require(count == 1, lambda: InvalidArgument(
                f"Input '{side}_scale' must have exactly 1 element for PER_TENSOR quantization, got {count}"))
        else:
            message = (f"Input '{side}_scale' must have shape (kv_num_heads, 1, head_size) = ({nk}, 1, {h}) for "
                       f"PER_CHANNEL quantization, got {dims}")
            if len(dims) != 3:
                raise InvalidArgument(message)
            d.require(d.all_(dims[0] == nk, dims[1] == 1, dims[2] == h), _fail(message))


def _check_step(d: Any, b: Any, t: Any, s: Any, length: Any, bs: Any, m: Any, metadata: str,
                lower: Any) -> tuple[Any, Any]:
    """ComputeInternal's metadata values, then what attnws requires of the step's lengths; return
    the (S, L) the kernel sizes with. ORT clamps the metadata's bounds: S when 0 < S < T, else T;
    L when 0 < L < M * block_size, else M * block_size (0 is "unknown")."""
    capacity = d.mul(m, bs, what="M * block_size")
    d.require(d.all_(b >= 1, t >= 1), lambda: InvalidArgument(
        f"B = {b}, T = {t}: attnws sizes steps with at least one sequence and one new token"))
    if metadata == "bounds":
        d.require(d.all_(s >= 0, length >= 0, lower >= 0), lambda: InvalidArgument(
            f"PagedAttention: 'attention_metadata' entries must be non-negative, got [{s}, {length}, {lower}]. "
            "Use 0 for 'unknown'."))
        d.require(lower <= length, lambda: InvalidArgument(
            f"PagedAttention: attention_metadata max_kv_len_lower_bound ({lower}) must not exceed max_kv_len_bound "
            f"({length})"))
        s = d.ite(d.all_(s > 0, s < t), s, t)
        length = d.ite(d.all_(length > 0, length < capacity), length, capacity)
    d.require(d.all_(s >= 1, s <= t, t <= d.mul(b, s, what="B * S")), lambda: InvalidArgument(
        f"S = {s} with T = {t} over B = {b}: the longest sequence's new tokens S satisfy S <= T <= B * S "
        "(attnws: ORT trusts the lengths)"))
    d.require(d.all_(length >= 1, length <= capacity) if metadata == "bounds" else
              d.all_(length >= s, length <= capacity), lambda: InvalidArgument(
        f"L = {length}: the longest key length satisfies S = {s} <= L <= M * block_size = {capacity} (the block table "
        "covers every sequence; attnws: ORT trusts the lengths)"))
    return s, length


def build_paged_problem(
    *, query: Shape, key: Shape | None = None, value: Shape | None = None, key_cache: Shape,
    value_cache: Shape | None = None, cumulative_sequence_length: Shape, past_seqlens: Shape, block_table: Shape,
    cos_cache: Shape | None = None, sin_cache: Shape | None = None, slot_mapping: Shape | None = None,
    head_sink: Shape | None = None, q_norm_weight: Shape | None = None, k_norm_weight: Shape | None = None,
    k_scale: Shape | None = None, v_scale: Shape | None = None, attention_metadata: Shape | None = None,
    num_heads: Any, kv_num_heads: Any, max_query_len: Any, max_kv_len: Any, kv_lower_bound: Any = 0,
    scale: float | None = None, softcap: float = 0.0, local_window_size: int = -1, is_causal: int = 1,
    do_rotary: int = 0, rotary_offset: int = 0, qk_norm_epsilon: float = 1e-6, kv_cache_layout: str = "SEPARATE",
    v_head_size: int = 0, cache_type: str | None = None, k_quant_type: str = "NONE", v_quant_type: str = "NONE",
    is_bf16: bool = False, d: Any = CONCRETE,
) -> PagedProblem:
    """Return the validated problem, or raise InvalidArgument with ORT's text for the first check
    ORT fails. `cache_type`: None (the query's type) or a `CACHE_TYPES` key; `attention_metadata`:
    the input's shape (None: absent), whose values are `max_query_len`, `max_kv_len` and
    `kv_lower_bound`; without it those are the step's own maxima."""
    k_quant, v_quant = _constructor(num_heads, kv_num_heads, qk_norm_epsilon, kv_cache_layout, v_head_size,
                                    rotary_offset, k_quant_type, v_quant_type)
    if cache_type is not None and cache_type not in CACHE_TYPES:
        raise InvalidArgument(f"Invalid KV cache data type: '{cache_type}'. Valid values are: '' (use the cache "
                              "tensor's element type), float16, bfloat16, int8, float8e4m3fn, int4, float4e2m1.")
    latent = kv_cache_layout == "LATENT"
    n, nk = num_heads, kv_num_heads
    for value_, name in ((n, "num_heads"), (nk, "kv_num_heads")):
        validate_dimension(d, value_, name)
    d.require(d.all_(n > 0, nk > 0), lambda: InvalidArgument(f"num_heads = {n} and kv_num_heads = {nk} must be positive"))
    d.require(d.mod(n, nk) == 0, lambda: InvalidArgument(
        f"num_heads must be a multiple of kv_num_heads. Got num_heads % kv_num_heads == {d.mod(n, nk)}"))
    t, h, packed = _check_q_k_v(d, query, key, value, n, nk, latent)
    qk_norm = q_norm_weight is not None or k_norm_weight is not None
    hv = h
    if latent:
        hv = _check_latent(d, h, v_head_size, scale is not None, nk, value_cache, head_sink, qk_norm,
                           v_quant is not KvQuantization.NONE or v_scale is not None)
    elif v_head_size not in (0,):
        d.require(v_head_size == h, lambda: InvalidArgument(
            f"'v_head_size' ({v_head_size}) may only differ from head_size ({h}) in 'LATENT' mode, got {v_head_size}"))
    blocks, bs = _check_caches(d, key_cache, value_cache, nk, h, latent, cache_type)
    b, m = _check_positions(d, cumulative_sequence_length, past_seqlens, block_table, slot_mapping, t)
    _check_norm_rotary(d, q_norm_weight, k_norm_weight, qk_norm_epsilon, cos_cache, sin_cache, h, rotary_offset)
    if do_rotary and cos_cache is None:
        raise InvalidArgument("cos_cache and sin_cache must be passed to PagedAttention when do_rotary = 1")
    metadata = "bounds" if attention_metadata is not None else "absent"
    _check_metadata(metadata, attention_metadata)
    _check_quantization(d, cache_type, k_quant, v_quant, k_scale, v_scale, nk, h, latent)
    max_query_len, max_kv_len = _check_step(d, b, t, max_query_len, max_kv_len, bs, m, metadata, kv_lower_bound)
    if head_sink is not None:
        if len(head_sink) != 1:
            raise InvalidArgument(f"head_sink must be a 1D tensor of shape (num_heads), got {list(head_sink)}")
        d.require(_dims(d, head_sink, "head_sink")[0] == n, lambda: InvalidArgument(
            f"head_sink must have num_heads ({n}) elements, got {head_sink[0]} (attnws: the schema's shape)"))
    return PagedProblem(
        b, t, max_query_len, max_kv_len, n, nk, h, hv, bs, m, blocks, is_bf16=is_bf16, is_packed_qkv=packed,
        latent=latent, do_rotary=bool(do_rotary), causal=bool(is_causal), local_window_size=local_window_size,
        softcap=softcap, has_head_sink=head_sink is not None, use_qk_norm=qk_norm,
        has_slot_mapping=slot_mapping is not None, cache_type=cache_type, k_quantization=k_quant,
        v_quantization=k_quant if latent else v_quant, metadata=metadata,
        kv_lower_bound=kv_lower_bound if metadata == "bounds" else 0)
