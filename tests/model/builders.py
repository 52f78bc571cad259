"""Small models for the model-layer tests, built with onnx.helper, and the shapes they stand for."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from attnws.model import commands

MS = "com.microsoft"
FP16, FP32 = TensorProto.FLOAT16, TensorProto.FLOAT
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]

Input = tuple[str, int, Sequence[Any] | None] | None  # (name, element type, dims or None); None: missing


def node_model(op_type: str, inputs: Sequence[Input], domain: str = MS, opsets=None, **attrs: Any) -> onnx.ModelProto:
    """Return a one-node model whose present inputs are graph inputs; output `out` is shapeless."""
    names = [i[0] if i else "" for i in inputs]
    graph_inputs = [helper.make_tensor_value_info(*i) for i in inputs if i]
    node = helper.make_node(op_type, names, ["out"], name="attn", domain=domain, **attrs)
    graph = helper.make_graph([node], "g", graph_inputs, [helper.make_tensor_value_info("out", FP16, None)])
    return helper.make_model(graph, opset_imports=OPSETS if opsets is None else opsets)


def pmha_separate_inputs(t=24, b=4, s=8, n=4, h=16, elem=FP16, bias=None, attn_bias=None) -> list[Input]:
    """Return PMHA separate-format inputs [T, N*H] x3, token_offset [B, S], cu [B+1]."""
    return [("q", elem, [t, n * h]), ("k", elem, [t, n * h]), ("v", elem, [t, n * h]), bias,
            ("to", TensorProto.INT32, [b, s]), ("cu", TensorProto.INT32, [b + 1]), attn_bias]


def save(model: onnx.ModelProto, tmp_path: Path, name: str = "model.onnx") -> str:
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return str(path)


def parse(*argv: str) -> argparse.Namespace:
    """Return the namespace `attnws model ARGV` parses to, with the layer's own register()."""
    parser = argparse.ArgumentParser(prog="attnws")
    commands.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["model", *argv])


def run(*argv: str):
    """Return the CommandResult of `attnws model ARGV` (errors propagate, as the CLI sees them)."""
    ns = parse(*argv)
    return ns.handler(ns, lambda message: None)


# -- external data ---------------------------------------------------------------------------------

W_BYTES = 4 * 2  # the [4] fp16 weight every external tensor below stands for


def external(tensor_name="w", location="w.bin", dims=(4,), data_type=FP16, **entries):
    """Return a tensor stored externally at `location` with the given extra entries."""
    tensor = TensorProto(name=tensor_name, data_type=data_type, dims=list(dims), data_location=TensorProto.EXTERNAL)
    for key, value in {"location": location, **entries}.items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def initializer_model(tensor):
    """Return a model whose one initializer is `tensor`, used by an Identity node."""
    graph = helper.make_graph([helper.make_node("Identity", [tensor.name], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", FP16, None)], [tensor])
    return helper.make_model(graph, opset_imports=OPSETS)


def if_model(tensor):
    """Return a model whose `If` then-branch holds `tensor` as an initializer."""
    then = helper.make_graph([helper.make_node("Identity", [tensor.name], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", FP16, None)], [tensor])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", FP16, None)])
    inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", FP16, [4])]
    node = helper.make_node("If", ["c"], ["y"], name="gate", then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", FP16, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


def sparse_model(values):
    """Return a model whose one sparse initializer has `values` (indices inline)."""
    indices = numpy_helper.from_array(np.array([0, 1, 2, 3], np.int64), "w_indices")
    sparse = helper.make_sparse_tensor(values, indices, [8])
    graph = helper.make_graph([helper.make_node("Identity", [values.name], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", FP16, None)], sparse_initializer=[sparse])
    return helper.make_model(graph, opset_imports=OPSETS)


def constant_model(tensor):
    """Return a model with a Constant node whose value attribute is `tensor`."""
    graph = helper.make_graph([helper.make_node("Constant", [], ["y"], name="const", value=tensor)], "g", [],
                              [helper.make_tensor_value_info("y", FP16, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


# -- model-local functions -------------------------------------------------------------------------

LOCAL = "local"
LOCAL_OPSETS = [*OPSETS, helper.make_opsetid(LOCAL, 1)]
LAYER_SHAPE = [2, 8, 64]  # [B, S, hidden] of every MultiHeadAttention inside the functions below


def heads_attribute(name: str = "num_heads", ref: str = "heads") -> onnx.AttributeProto:
    """Return an attribute that takes its value from the calling function's attribute `ref`."""
    return onnx.AttributeProto(name=name, type=onnx.AttributeProto.INT, ref_attr_name=ref)


def mha_node(inputs=("x", "x", "x"), output="y", name="attn", heads: int | None = None) -> onnx.NodeProto:
    """Return a MultiHeadAttention node; `heads` None takes num_heads from the function's `heads`."""
    node = helper.make_node("MultiHeadAttention", list(inputs), [output], name=name, domain=MS,
                            **({} if heads is None else {"num_heads": heads}))
    if heads is None:
        node.attribute.append(heads_attribute())
    return node


def local_function(name: str, nodes: Sequence[onnx.NodeProto], inputs=("x",), outputs=("y",),
                   attributes: Sequence[str] = ("heads",), defaults: Sequence[onnx.AttributeProto] = ()):
    """Return a model-local function (domain `local`) with the given body."""
    return helper.make_function(LOCAL, name, list(inputs), list(outputs), list(nodes), LOCAL_OPSETS,
                                attributes=list(attributes), attribute_protos=list(defaults))


def call(function: str, inputs=("x",), outputs=("y",), name: str = "", **attrs: Any) -> onnx.NodeProto:
    """Return a node calling the local function `function`."""
    return helper.make_node(function, list(inputs), list(outputs), name=name or None, domain=LOCAL, **attrs)


def functions_model(nodes: Sequence[onnx.NodeProto], functions: Sequence[onnx.FunctionProto], output: str = "y",
                    elem: int = FP32, extra_inputs: Sequence[onnx.ValueInfoProto] = ()) -> onnx.ModelProto:
    """Return a model with graph input x [2, 8, 64], the nodes, the functions and one output."""
    inputs = [helper.make_tensor_value_info("x", elem, LAYER_SHAPE), *extra_inputs]
    graph = helper.make_graph(list(nodes), "g", inputs, [helper.make_tensor_value_info(output, elem, None)])
    return helper.make_model(graph, opset_imports=LOCAL_OPSETS, functions=list(functions))


def ort_attention_nodes(model: onnx.ModelProto, folder: Path) -> list[onnx.NodeProto]:
    """Return the attention nodes ONNX Runtime 1.31.1 (CPU) keeps once it has inlined the model's
    functions: those of the graph it saves after loading, optimizations off, in graph order."""
    import onnxruntime as ort

    from attnws.model.graph import all_graphs
    from attnws.model.translate import is_attention

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    copy.ir_version = min(copy.ir_version, 10)  # the newest IR version ORT 1.31.1 reads
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # fatal only: a model ORT refuses raises, its log stays quiet
    options.optimized_model_filepath = str(folder / "ort-inlined.onnx")
    ort.InferenceSession(copy.SerializeToString(), options, providers=["CPUExecutionProvider"])
    saved = onnx.load_model(options.optimized_model_filepath)
    return [node for graph in all_graphs(saved.graph) for node in graph.node if is_attention(node)]


def ort_error(model: onnx.ModelProto) -> str:
    """Return ONNX Runtime's error creating a CPU session for the model, "" when it loads."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: a model ORT refuses raises, its log stays quiet
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - ORT raises several types; the message is what counts
        return str(error)
    return ""
