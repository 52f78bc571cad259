"""Output shapes of the com.microsoft operators ONNX's own shape inference does not know.

Each rule returns {output name: (element type, dims)} for the outputs it can size from the node's
input types, and {} when it cannot (an input shape unknown or invalid). The attention rule takes
the output [T, N*Hv] from the spec's own problem builder, so a node the spec rejects propagates
nothing. RemovePadding's token count is bounded by B*S, its largest possible value.
"""

from __future__ import annotations

from typing import Callable

import onnx

from ..spec.errors import WorkspaceError
from ..spec.estimate import ELEMENT_TYPES, config_problem, problem_from_hints
from .graph import Site, known_dims
from .translate import ATTENTION_OPS, MS_DOMAIN, read_node

OutputTypes = dict[str, tuple[int, list[int]]]
INT32 = onnx.TensorProto.INT32

# Operators whose first output has the type and shape of their first input.
SAME_SHAPE_OPS = frozenset({
    "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu", "QuickGelu",
})


def _input(site: Site, index: int) -> tuple[int, list[int]] | None:
    inputs = site.node.input
    if index >= len(inputs) or not inputs[index]:
        return None
    t = site.scope.type_of(inputs[index])
    dims = known_dims(t)
    return None if dims is None else (t.tensor_type.elem_type, dims)


def _outputs(site: Site, *types: tuple[int, list[int]]) -> OutputTypes:
    return {name: t for name, t in zip(site.node.output, types) if name}


def attention_outputs(site: Site) -> OutputTypes:
    """Return PackedAttention / PackedMultiHeadAttention output 0: [T, N*Hv] from the spec's problem."""
    inputs = read_node(site)
    element_size = ELEMENT_TYPES.get(inputs.element_type)
    num_heads = inputs.attributes.get("num_heads")
    qkv_hidden_sizes = inputs.attributes.get("qkv_hidden_sizes")
    if inputs.unresolved or config_problem(inputs.op, element_size, num_heads, qkv_hidden_sizes):
        return {}
    try:
        problem, _ = problem_from_hints(inputs.op, element_size, num_heads, inputs.hints, qkv_hidden_sizes)
    except WorkspaceError:
        return {}
    if problem is None:
        return {}
    elem_type = site.scope.type_of(site.node.input[0]).tensor_type.elem_type
    return _outputs(site, (elem_type, [problem.token_count, problem.v_hidden_size]))


def same_shape_outputs(site: Site) -> OutputTypes:
    """Return output 0 with input 0's type (normalizations and activations)."""
    first = _input(site, 0)
    return {} if first is None else _outputs(site, first)


def remove_padding_outputs(site: Site) -> OutputTypes:
    """Return RemovePadding's outputs for input [B, S, H]: [B*S, H] (a bound on T), token_offset
    [B, S], cumulative_sequence_length [B + 1] and max_seq_len [1]."""
    first = _input(site, 0)
    if first is None or len(first[1]) != 3:
        return {}
    elem_type, (batch, seq, hidden) = first
    return _outputs(site, (elem_type, [batch * seq, hidden]), (INT32, [batch, seq]), (INT32, [batch + 1]),
                    (INT32, [1]))


def restore_padding_outputs(site: Site) -> OutputTypes:
    """Return RestorePadding's output [B, S, H] for input [T, H] and token_offset [B, S]."""
    first, offsets = _input(site, 0), _input(site, 1)
    if first is None or offsets is None or len(first[1]) != 2 or len(offsets[1]) != 2:
        return {}
    return _outputs(site, (first[0], [*offsets[1], first[1][1]]))


def rule_for(site: Site) -> Callable[[Site], OutputTypes] | None:
    """Return the output rule for a com.microsoft node attnws knows, else None."""
    node = site.node
    if node.domain != MS_DOMAIN:
        return None
    if node.op_type in ATTENTION_OPS:
        return attention_outputs
    if node.op_type in SAME_SHAPE_OPS:
        return same_shape_outputs
    return {"RemovePadding": remove_padding_outputs, "RestorePadding": restore_padding_outputs}.get(node.op_type)
