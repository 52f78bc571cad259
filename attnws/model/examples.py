"""Example models: a BERT-like packed encoder as ORT's packing tools leave it, built with onnx.helper.

`packed_encoder()` is BERT-base by default (12 layers, hidden 768, 12 heads, FFN 3072, fp16,
PackedMultiHeadAttention with packed QKV). Its graph inputs are the embedded tokens after
RemovePadding, `hidden_states [token_count, hidden]`, with `token_offset [batch, seq]`,
`cumulative_sequence_length [batch_plus_1]` and optionally `attention_bias [batch|1, heads|1, seq,
seq]`; the four symbolic dimensions are named by the DIM_* constants. A layer is attention, output
projection, SkipLayerNormalization, MatMul + BiasGelu + MatMul, SkipLayerNormalization. Weights are
zeros shared by every layer: the example carries shapes, not a trained model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..spec.problem import Op
from ..spec.packed.problem import QkvFormat
from .translate import MS_DOMAIN

DIM_TOKENS = "token_count"
DIM_BATCH = "batch"
DIM_SEQ = "seq"
DIM_BATCH_PLUS_ONE = "batch_plus_1"
DTYPES = {"fp16": onnx.TensorProto.FLOAT16, "fp32": onnx.TensorProto.FLOAT}
ONNX_OPSET = 17


@dataclass(frozen=True)
class EncoderSpec:
    """What `packed_encoder` builds. Sizes are element counts; `attention_bias` is None (no bias)
    or (broadcast_batch, broadcast_heads)."""

    layers: int = 12
    hidden: int = 768
    heads: int = 12
    ffn: int = 3072
    dtype: str = "fp16"
    op: Op = Op.PMHA
    pmha_format: QkvFormat = QkvFormat.PACKED
    qkv_bias: bool = False  # PMHA's optional QKV bias input
    qkv_hidden_sizes: bool = False  # PA's attribute
    attention_bias: tuple[bool, bool] | None = None


class _Builder:
    """Accumulates nodes and shared zero initializers."""

    def __init__(self, spec: EncoderSpec) -> None:
        self.spec = spec
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, onnx.TensorProto] = {}

    def weight(self, name: str, *dims: int) -> str:
        """Return the name of a shared zero weight of the encoder's dtype, created on first use."""
        if name not in self.initializers:
            array = np.zeros(dims, dtype=helper.tensor_dtype_to_np_dtype(DTYPES[self.spec.dtype]))
            self.initializers[name] = numpy_helper.from_array(array, name)
        return name

    def constant(self, name: str, values: list[int]) -> str:
        """Return the name of an int64 initializer holding `values`."""
        self.initializers[name] = numpy_helper.from_array(np.array(values, np.int64), name)
        return name

    def node(self, op_type: str, inputs: list[str], output: str, domain: str = "", **attrs: object) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, domain=domain, **attrs))
        return output


def _attention(b: _Builder, x: str, layer: int, bias_input: str) -> str:
    s, h, out = b.spec, b.spec.hidden, f"attention_{layer}"
    common = ["token_offset", "cumulative_sequence_length"]
    if s.op is Op.PA:
        attrs = {"qkv_hidden_sizes": [h, h, h]} if s.qkv_hidden_sizes else {}
        inputs = [x, b.weight("qkv_weight", h, 3 * h), b.weight("qkv_bias", 3 * h), *common, bias_input]
        return b.node("PackedAttention", inputs, out, MS_DOMAIN, num_heads=s.heads, **attrs)
    qkv_bias = b.weight("qkv_bias", 3 * h) if s.qkv_bias else ""
    if s.pmha_format is QkvFormat.PACKED:
        qkv = b.node("MatMul", [x, b.weight("qkv_weight", h, 3 * h)], f"qkv_{layer}")
        shape = b.constant("packed_qkv_shape", [0, s.heads, 3, h // s.heads])
        qkv_inputs = [b.node("Reshape", [qkv, shape], f"packed_qkv_{layer}"), "", ""]
    else:
        qkv_inputs = [b.node("MatMul", [x, b.weight("hidden_weight", h, h)], f"{name}_{layer}") for name in "qkv"]
    inputs = [*qkv_inputs, qkv_bias, *common, bias_input]
    return b.node("PackedMultiHeadAttention", inputs, out, MS_DOMAIN, num_heads=s.heads)


def _layer(b: _Builder, x: str, layer: int, bias_input: str) -> str:
    h, ffn = b.spec.hidden, b.spec.ffn
    norm = [b.weight("ln_gamma", h), b.weight("ln_beta", h)]
    attn = _attention(b, x, layer, bias_input)
    proj = b.node("MatMul", [attn, b.weight("hidden_weight", h, h)], f"attention_output_{layer}")
    h1 = b.node("SkipLayerNormalization", [proj, x, *norm, b.weight("hidden_bias", h)], f"attention_norm_{layer}",
                MS_DOMAIN, epsilon=1e-12)
    up = b.node("MatMul", [h1, b.weight("ffn_up_weight", h, ffn)], f"ffn_up_{layer}")
    act = b.node("BiasGelu", [up, b.weight("ffn_up_bias", ffn)], f"ffn_gelu_{layer}", MS_DOMAIN)
    down = b.node("MatMul", [act, b.weight("ffn_down_weight", ffn, h)], f"ffn_down_{layer}")
    return b.node("SkipLayerNormalization", [down, h1, *norm, b.weight("hidden_bias", h)], f"layer_output_{layer}",
                  MS_DOMAIN, epsilon=1e-12)


def encoder_inputs(spec: EncoderSpec) -> list[onnx.ValueInfoProto]:
    """Return the encoder's graph inputs (attention_bias last, when present)."""
    dtype = DTYPES[spec.dtype]
    inputs = [
        helper.make_tensor_value_info("hidden_states", dtype, [DIM_TOKENS, spec.hidden]),
        helper.make_tensor_value_info("token_offset", onnx.TensorProto.INT32, [DIM_BATCH, DIM_SEQ]),
        helper.make_tensor_value_info("cumulative_sequence_length", onnx.TensorProto.INT32, [DIM_BATCH_PLUS_ONE]),
    ]
    if spec.attention_bias is not None:
        batch, heads = spec.attention_bias
        dims = [1 if batch else DIM_BATCH, 1 if heads else spec.heads, DIM_SEQ, DIM_SEQ]
        inputs.append(helper.make_tensor_value_info("attention_bias", dtype, dims))
    return inputs


def packed_encoder(spec: EncoderSpec = EncoderSpec()) -> onnx.ModelProto:
    """Return the packed encoder ModelProto `spec` describes (BERT-base PMHA fp16 by default)."""
    b = _Builder(spec)
    bias_input = "attention_bias" if spec.attention_bias is not None else ""
    x = "hidden_states"
    for layer in range(spec.layers):
        x = _layer(b, x, layer, bias_input)
    output = helper.make_tensor_value_info(x, DTYPES[spec.dtype], [DIM_TOKENS, spec.hidden])
    graph = helper.make_graph(b.nodes, "packed_encoder", encoder_inputs(spec), [output],
                              list(b.initializers.values()))
    opsets = [helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, producer_name="attnws.model.examples")
