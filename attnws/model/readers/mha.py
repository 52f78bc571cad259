"""The mha family's node reader (`attnws.spec.mha`): MultiHeadAttention nodes.

Its lengths are its own inputs (query [B, S, ...], key [B, L, ...], past_key [B, N, P, H]), so
nothing is derived from the node; the solver's target takes L = S where the graph keeps them equal
in every run (`ties`: a decoder's self attention, whose key is projected from the query's hidden
states), and L's own range otherwise (cross attention: the encoder's length). Its outputs are output [B, S, N * Hv], present_key and
present_value [B, N, P + L, H] (both or neither: ORT fails a node with one at run time) and
output_qk (the Q*K^T scores, not modelled). Inputs 8 (past_sequence_length: a shared past/present
buffer) and 9 (cache_indirection: beam search) are not modelled either, and do not change the
output shapes. ORT 1.31.1 has no Level-1 estimator for it: attnws's own applies the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import onnx

from ...spec.hints import MISSING, Hint, HintState, hint_at, shape_of
from ...spec.mha.inputs import MHA_INPUTS, PAST_INPUTS
from ...spec.mha.problem import MhaFormat
from ...spec.problem import Op
from ..reader import (DimFactory, NodeInputs, NodeReader, OutputType, Session, attention_fields, dim_at, output_present,
                      static_dim)

_A = onnx.AttributeProto
_PAST_KEY = MHA_INPUTS.index("past_key")  # [B, N, P, H]
_PAST_SEQUENCE_LENGTH = MHA_INPUTS.index("past_sequence_length")
_CACHE_INDIRECTION = MHA_INPUTS.index("cache_indirection")
_PRESENT_OUTPUTS = (1, 2)  # present_key, present_value
_OUTPUT_QK = 3


@dataclass(frozen=True, eq=False)
class Reader(NodeReader):
    """MultiHeadAttention's node (`NodeReader`)."""

    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        if index == 0 and axis < 2:
            return ("the batch size B", "the sequence length S")[axis]
        if index in (1, 2) and axis == (2 if rank == 4 else 1):
            return "the key/value sequence length L"
        if index in PAST_INPUTS and axis == 2:
            return "the past sequence length P"
        if axis == 0 and index in (1, 2, *PAST_INPUTS):
            return "the batch size B"
        return "a dimension"

    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return why a node with output_qk (not modelled) or with only one of present_key /
        present_value (ORT fails it at run time) is not sized, with the error status."""
        if output_present(outputs, _OUTPUT_QK):
            return (f"output {_OUTPUT_QK} (output_qk {outputs[_OUTPUT_QK]!r}) is present: {self.op_type} "
                    "with output_qk is not modelled (ORT then writes the Q*K^T scores and keeps only the unfused and "
                    "decoder-masked kernels)", "unsupported")
        present = [output_present(outputs, i) for i in _PRESENT_OUTPUTS]
        if any(present) and not all(present):
            which = "present_key (output 1)" if present[0] else "present_value (output 2)"
            return (f"only {which} of present_key and present_value is present: ORT requires both or neither and "
                    "fails this node at run time", "invalid_argument")
        return "", ""

    def output_shapes(self, node: NodeInputs, problem: Any) -> list[OutputType]:
        """Return output [B, S, N * Hv] and, with the present outputs, present_key and
        present_value [B, N, M, H] (H, not Hv, for both: ORT gives them one shape), M = P + L, or
        past_key's dim 2 with a shared past/present buffer (input 8 given); none without the
        spec's problem (a hidden size not a multiple of num_heads among the reasons)."""
        p, hints = problem, node.hints
        if p is None:
            return []
        past_key = shape_of(hint_at(hints, _PAST_KEY))
        shared = shape_of(hint_at(hints, _PAST_SEQUENCE_LENGTH)) is not None
        length = past_key[2] if shared and past_key is not None else p.total_sequence_length
        elem_type = node.elem_type(0)
        present = (elem_type, [p.batch_size, p.num_heads, length, p.qk_head_size])
        output = (elem_type, [p.batch_size, p.sequence_length, p.v_hidden_size])
        return [output, present, present] if node.has_present else [output]

    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return batch and seq from query [B, S, ...]; H from query's hidden (rank 3) or its dim 4
        (packed [B, S, N, 3, H]); L from key [B, L, ...] (BNSH cross key [B, N, L, H]: dim 2) or S
        when key is absent (packed QKV); Hv from value's last dim, or H when value is absent; P
        from past_key [B, N, P, H]."""
        query, key, value = (hint_at(hints, i) for i in range(3))
        rank = {i: len(h) for i, h in enumerate((query, key, value)) if not isinstance(h, HintState)}
        out = {name for name, fixed in (("batch", static_dim(hints, 0, 0)), ("seq", static_dim(hints, 0, 1)),
                                        ("head_size", static_dim(hints, 0, 4 if rank.get(0) == 5 else 2)),
                                        ("past", static_dim(hints, _PAST_KEY, 2))) if fixed}
        if 1 not in rank:
            if "seq" in out:
                out.add("kv_seq")
        elif static_dim(hints, 1, 2 if rank[1] == 4 else 1):
            out.add("kv_seq")
        if 2 not in rank:
            if "head_size" in out:
                out.add("v_head_size")
        elif static_dim(hints, 2, rank[2] - 1):
            out.add("v_head_size")
        return frozenset(out)

    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool, session: Session) -> dict[str, Any]:
        """Return MultiHeadAttention's dimensions and flags of the target: packed QKV has L = S and
        Hv = H, packed KV Hv = H, and the target ties them (None), as the shapes do; so does L
        where the graph keeps it equal to S (`ties`: a decoder's self attention)."""
        p = problem
        has_key = p.qkv_format is not MhaFormat.PACKED_QKV
        has_value = p.qkv_format in (MhaFormat.SEPARATE, MhaFormat.CROSS)
        return {**attention_fields(p, dim), "v_head_size": dim("v_head_size", p.v_head_size) if has_value else None,
                "kv_seq": dim("kv_seq", p.kv_sequence_length) if has_key else None,
                "past": dim("past", p.past_sequence_length, 0) if p.has_past else None, "mha_format": p.qkv_format,
                "mask": p.mask_type, "with_past": p.has_past, "with_present": p.has_present,
                "unidirectional": p.is_unidirectional}

    def dims_read(self, hints: Sequence[Hint]) -> dict[str, int]:
        """Return S (query's dim 1) and L (key [B, L, ...]; BNSH cross key [B, N, L, H]: dim 2;
        S without a key)."""
        key = hint_at(hints, 1)
        axis = 2 if not isinstance(key, HintState) and len(key) == 4 else 1
        seq = dim_at(hints, 0, 1)
        out = {"seq": seq, "kv_seq": seq if key is MISSING else dim_at(hints, 1, axis)}
        return {name: value for name, value in out.items() if value is not None}

    def absent_dim(self, dim: str) -> str:
        """Return why the node has no packed token count, or no kv_seq of its own (L = S)."""
        return {"tokens": f"{self.op_type} has no packed token count",
                "kv_seq": "the node has no key/value length of its own (L = S: packed QKV, or the graph keeps the "
                          "key/value length equal to the sequence length)"}.get(dim, "")


READERS = (
    Reader(op=Op.MHA,
           attribute_types={"num_heads": _A.INT, "unidirectional": _A.INT, "scale": _A.FLOAT,
                            "mask_filter_value": _A.FLOAT},  # scale and mask_filter_value change no size
           required_attributes=("num_heads",), required_inputs=(0,),
           # query key value bias key_padding_mask attention_bias past_key past_value
           # past_sequence_length cache_indirection
           input_types=("T", "T", "T", "T", "M", "T", "T", "T", "M", "M"),
           type_constraints={"T": ("float", "float16", "bfloat16"), "M": ("int32",)},
           output_names=("output", "present_key", "present_value", "output_qk"), any_domain=False,
           flag_attributes=("unidirectional",), present_outputs=_PRESENT_OUTPUTS,
           unsized_inputs=(_PAST_SEQUENCE_LENGTH, _CACHE_INDIRECTION), ties={"kv_seq": "seq"}),
)
