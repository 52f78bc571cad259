"""GroupQueryAttention's inputs: its sixteen positional inputs (ORT 1.31.1's com.microsoft schema),
the builder's call for a node's positional shapes, and the node's problem read as ORT's own
Level-1 adapter (`ConfigFromNode`, docs/research/gqa-workspace.md §8) reads it.

Shapes are element counts. A positional input reaches the builder by its schema name: the
builder's parameters are named after the inputs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from ..domain import CONCRETE
from ..errors import InternalError, InvalidArgument, Unavailable
from ..hints import MISSING, Geometry, Hint, hint_at, shape_of
from ..problem import Op
from .builder import build_gqa_problem
from .problem import KV_QUANT, GqaFormat, GqaProblem, head_sink_kind, shares_buffer

GQA_INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
              "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
              "k_norm_weight")
(QUERY, KEY, VALUE, PAST_KEY, PAST_VALUE, SEQLENS_K, TOTAL_SEQUENCE_LENGTH, POSITION_IDS, ATTENTION_BIAS, HEAD_SINK,
 K_SCALE, V_SCALE) = (GQA_INPUTS.index(name) for name in (
    "query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "position_ids",
    "attention_bias", "head_sink", "k_scale", "v_scale"))
# The cache's element type (past_key's ONNX type) to the builder's T_CACHE: the query's own type is "same".
CACHE_DTYPES = {"int8": "int8", "uint8": "uint8", "float8e4m3fn": "fp8"}
# The builder's attributes with the kernel's defaults (the schema's where it has one).
DEFAULTS = {"local_window_size": -1, "causal": 1, "sliding_window_cache": 0, "do_rotary": 0, "softcap": 0.0,
            "smooth_softmax": -1, "qk_norm_epsilon": 1e-6, "kv_cache_bit_width": 0, "k_quant_type": "NONE",
            "v_quant_type": "NONE"}


def input_names(op: Op) -> tuple[str, ...]:
    """Return GroupQueryAttention's positional input names."""
    return GQA_INPUTS


def node_hints(**shapes: Any) -> list[Hint]:
    """Return the positional hints of inputs given by schema name (each a shape; the others MISSING)."""
    unknown = set(shapes) - set(GQA_INPUTS)
    if unknown:
        raise InternalError(f"GroupQueryAttention has no input {sorted(unknown)}")
    return [shapes.get(name, MISSING) for name in GQA_INPUTS]


def named_shapes(hints: Sequence[Hint]) -> dict[str, list[Any] | None]:
    """Return each input's shape by schema name (None where absent or of unknown shape)."""
    return {name: shape_of(hint_at(hints, i)) for i, name in enumerate(GQA_INPUTS)}


def build_from_hints(hints: Sequence[Hint], total_sequence_length: Any, *, d: Any = CONCRETE,
                     **attributes: Any) -> GqaProblem:
    """Return `build_gqa_problem` of the positional shapes: T is the value of input 6, whose hint is
    its shape (a scalar, (), when absent); `attributes` are the builder's keywords. Raises the
    builder's errors (ORT's texts)."""
    shapes = named_shapes(hints)
    total_shape = shapes.pop("total_sequence_length")
    return build_gqa_problem(**shapes, total_sequence_length=total_sequence_length,
                             total_sequence_length_shape=() if total_shape is None else total_shape, d=d,
                             **attributes)


def node_problem(hints: Sequence[Hint], attributes: Mapping[str, Any], element_type: str | None,
                 cache_type: str | None, has_present: bool) -> GqaProblem:
    """Return the node's problem at its maximum shapes, as ORT's adapter reads it, or raise
    `Unavailable` where the adapter declares nothing and the builder's error (ORT's text) where ORT
    refuses the node.

    `element_type` and `cache_type` are the ONNX element type names of query and past_key (None:
    unknown); `attributes` the node's (strings may be bytes); `has_present` whether it has both
    present outputs. The query must be float16 or bfloat16 and past_key present: its dimension 2
    is the cache's capacity P. T is not known ahead of time: the node is built at its first prompt
    at the longest query (T = S; attention_bias's dimension 3 when it has one, which is T), which
    is valid whenever a prompt of the longest S fits the cache; ORT's estimator does not read T (it
    bounds a non-windowed cache by max(P, the session option), a windowed one by P). Past and
    present share one buffer (onnxruntime-genai's layout), so every T a run passes is at most P."""
    if element_type not in ("float16", "bfloat16"):
        raise Unavailable(f"query is {element_type or 'of unknown type'}: ORT's GroupQueryAttention estimator sizes "
                          "float16 and bfloat16 queries only (its CUDA kernel runs no other)")
    shapes = named_shapes(hints)
    if shapes["past_key"] is None:
        raise Unavailable("past_key (input 3) is absent: ORT's estimator reads the cache's capacity from its "
                          "dimension 2 and declares nothing without it")
    query, bias = shapes["query"], shapes["attention_bias"]
    total = bias[3] if bias is not None and len(bias) == 4 else query[1] if query and len(query) > 1 else 1
    given = {**DEFAULTS, **{k: v for k, v in attributes.items() if k in DEFAULTS}}
    for name in ("k_quant_type", "v_quant_type"):
        if isinstance(given[name], bytes):
            given[name] = given[name].decode()
    cache = "same" if cache_type == element_type else CACHE_DTYPES.get(cache_type or "", cache_type or "unknown")
    return build_from_hints(hints, total, num_heads=attributes.get("num_heads"),
                            kv_num_heads=attributes.get("kv_num_heads"), **given,
                            is_bf16=element_type == "bfloat16", cache_dtype=cache, has_present=has_present,
                            kv_share_buffer=True)


# -- the family's hooks, for a `Geometry` ----------------------------------------------------------
def _shapes(g: Geometry, d: Any) -> dict[str, Any]:
    """The geometry's positional inputs by name: the cache [B, Nk, P, H] (H / 2 bytes a row packed
    int4), seqlens_k [B], the scalar T, the query (packed [B, S, (N + 2 Nk) H]) and key / value,
    the rotary caches of max(P, T) rows, the head sink [N], the per-tensor scales and the QK-norm
    weights [H]."""
    b, s, n, nk, h = g.batch, g.seq, g.heads, g.kv_heads, g.head_size
    bits, _ = KV_QUANT[g.kv_quant or "none"]
    cache = [b, nk, g.past, h // 2 if bits == 4 else h]
    shapes: dict[str, Any] = dict(past_key=cache, past_value=cache, seqlens_k=[b], total_sequence_length=())
    if g.gqa_format is GqaFormat.PACKED_QKV:
        shapes.update(query=[b, s, (n + 2 * nk) * h])
    else:
        shapes.update(query=[b, s, n * h], key=[b, s, nk * h], value=[b, s, nk * h])
    if g.rotary:
        rotary = [d.max_(g.past, g.total_seq), h // 2]
        shapes.update(cos_cache=rotary, sin_cache=rotary)
    if g.head_sink:
        shapes.update(head_sink=[n])
    if g.qk_norm:
        shapes.update(q_norm_weight=[h], k_norm_weight=[h])
    if bits:
        shapes.update(k_scale=[1], v_scale=[1])
    return shapes


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return GroupQueryAttention's sixteen positional input shapes for the geometry."""
    return node_hints(**_shapes(g, CONCRETE))


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> GqaProblem:
    """Return the validated problem for the geometry taken as the concrete runtime shapes (its
    positional inputs through the builder, T the value of total_sequence_length; under the
    solver's domain the builder's checks become obligations instead of errors), its head sink a
    graph input where the geometry's `head_sink` is "input", past and present aliased as its
    `cache_layout` says (`problem.shares_buffer`)."""
    if g.v_head_size not in (None, g.head_size):
        raise InvalidArgument(f"v_head_size = {g.v_head_size}: GroupQueryAttention has one head size for Q, K and V")
    sink = head_sink_kind(g.head_sink)
    bits, cache_dtype = KV_QUANT[g.kv_quant or "none"]
    quant = {} if not bits else dict(k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", kv_cache_bit_width=bits,
                                     cache_dtype=cache_dtype)
    p = build_from_hints(
        node_hints(**_shapes(g, d)), g.total_seq, num_heads=g.heads, kv_num_heads=g.kv_heads,
        local_window_size=-1 if g.window is None else g.window, sliding_window_cache=int(g.sliding_window_cache),
        do_rotary=int(g.rotary), softcap=g.softcap or 0.0, smooth_softmax=int(g.smooth_softmax), is_bf16=g.bf16, d=d,
        kv_share_buffer=shares_buffer(g.cache_layout, g.sliding_window_cache, g.total_seq, g.past), **quant)
    return replace(p, head_sink_is_input=True) if sink == "input" else p


def problem_from_hints(op: Op, element_size: int, num_heads: int, hints: Sequence[Hint],
                       qkv_hidden_sizes: Sequence[int] | None = None, *, has_present: bool = False,
                       unidirectional: bool = False) -> tuple[GqaProblem | None, str]:
    """Return (None, why): positional shapes and num_heads do not describe a GroupQueryAttention
    node, whose kv_num_heads, window, rotary and quantization are attributes (`node_problem`
    reads a node with them)."""
    return None, ("GroupQueryAttention's shapes do not give its kv_num_heads, window, rotary or quantization "
                  "attributes: describe the node with its flags (--kv-heads, --total-seq, ...) or read it from "
                  "its model (`attnws model`)")


def attribute_problem(op: Op, num_heads: int, qkv_hidden_sizes: Sequence[int]) -> str:
    """Return what the node's attributes get wrong, or '': GroupQueryAttention has no qkv_hidden_sizes."""
    sizes = list(qkv_hidden_sizes)
    return f"GroupQueryAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""


def nonzero_dims(index: int, shape: list[Any]) -> list[Any]:
    """Return the dimensions of input `index` a hint may not give as 0: all of them (the builder
    refuses an empty batch, query or cache)."""
    return shape
