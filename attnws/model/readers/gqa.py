"""GroupQueryAttention's node reader while its spec family is in progress (`attnws.spec.gqa`, listed
in `attnws.spec.families.IN_PROGRESS`): ORT 1.31.1's com.microsoft schema for the node and how ORT's
own Level-1 adapter (`ConfigFromNode`, docs/research/gqa-workspace.md §8) reads it.

The operator has no `attnws.spec.problem.Op` member until its family registers, so `Reader` is not
yet a `NodeReader`: it has the schema fields a NodeReader has (what `translate.checked_types`
checks: attribute types, required and int32 inputs, element types and the inputs of a type of their
own (the cache T_CACHE, position_ids int64, the scales float), outputs) and the family's own
reading. When the family registers, `Reader` becomes a NodeReader subclass and the module moves
from `registry.IN_PROGRESS_READERS` to `FAMILY_READERS`.

- `output_shapes`: what ORT's symbolic shape inference propagates (`_infer_GroupQueryAttention` in
  onnxruntime/tools/symbolic_shape_infer.py): output [B, S, N * H] (query's shape; a packed query's
  hidden becomes N * H), present_key / present_value past_key's / past_value's shape (past and
  present share the cache's capacity P, as onnxruntime-genai binds them).
- `problem`: the node's `GqaProblem` at its maximum shapes, from the spec's builder (every check
  ORT makes, in ORT's order), read as ORT's adapter reads the node: query fp16 or bf16, the cache's
  element type from past_key, which is required (its dimension 2 is the capacity P). The value T
  of total_sequence_length is not known ahead of time: the node is built at its first prompt at the
  longest query (T = S; attention_bias's dimension 3 when it has one, which is T), which is valid
  whenever a prompt of the longest S fits the cache; ORT's estimator does not read T (it bounds a
  non-windowed cache by max(P, the session option), a windowed one by P). Past and present are
  taken to share one buffer (onnxruntime-genai's layout), so every T a run passes is at most P.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import onnx

from ...spec.errors import Unavailable
from ...spec.gqa.builder import build_gqa_problem
from ...spec.gqa.problem import GqaProblem
from ...spec.hints import Hint, hint_at, shape_of
from ..reader import OutputType, output_present

_A = onnx.AttributeProto
_INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
           "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
           "k_norm_weight")
_QUERY, _KEY, _VALUE, _PAST_KEY, _PAST_VALUE = 0, 1, 2, 3, 4
_ATTENTION_BIAS, _HEAD_SINK = _INPUTS.index("attention_bias"), _INPUTS.index("head_sink")
_PRESENT_OUTPUTS, _OUTPUT_QK = (1, 2), 3
# The cache's element type (past_key's) to the builder's T_CACHE: the query's own type is "same".
_CACHE_DTYPES = {"int8": "int8", "uint8": "uint8", "float8e4m3fn": "fp8"}
# The builder's attributes with the kernel's defaults (the schema's where it has one).
_DEFAULTS = {"local_window_size": -1, "causal": 1, "sliding_window_cache": 0, "do_rotary": 0, "softcap": 0.0,
             "smooth_softmax": -1, "qk_norm_epsilon": 1e-6, "kv_cache_bit_width": 0, "k_quant_type": "NONE",
             "v_quant_type": "NONE"}


@dataclass(frozen=True, eq=False)
class Reader:
    """GroupQueryAttention's node: ORT 1.31.1's schema (the same fields as `NodeReader`'s) and the
    adapter's reading."""

    op_type: str
    input_names: tuple[str, ...]
    attribute_types: Mapping[str, int]
    required_inputs: tuple[int, ...]
    index_inputs: tuple[int, ...]
    element_types: tuple[str, ...]
    output_names: tuple[str, ...]
    own_type_inputs: tuple[int, ...]

    def role(self, index: int, axis: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        if index in (_QUERY, _KEY, _VALUE) and axis < 2:
            return ("the batch size B", "the sequence length S")[axis]
        if index in (_PAST_KEY, _PAST_VALUE) and axis == 2:
            return "the cache capacity P"
        return "the batch size B" if axis == 0 and index in (_PAST_KEY, _PAST_VALUE, 5) else "a dimension"

    def unmodelled(self, outputs: Sequence[str]) -> str:
        """Return why the node's outputs leave it unsized whatever its shapes, else ""."""
        if output_present(outputs, _OUTPUT_QK):
            return (f"output {_OUTPUT_QK} (output_qk {outputs[_OUTPUT_QK]!r}) is present: ORT 1.31.1's CUDA "
                    f"{self.op_type} does not write it (its CPU kernel does)")
        return ""

    def output_shapes(self, hints: Sequence[Hint], attributes: dict[str, Any],
                      elem_types: Sequence[int]) -> list[OutputType]:
        """Return output [B, S, N * H] (query's ONNX element type) and present_key / present_value
        shaped and typed as past_key / past_value (`elem_types`: each input's, 0 unknown); None
        where an input shape is unknown or a packed query's hidden is not a multiple of N + 2 Nk."""
        elem_type = elem_types[_QUERY]
        query = shape_of(hint_at(hints, _QUERY))
        output = None
        if query is not None and len(query) == 3 and min(query) >= 0:
            n, nk = attributes.get("num_heads"), attributes.get("kv_num_heads")
            packed = shape_of(hint_at(hints, _KEY)) is None and shape_of(hint_at(hints, _VALUE)) is None
            if not packed:
                output = (elem_type, list(query))
            elif isinstance(n, int) and isinstance(nk, int) and n > 0 and nk > 0 and query[2] % (n + 2 * nk) == 0:
                output = (elem_type, [query[0], query[1], n * (query[2] // (n + 2 * nk))])
        presents = [(elem_types[i], shape_of(hint_at(hints, i))) for i in (_PAST_KEY, _PAST_VALUE)]
        return [output, *((kind, list(p)) if p is not None and kind and min(p, default=0) >= 0 else None
                          for kind, p in presents)]

    def problem(self, hints: Sequence[Hint], attributes: dict[str, Any], element_type: str | None,
                cache_type: str | None, outputs: Sequence[str]) -> GqaProblem:
        """Return the node's problem at its maximum shapes (see the module docstring), or raise
        `Unavailable` where ORT's adapter declares nothing and the builder's error (ORT's text)
        where ORT refuses the node."""
        if element_type not in ("float16", "bfloat16"):
            raise Unavailable(f"query is {element_type or 'of unknown type'}: ORT's {self.op_type} estimator sizes "
                              "float16 and bfloat16 queries only (its CUDA kernel runs no other)")
        shapes = [shape_of(hint_at(hints, i)) for i in range(len(self.input_names))]
        if shapes[_PAST_KEY] is None:
            raise Unavailable("past_key (input 3) is absent: ORT's estimator reads the cache's capacity from its "
                              "dimension 2 and declares nothing without it")
        query, bias = shapes[_QUERY], shapes[_ATTENTION_BIAS]
        total = bias[3] if bias is not None and len(bias) == 4 else query[1] if query and len(query) > 1 else 1
        given = {**_DEFAULTS, **{k: v for k, v in attributes.items() if k in _DEFAULTS}}
        for name in ("k_quant_type", "v_quant_type"):
            if isinstance(given[name], bytes):
                given[name] = given[name].decode()
        cache = "same" if cache_type == element_type else _CACHE_DTYPES.get(cache_type or "", cache_type or "unknown")
        total_shape = shapes[6] if shapes[6] is not None else ()
        return build_gqa_problem(
            *shapes[:6], total, *shapes[7:], num_heads=attributes.get("num_heads"),
            kv_num_heads=attributes.get("kv_num_heads"), **given, is_bf16=element_type == "bfloat16",
            cache_dtype=cache, has_present=all(output_present(outputs, i) for i in _PRESENT_OUTPUTS),
            kv_share_buffer=True, total_sequence_length_shape=total_shape)

    def prepacked_head_sink(self, inputs: Sequence[str], constants: frozenset[str]) -> bool:
        """Return whether ORT prepacks the node's head_sink at session creation: it is a constant
        initializer (among `constants`, by name)."""
        return _HEAD_SINK < len(inputs) and inputs[_HEAD_SINK] in constants


READERS = (
    Reader(op_type="GroupQueryAttention", input_names=_INPUTS,
           attribute_types={"num_heads": _A.INT, "kv_num_heads": _A.INT, "scale": _A.FLOAT, "softcap": _A.FLOAT,
                            "local_window_size": _A.INT, "do_rotary": _A.INT, "rotary_interleaved": _A.INT,
                            "smooth_softmax": _A.INT, "causal": _A.INT, "sliding_window_cache": _A.INT,
                            "qk_output": _A.INT, "qk_norm_epsilon": _A.FLOAT, "kv_cache_bit_width": _A.INT,
                            "k_quant_type": _A.STRING, "v_quant_type": _A.STRING},
           required_inputs=(0, 5, 6), index_inputs=(5, 6), element_types=("float16", "bfloat16", "float"),
           output_names=("output", "present_key", "present_value", "output_qk"),
           own_type_inputs=(_PAST_KEY, _PAST_VALUE, _INPUTS.index("position_ids"), _INPUTS.index("k_scale"),
                            _INPUTS.index("v_scale"))),
)
