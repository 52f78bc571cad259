"""GroupQueryAttention's node reader (the spec's `gqa` family, `attnws.spec.gqa`): ORT 1.31.1's
com.microsoft schema for the node. How ORT's own Level-1 adapter reads the node's inputs is the
spec's (`attnws.spec.gqa.inputs`).

The model layer reads the family's nodes on its own path, `attnws.model.in_progress`, declared in
`registry.IN_PROGRESS_READERS` (why: that registry's docstring), so `Reader` is not a `NodeReader`:
it is the operator's `Schema`, what `translate.checked_types` checks (attribute types, required
and int32 inputs, element types and the inputs of a type of their own: the cache T_CACHE,
position_ids int64, the scales float; outputs), with the family's own reading. When the family's
nodes join the shared pipeline, `Reader` becomes a NodeReader subclass and the module moves from
`registry.IN_PROGRESS_READERS` to `FAMILY_READERS`.

- `output_shapes`: what ORT's symbolic shape inference propagates (`_infer_GroupQueryAttention` in
  onnxruntime/tools/symbolic_shape_infer.py): output [B, S, N * H] (query's shape; a packed query's
  hidden becomes N * H), present_key / present_value past_key's / past_value's shape (past and
  present share the cache's capacity P, as onnxruntime-genai binds them).
- `problem`: the spec's reading of the node's positional shapes and attributes
  (`attnws.spec.gqa.inputs.node_problem`), given whether the node has both present outputs.
- `unstated`, `target_fields`: the solver's `Target` of a sized node, beyond B and S.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import onnx

from ...spec.gqa.inputs import (HEAD_SINK, K_SCALE, KEY, PAST_KEY, PAST_VALUE, POSITION_IDS, QUERY, SEQLENS_K,
                                TOTAL_SEQUENCE_LENGTH, V_SCALE, VALUE, node_problem)
from ...spec.gqa.problem import GqaFormat, GqaProblem, KvQuantization
from ...spec.hints import Hint, hint_at, shape_of
from ...spec.problem import Op
from ...spec.target import DimRange
from ..reader import OutputType, Schema, output_present

_A = onnx.AttributeProto
_PRESENT_OUTPUTS, _OUTPUT_QK = (1, 2), 3


@dataclass(frozen=True, eq=False)
class Reader(Schema):
    """GroupQueryAttention's node: ORT 1.31.1's schema and the adapter's reading."""

    def role(self, index: int, axis: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        if index in (QUERY, KEY, VALUE) and axis < 2:
            return ("the batch size B", "the sequence length S")[axis]
        if index in (PAST_KEY, PAST_VALUE) and axis == 2:
            return "the cache capacity P"
        return "the batch size B" if axis == 0 and index in (PAST_KEY, PAST_VALUE, SEQLENS_K) else "a dimension"

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
        elem_type = elem_types[QUERY]
        query = shape_of(hint_at(hints, QUERY))
        output = None
        if query is not None and len(query) == 3 and min(query) >= 0:
            n, nk = attributes.get("num_heads"), attributes.get("kv_num_heads")
            packed = shape_of(hint_at(hints, KEY)) is None and shape_of(hint_at(hints, VALUE)) is None
            if not packed:
                output = (elem_type, list(query))
            elif isinstance(n, int) and isinstance(nk, int) and n > 0 and nk > 0 and query[2] % (n + 2 * nk) == 0:
                output = (elem_type, [query[0], query[1], n * (query[2] // (n + 2 * nk))])
        presents = [(elem_types[i], shape_of(hint_at(hints, i))) for i in (PAST_KEY, PAST_VALUE)]
        return [output, *((kind, list(p)) if p is not None and kind and min(p, default=0) >= 0 else None
                          for kind, p in presents)]

    def problem(self, hints: Sequence[Hint], attributes: dict[str, Any], element_type: str | None,
                cache_type: str | None, outputs: Sequence[str]) -> GqaProblem:
        """Return the node's problem at its maximum shapes (`attnws.spec.gqa.inputs.node_problem`:
        its `Unavailable` where ORT's adapter declares nothing, the builder's error where ORT refuses
        the node), with the present outputs `outputs` names."""
        return node_problem(hints, attributes, element_type, cache_type,
                            has_present=all(output_present(outputs, i) for i in _PRESENT_OUTPUTS))

    def prepacked_head_sink(self, inputs: Sequence[str], constants: frozenset[str]) -> bool:
        """Return whether ORT prepacks the node's head_sink at session creation: it is a constant
        initializer (among `constants`, by name)."""
        return HEAD_SINK < len(inputs) and inputs[HEAD_SINK] in constants

    def unstated(self, problem: GqaProblem, head_sink_prepacked: bool) -> str:
        """Return why the solver's target cannot state the node whatever its shapes, else "": its
        cache quantization is per-channel or differs between K and V, or its head sink is
        prepacked (the target's head sink is converted at run time)."""
        if _kv_quant(problem) is None:
            return "the solver's box has per-tensor cache scales only"
        if head_sink_prepacked:
            return "the solver's box has no prepacked head sink"
        return ""

    def target_fields(self, problem: GqaProblem, max_total_sequence_length: int) -> dict[str, Any]:
        """Return the solver's `Target` fields of a sized node's problem beyond B and S (one the
        target can state, `unstated`): N, H, Nk and the cache capacity P exact; T over 1..P (past
        and present share one buffer of P rows, onnxruntime-genai's layout: no run passes a larger
        T), a windowed cache's over 1..max(P, S, the session option
        `max_total_sequence_length`, 0 unset); the node's flags."""
        p = problem
        total = max(p.past_sequence_length, p.sequence_length, max_total_sequence_length) if p.sliding_window_cache \
            else p.past_sequence_length
        kv_quant = _kv_quant(p)
        return {"heads": DimRange(p.num_heads, p.num_heads), "head_size": DimRange(p.head_size, p.head_size),
                "kv_heads": DimRange(p.kv_num_heads, p.kv_num_heads),
                "past": DimRange(p.past_sequence_length, p.past_sequence_length), "total_seq": DimRange(1, total),
                "gqa_format": GqaFormat.PACKED_QKV if p.is_packed_qkv else GqaFormat.SEPARATE, "bf16": p.is_bf16,
                "rotary": p.do_rotary, "window": None if p.local_window_size == -1 else p.local_window_size,
                "sliding_window_cache": p.sliding_window_cache, "softcap": p.softcap or None,
                "smooth_softmax": p.smooth_softmax, "head_sink": p.has_head_sink,
                "kv_quant": None if kv_quant == "none" else kv_quant, "max_total_seq": max_total_sequence_length or None}


def _kv_quant(p: GqaProblem) -> str | None:
    """The target's name for the node's cache quantization (a key of `attnws.spec.gqa.problem
    .KV_QUANT`), or None where the target has none: its scales are per tensor, alike for K and V."""
    if not p.quantized:
        return "none"
    if p.k_quantization != p.v_quantization or p.k_quantization is not KvQuantization.PER_TENSOR:
        return None
    return "fp8" if p.cache_is_fp8 else {8: "int8", 4: "int4"}.get(p.kv_cache_bit_width)


READERS = (
    Reader(op=Op.GQA,
           attribute_types={"num_heads": _A.INT, "kv_num_heads": _A.INT, "scale": _A.FLOAT, "softcap": _A.FLOAT,
                            "local_window_size": _A.INT, "do_rotary": _A.INT, "rotary_interleaved": _A.INT,
                            "smooth_softmax": _A.INT, "causal": _A.INT, "sliding_window_cache": _A.INT,
                            "qk_output": _A.INT, "qk_norm_epsilon": _A.FLOAT, "kv_cache_bit_width": _A.INT,
                            "k_quant_type": _A.STRING, "v_quant_type": _A.STRING},
           required_inputs=(QUERY, SEQLENS_K, TOTAL_SEQUENCE_LENGTH),
           index_inputs=(SEQLENS_K, TOTAL_SEQUENCE_LENGTH), element_types=("float16", "bfloat16", "float"),
           output_names=("output", "present_key", "present_value", "output_qk"),
           own_type_inputs=(PAST_KEY, PAST_VALUE, POSITION_IDS, K_SCALE, V_SCALE)),
)
