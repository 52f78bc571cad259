"""Small models for the model-layer tests, built with onnx.helper, and the shapes they stand for."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

import onnx
from onnx import TensorProto, helper

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
