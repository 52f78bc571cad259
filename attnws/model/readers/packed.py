"""The packed family's node reader (`attnws.spec.packed`): PackedAttention and
PackedMultiHeadAttention nodes.

Both pack their tokens: token_offset [B, S] and cumulative_sequence_length [B + 1] are int32
index inputs, and the packed token count T is dimension 0 of the inputs that carry the tokens
(PackedAttention's input; PackedMultiHeadAttention's query, key and value, or its query alone
when it packs Q, K and V as [T, N, 3, H]). Their only output is [T, N * Hv]. ORT 1.31.1 has a
Level-1 estimator for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import onnx

from ...spec.hints import Hint, HintState, hint_at
from ...spec.packed.problem import QkvFormat
from ...spec.problem import Op
from ..reader import DimFactory, NodeInputs, NodeReader, OutputType, Packing, Session, attention_fields, static_dim

_A = onnx.AttributeProto


@dataclass(frozen=True, eq=False)
class Reader(NodeReader):
    """A packed operator's node (`NodeReader`); its `packing` is always given."""

    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        p = self.packing
        if index == p.token_offset and axis < 2:
            return ("the batch size B", "the sequence length S")[axis]
        if index == p.cumulative_sequence_length and axis == 0:
            return "B + 1, the length of cumulative_sequence_length"
        if axis == 0 and index in p.token_inputs:
            return "the packed token count"
        if index == p.attention_bias and axis < 4:  # [B or 1, N or 1, S, S]
            return ("the batch size B (or 1)", "the head count (or 1)", "the sequence length S",
                    "the sequence length S")[axis]
        return "a hidden or head size"

    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return ("", ""): every output a packed operator has is modelled."""
        return "", ""

    def output_shapes(self, node: NodeInputs, problem: Any) -> list[OutputType]:
        """Return output 0, [T, N * Hv]; none without the spec's problem."""
        if problem is None:
            return []
        return [(node.elem_type(0), [problem.token_count, problem.v_hidden_size])]

    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return tokens (input 0's dim 0), seq (token_offset's dim 1), batch (token_offset's
        dim 0 or cumulative_sequence_length's) and the operator's own head and hidden sizes
        where the node fixes them."""
        to, cu = self.packing.token_offset, self.packing.cumulative_sequence_length
        out = {name for name, fixed in (("tokens", static_dim(hints, 0, 0)), ("seq", static_dim(hints, to, 1)),
                                        ("batch", static_dim(hints, to, 0) or static_dim(hints, cu, 0))) if fixed}
        heads = _pa_exact_sizes(hints, attributes) if self.op is Op.PA else _pmha_exact_sizes(hints)
        return frozenset(out | heads)

    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool, session: Session) -> dict[str, Any]:
        """Return the packed dimensions of the target: the shared attention fields, v_head_size (with qkv_hidden_sizes or the
        separate format; else tied to head_size), tokens, input_hidden (PackedAttention) and the
        QKV format."""
        p = problem
        separate = p.qkv_format is QkvFormat.SEPARATE
        return {**attention_fields(p, dim),
                "v_head_size": dim("v_head_size", p.v_head_size) if exact_heads or separate else None,
                "tokens": dim("tokens", p.token_count),
                "input_hidden": dim("input_hidden", p.input_hidden_size) if p.input_hidden_size else None,
                "qkv_hidden_sizes": exact_heads, "pmha_format": p.qkv_format or QkvFormat.PACKED}

    def absent_dim(self, dim: str) -> str:
        """Return why the node has no kv_seq of its own (L = S), else ""."""
        if dim == "kv_seq":
            return f"the node has no key/value length of its own ({self.op_type}: L = S)"
        return ""


def _pa_exact_sizes(hints: Sequence[Hint], attributes: dict[str, Any]) -> set[str]:
    """PackedAttention: input_hidden from input [T, D] or weights [D, ...]; the head sizes from
    qkv_hidden_sizes, the weights' columns or the bias."""
    out = set()
    if static_dim(hints, 0, 1) or static_dim(hints, 1, 0):
        out.add("input_hidden")
    if attributes.get("qkv_hidden_sizes") or static_dim(hints, 1, 1) or static_dim(hints, 2, 0):
        out |= {"head_size", "v_head_size"}
    return out


def _pmha_exact_sizes(hints: Sequence[Hint]) -> set[str]:
    """PackedMultiHeadAttention: both head sizes from packed QKV [T, N, 3, H]; else head_size from
    query's or key's hidden size and v_head_size from value's."""
    query = hint_at(hints, 0)
    if not isinstance(query, HintState) and len(query) == 4:
        return {"head_size", "v_head_size"} if static_dim(hints, 0, 3) else set()
    out = set()
    if static_dim(hints, 0, 1) or static_dim(hints, 1, 1):
        out.add("head_size")
    if static_dim(hints, 2, 1):
        out.add("v_head_size")
    return out


_TYPES = {"T": ("float", "float16"), "M": ("int32",)}

READERS = (
    Reader(op=Op.PA, attribute_types={"num_heads": _A.INT, "qkv_hidden_sizes": _A.INTS, "scale": _A.FLOAT},
           required_attributes=("num_heads",), required_inputs=(0, 1, 2, 3, 4),
           input_types=("T", "T", "T", "M", "M", "T"),  # input weights bias token_offset cu attention_bias
           type_constraints=_TYPES, output_names=("output",),
           any_domain=True,
           packing=Packing(token_offset=3, cumulative_sequence_length=4, token_inputs=(0,), attention_bias=5)),
    Reader(op=Op.PMHA, attribute_types={"num_heads": _A.INT, "mask_filter_value": _A.FLOAT, "scale": _A.FLOAT},
           required_attributes=("num_heads",), required_inputs=(0, 4, 5),
           input_types=("T", "T", "T", "T", "M", "M", "T"),  # query key value bias token_offset cu attention_bias
           type_constraints=_TYPES, output_names=("output",),
           any_domain=True,
           packing=Packing(token_offset=4, cumulative_sequence_length=5, token_inputs=(0, 1, 2), attention_bias=6,
                           packed_query_rank=4)),
)
