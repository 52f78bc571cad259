"""Output shapes of the com.microsoft operators ONNX's own shape inference does not know.

Each rule reads one node's input types and attributes (`NodeTypes`) and returns one entry per
output: (element type, dims) for an output it can size, None for one it cannot (an input shape
unknown or invalid). `infer` hands the rules to ONNX's inference as operator schemas, so they run
in ONNX's single pass over the graph. The attention rule takes the output [T, N*Hv] from the
spec's own problem builder, so a node the spec rejects propagates nothing. RemovePadding's token
count is bounded by B*S, its largest possible value.
"""

from __future__ import annotations

from typing import Callable

import onnx

from ..spec.errors import WorkspaceError
from ..spec.estimate import ELEMENT_TYPES, config_problem, problem_from_hints
from .graph import known_dims
from .translate import ATTENTION_OPS, ATTRIBUTE_TYPES, MS_DOMAIN, NodeTypes, node_inputs

OutputType = tuple[int, list[int]] | None
Rule = Callable[[NodeTypes], list[OutputType]]
INT32 = onnx.TensorProto.INT32

# Operators whose first output has the type and shape of their first input.
SAME_SHAPE_OPS = frozenset({
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu", "QuickGelu",
})


def _input(node: NodeTypes, index: int) -> tuple[int, list[int]] | None:
    t = node.type_of(index)
    dims = known_dims(t)
    return None if t is None or dims is None else (t.tensor_type.elem_type, dims)


def attention_outputs(node: NodeTypes) -> list[OutputType]:
    """Return PackedAttention / PackedMultiHeadAttention output 0: [T, N*Hv] from the spec's problem."""
    inputs = node_inputs(node)
    element_size = ELEMENT_TYPES.get(inputs.element_type)
    num_heads = inputs.attributes.get("num_heads")
    qkv_hidden_sizes = inputs.attributes.get("qkv_hidden_sizes")
    if inputs.unresolved or config_problem(inputs.op, element_size, num_heads, qkv_hidden_sizes):
        return []
    try:
        problem, _ = problem_from_hints(inputs.op, element_size, num_heads, inputs.hints, qkv_hidden_sizes)
    except WorkspaceError:
        return []
    if problem is None:
        return []
    return [(node.type_of(0).tensor_type.elem_type, [problem.token_count, problem.v_hidden_size])]


def same_shape_outputs(node: NodeTypes) -> list[OutputType]:
    """Return output 0 with input 0's type (normalizations and activations)."""
    return [_input(node, 0)]


def remove_padding_outputs(node: NodeTypes) -> list[OutputType]:
    """Return RemovePadding's outputs for input [B, S, H]: [B*S, H] (a bound on T), token_offset
    [B, S], cumulative_sequence_length [B + 1] and max_seq_len [1]."""
    first = _input(node, 0)
    if first is None or len(first[1]) != 3:
        return []
    elem_type, (batch, seq, hidden) = first
    return [(elem_type, [batch * seq, hidden]), (INT32, [batch, seq]), (INT32, [batch + 1]), (INT32, [1])]


def restore_padding_outputs(node: NodeTypes) -> list[OutputType]:
    """Return RestorePadding's output [B, S, H] for input [T, H] and token_offset [B, S]."""
    first, offsets = _input(node, 0), _input(node, 1)
    if first is None or offsets is None or len(first[1]) != 2 or len(offsets[1]) != 2:
        return []
    return [(first[0], [*offsets[1], first[1][1]])]


RULES: dict[str, Rule] = {
    **{op_type: attention_outputs for op_type in ATTENTION_OPS},
    **{op_type: same_shape_outputs for op_type in SAME_SHAPE_OPS},
    "RemovePadding": remove_padding_outputs,
    "RestorePadding": restore_padding_outputs,
}

# The attributes a rule reads, by operator (ONNX's inference context is asked for them by name).
RULE_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    op_type: tuple(ATTRIBUTE_TYPES[op]) for op_type, op in ATTENTION_OPS.items()
}


def rule_for(op_type: str, domain: str) -> Rule | None:
    """Return the output rule for a com.microsoft operator attnws knows, else None."""
    return RULES.get(op_type) if domain == MS_DOMAIN else None
