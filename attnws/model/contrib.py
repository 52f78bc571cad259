"""Output shapes of the com.microsoft operators ONNX's own shape inference does not know.

Each rule reads one node's input types and attributes (`NodeTypes`) and returns one entry per
output: (element type, dims) for an output it can size, None for one it cannot (an input shape
unknown or invalid). `infer` hands the rules to ONNX's inference as operator schemas, so they run
in ONNX's single pass over the graph. The attention operators' rule asks the node's reader
(`registry`) for the spec's problem of the node's shapes (`sizing_problem`) and then for the
output shapes (`output_shapes`), so a node the spec rejects (a MultiHeadAttention hidden size not
a multiple of num_heads among them) propagates nothing where its reader sizes the outputs from
the problem: the packed operators' output [T, N*Hv], MultiHeadAttention's output [B, S, N*Hv] and
present_key / present_value [B, N, T, H] (H, not Hv, for both: ORT gives them one shape);
GroupQueryAttention's reader reads the shapes alone, as ORT's symbolic shape inference does. The
unfused com.microsoft operators ORT's fusion leaves around attention (Attention,
EmbedLayerNormalization, SkipLayerNormalization, the activations) only pass shapes on.
RemovePadding's token count is bounded by B*S, its largest possible value.
"""

from __future__ import annotations

from typing import Callable

import onnx

from ..spec.errors import WorkspaceError
from .graph import known_dims
from .reader import OutputType
from .registry import READERS
from .translate import MS_DOMAIN, NodeTypes, node_inputs

Rule = Callable[[NodeTypes], list[OutputType]]
INT32 = onnx.TensorProto.INT32

# Operators whose first output has the type and shape of their first input.
SAME_SHAPE_OPS = frozenset({"BiasGelu", "FastGelu", "Gelu", "QuickGelu"})
# Skip layer normalizations: output 0 and output 3 (input_skip_bias_sum) are shaped like input 0.
SKIP_NORM_OPS = frozenset({"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"})


def _input(node: NodeTypes, index: int) -> tuple[int, list[int]] | None:
    t = node.type_of(index)
    dims = known_dims(t)
    return None if t is None or dims is None else (t.tensor_type.elem_type, dims)


def attention_outputs(node: NodeTypes) -> list[OutputType]:
    """Return an attention node's outputs (its reader's `output_shapes`), given the spec's problem
    for its shapes (`sizing_problem`; None when a shape is unresolved or the spec refuses them)."""
    inputs = node_inputs(node)
    problem = None
    if not inputs.unresolved:
        try:
            problem = inputs.reader.sizing_problem(inputs)
        except WorkspaceError:
            problem = None
    return inputs.reader.output_shapes(inputs, problem)


def multi_attention_outputs(node: NodeTypes) -> list[OutputType]:
    """Return com.microsoft Attention's output 0 (not sized by attnws; its shape passes on):
    [B, S, v_hidden] for input [B, S, input_hidden], v_hidden from qkv_hidden_sizes or a third of
    the weights' columns."""
    first, weights = _input(node, 0), _input(node, 1)
    if first is None or len(first[1]) != 3:
        return []
    sizes = node.attributes.get("qkv_hidden_sizes")
    if isinstance(sizes, list) and len(sizes) == 3 and all(isinstance(v, int) and 0 <= v for v in sizes):
        v_hidden = sizes[2]
    elif weights is not None and len(weights[1]) == 2 and weights[1][1] % 3 == 0:
        v_hidden = weights[1][1] // 3
    else:
        return []
    return [(first[0], [first[1][0], first[1][1], v_hidden])]


def embed_layer_norm_outputs(node: NodeTypes) -> list[OutputType]:
    """Return EmbedLayerNormalization's output [B, S, H] and mask_index [B] for input_ids [B, S] and
    word_embedding [V, H] (input 2, whose type the output takes)."""
    ids, words = _input(node, 0), _input(node, 2)
    if ids is None or words is None or len(ids[1]) != 2 or len(words[1]) != 2:
        return []
    (batch, seq), hidden = ids[1], words[1][1]
    return [(words[0], [batch, seq, hidden]), (INT32, [batch])]


def skip_norm_outputs(node: NodeTypes) -> list[OutputType]:
    """Return a skip layer normalization's output 0 and input_skip_bias_sum (output 3), both shaped
    like input 0; mean and inv_std_var are left unknown."""
    first = _input(node, 0)
    return [first, None, None, first]


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
    **{op_type: attention_outputs for op_type in READERS},
    **{op_type: same_shape_outputs for op_type in SAME_SHAPE_OPS},
    **{op_type: skip_norm_outputs for op_type in SKIP_NORM_OPS},
    "Attention": multi_attention_outputs,
    "EmbedLayerNormalization": embed_layer_norm_outputs,
    "RemovePadding": remove_padding_outputs,
    "RestorePadding": restore_padding_outputs,
}

# The attributes a rule reads, by operator (ONNX's inference context is asked for them by name).
RULE_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    **{op_type: tuple(reader.attribute_types) for op_type, reader in READERS.items()},
    "Attention": ("qkv_hidden_sizes",),
}


# ONNX Runtime's own default-domain operators (`ort_schemas`) whose outputs attnws sizes:
# SimplifiedLayerNormalization's Y is shaped like X (its inv_std_var is left unknown).
DEFAULT_DOMAIN_RULES: dict[str, Rule] = {"SimplifiedLayerNormalization": same_shape_outputs}


def rule_for(op_type: str, domain: str) -> Rule | None:
    """Return the output rule for a com.microsoft operator, or one of ORT's own default-domain
    operators, that attnws knows, else None."""
    return RULES.get(op_type) if domain == MS_DOMAIN else DEFAULT_DOMAIN_RULES.get(op_type) if domain == "" else None
