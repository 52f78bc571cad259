"""A node's path joins its graph's path and its label with one "/": an exporter's scoped name
("/model/layers.0/attn/GroupQueryAttention", every builder graph's) brings its own, so the path
reads `main/model/layers.0/attn/GroupQueryAttention`, never `main//model/...`; a call site or a
control-flow node so named does the same in the paths below it. No two attention nodes of a model
share a path: a later one that would (two nodes of one name, "x" beside "/x") is suffixed " (2)"."""

from __future__ import annotations

from pathlib import Path

import pytest
from onnx import helper

from attnws.model import ShapeBounds, analyze_model, load_model
from attnws.model.graph import join_path, unique_paths

from .builders import FP32, LAYER_SHAPE, OPSETS, call, functions_model, local_function, mha_node, run, save

GENAI = Path(__file__).parent.parent / "data" / "genai"


@pytest.mark.parametrize("parent,label,path", [
    ("main", "attn", "main/attn"),
    ("main", "/model/layers.0/attn/GroupQueryAttention", "main/model/layers.0/attn/GroupQueryAttention"),
    ("main/layer0", "/attn", "main/layer0/attn"),
    ("main", "//x", "main//x"),  # only the label's own first "/" stands for the separator
], ids=["plain", "scoped", "scoped-in-a-function", "two-slashes"])
def test_join_path(parent, label, path):
    assert join_path(parent, label) == path


@pytest.mark.parametrize("paths,unique", [
    (["main/a", "main/b"], ["main/a", "main/b"]),
    (["main/a", "main/a", "main/a"], ["main/a", "main/a (2)", "main/a (3)"]),
    (["main/a", "main/a", "main/a (2)"], ["main/a", "main/a (3)", "main/a (2)"]),
], ids=["distinct", "three-alike", "a-suffix-taken"])
def test_unique_paths(paths, unique):
    assert unique_paths(paths) == unique and len(set(unique)) == len(unique)


def test_a_builder_graph_s_nodes_read_with_one_slash():
    report = analyze_model(load_model(str(GENAI / "llama3-8b-fp16" / "model.onnx")), ShapeBounds({"batch_size": 1}))
    assert [(n.graph, n.name, n.path) for n in report.nodes] == [
        ("main", f"/model/layers.{i}/attn/GroupQueryAttention", f"main/model/layers.{i}/attn/GroupQueryAttention")
        for i in range(2)]


def test_a_scoped_call_site_names_the_graph_below_it_with_one_slash(tmp_path):
    model = functions_model([call("Layer", ["x"], ["y"], "/model/layers.0", heads=4)],
                            [local_function("Layer", [mha_node(name="/attn")])])
    (node,) = run(save(model, tmp_path), "--json").json["nodes"]
    assert (node["graph"], node["name"]) == ("main/model/layers.0", "/attn")
    (report,) = analyze_model(model, ShapeBounds()).nodes
    assert report.path == "main/model/layers.0/attn"


def _two_nodes(first: str, second: str):
    """Two MultiHeadAttention nodes over x [2, 8, 64] in the main graph, named `first` and `second`."""
    nodes = [mha_node(["x", "x", "x"], "y1", first, heads=4), mha_node(["y1", "y1", "y1"], "y", second, heads=4)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", FP32, LAYER_SHAPE)],
                              [helper.make_tensor_value_info("y", FP32, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


@pytest.mark.parametrize("names,paths", [
    (("attn", "/attn"), ["main/attn", "main/attn (2)"]),
    (("/attn", "attn"), ["main/attn", "main/attn (2)"]),
    (("attn", "attn"), ["main/attn", "main/attn (2)"]),
], ids=["plain-then-scoped", "scoped-then-plain", "one-name-twice"])
def test_no_two_attention_nodes_share_a_path(names, paths, tmp_path):
    model = _two_nodes(*names)
    assert [n.path for n in analyze_model(model, ShapeBounds()).nodes] == paths
    checks = run(save(model, tmp_path), "--policy", "tight", "--json").json["checks"]
    assert list(checks) == paths  # each node keeps its own solver record
