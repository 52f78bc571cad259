"""GroupQueryAttention's node reader while its spec family is in progress (`attnws.spec.gqa`, listed
in `attnws.spec.families.IN_PROGRESS`): ORT 1.31.1's com.microsoft schema for the node. How ORT's own
Level-1 adapter reads the node's inputs is the spec's (`attnws.spec.gqa.inputs`).

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
- `problem`: the spec's reading of the node's positional shapes and attributes
  (`attnws.spec.gqa.inputs.problem_from_hints`, which also holds the input names), given whether
  the node has both present outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import onnx

from ...spec.gqa.inputs import (GQA_INPUTS, HEAD_SINK, K_SCALE, KEY, PAST_KEY, PAST_VALUE, POSITION_IDS, QUERY,
                                SEQLENS_K, TOTAL_SEQUENCE_LENGTH, V_SCALE, VALUE, problem_from_hints)
from ...spec.gqa.problem import GqaProblem
from ...spec.hints import Hint, hint_at, shape_of
from ..reader import OutputType, output_present

_A = onnx.AttributeProto
_PRESENT_OUTPUTS, _OUTPUT_QK = (1, 2), 3


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
        """Return the node's problem at its maximum shapes (`attnws.spec.gqa.inputs.problem_from_hints`:
        its `Unavailable` where ORT's adapter declares nothing, the builder's error where ORT refuses
        the node), with the present outputs `outputs` names."""
        return problem_from_hints(hints, attributes, element_type, cache_type,
                                  has_present=all(output_present(outputs, i) for i in _PRESENT_OUTPUTS))

    def prepacked_head_sink(self, inputs: Sequence[str], constants: frozenset[str]) -> bool:
        """Return whether ORT prepacks the node's head_sink at session creation: it is a constant
        initializer (among `constants`, by name)."""
        return HEAD_SINK < len(inputs) and inputs[HEAD_SINK] in constants


READERS = (
    Reader(op_type="GroupQueryAttention", input_names=GQA_INPUTS,
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
