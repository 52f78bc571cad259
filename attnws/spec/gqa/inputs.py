"""GroupQueryAttention's inputs: its sixteen positional inputs (ORT 1.31.1's com.microsoft schema),
the builder's call for a node's positional shapes, and the node's problem read as ORT's own
Level-1 adapter (`ConfigFromNode`, docs/research/gqa-workspace.md §8) reads it.

Shapes are element counts. A positional input reaches the builder by its schema name: the
builder's parameters are named after the inputs.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..domain import CONCRETE
from ..errors import InternalError, Unavailable
from ..hints import MISSING, Hint, hint_at, shape_of
from .builder import build_gqa_problem
from .problem import GqaProblem

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


def input_names() -> tuple[str, ...]:
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


def problem_from_hints(hints: Sequence[Hint], attributes: Mapping[str, Any], element_type: str | None,
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
