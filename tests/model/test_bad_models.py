"""Bad model files: each gets a BadModel (exit 1) naming the node or tensor and the problem."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from attnws.model import BadModel, ModelTooLarge
from attnws.spec.errors import UsageError, WorkspaceError

from .builders import (
    FP16,
    FP32,
    MS,
    OPSETS,
    call,
    functions_model,
    local_function,
    mha_node,
    node_model,
    pmha_separate_inputs,
    run,
    save,
)

PMHA = "PackedMultiHeadAttention"


def bad_attribute_type():
    model = node_model(PMHA, pmha_separate_inputs(), num_heads=4)
    model.graph.node[0].attribute[0].CopyFrom(helper.make_attribute("num_heads", 4.0))
    return model


def function_with_ms_opset_2():
    layer = local_function("Layer", [mha_node(heads=4)])
    layer.opset_import[1].version = 2
    return functions_model([call("Layer", name="layer0")], [layer])


MODELS = {
    "wrong-domain": (lambda: node_model(PMHA, pmha_separate_inputs(), domain="", num_heads=4),
                     "node 'attn' (PackedMultiHeadAttention, graph main): PackedMultiHeadAttention is a com.microsoft "
                     "operator, found in domain ''"),
    "no-ms-opset-import": (lambda: node_model(PMHA, pmha_separate_inputs(), opsets=OPSETS[:1], num_heads=4),
                           "No opset import for domain 'com.microsoft'"),
    "ms-opset-version-2": (lambda: node_model(PMHA, pmha_separate_inputs(), num_heads=4,
                                              opsets=[OPSETS[0], helper.make_opsetid(MS, 2)]),
                           "com.microsoft version 2"),
    "attribute-wrong-type": (bad_attribute_type, "node 'attn' (PackedMultiHeadAttention, graph main): attribute "
                                                 "num_heads has type FLOAT, expected INT"),
    "unknown-attribute": (lambda: node_model(PMHA, pmha_separate_inputs(), num_heads=4, qkv_hidden_sizes=[64] * 3),
                          "unknown attribute 'qkv_hidden_sizes'"),
    "missing-required-input": (lambda: node_model(PMHA, pmha_separate_inputs()[:4] + [None, ("cu", TensorProto.INT32, [5])],
                                                  num_heads=4),
                               "node 'attn' (PackedMultiHeadAttention, graph main): required input 4 (token_offset) "
                               "is missing"),
    "pa-missing-weights": (lambda: node_model("PackedAttention", [("x", FP16, [24, 64])], num_heads=4),
                           "required input 1 (weights) is missing"),
    "too-many-inputs": (lambda: node_model(PMHA, pmha_separate_inputs() + [("extra", FP16, [1])], num_heads=4),
                        "8 inputs; PackedMultiHeadAttention takes at most 7"),
    "mha-mixed-types": (lambda: node_model("MultiHeadAttention", [("q", FP32, [2, 8, 64]), ("k", FP16, [2, 8, 64]),
                                                                  ("v", FP16, [2, 8, 64])], num_heads=4),
                        "node 'attn' (MultiHeadAttention, graph main): input 0 (query 'q') is float but input 1 (key "
                        "'k') is float16; ONNX Runtime's MultiHeadAttention takes one element type for all of them"),
    "mha-int64-mask": (lambda: node_model("MultiHeadAttention", [("q", FP16, [2, 8, 64]), None, None, None,
                                                                 ("m", TensorProto.INT64, [2])], num_heads=4),
                       "input 4 (key_padding_mask 'm') is int64; ONNX Runtime's MultiHeadAttention takes int32 there"),
    "pmha-fp32-bias-with-fp16-query": (
        lambda: node_model(PMHA, pmha_separate_inputs(bias=("b", FP32, [192])), num_heads=4),
        "input 0 (query 'q') is float16 but input 3 (bias 'b') is float"),
    "pa-int64-token-offset": (
        lambda: node_model("PackedAttention", [("x", FP16, [24, 64]), ("w", FP16, [64, 192]), ("b", FP16, [192]),
                                               ("to", TensorProto.INT64, [4, 8]), ("cu", TensorProto.INT32, [5])],
                           num_heads=4),
        "input 3 (token_offset 'to') is int64; ONNX Runtime's PackedAttention takes int32 there"),
    "function-ms-opset-version-2": (function_with_ms_opset_2, "opset import of function local.Layer com.microsoft "
                                                              "version 2"),
    "undefined-input": (lambda: helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["nowhere"], ["y"])], "g", [], [helper.make_tensor_value_info("y", FP16, [1])]),
        opset_imports=OPSETS), "input 'nowhere' of node"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_malformed_model_is_a_bad_model(name, tmp_path):
    build, message = MODELS[name]
    with pytest.raises(BadModel) as caught:
        run(save(build(), tmp_path))
    assert message in str(caught.value)
    assert not isinstance(caught.value, UsageError)  # the CLI maps it to exit 1, not 2


@pytest.mark.parametrize("data,message", [
    (b"this is a text file, not a model\n", "is not an ONNX model"),
    (b"", "is not an ONNX model: no IR version or no graph"),
], ids=["text", "empty"])
def test_not_onnx(data, message, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    with pytest.raises(BadModel, match=message):
        run(str(path))


def test_truncated_model(tmp_path):
    data = node_model(PMHA, pmha_separate_inputs(), num_heads=4).SerializeToString()
    path = tmp_path / "model.onnx"
    path.write_bytes(data[: len(data) - 7])
    with pytest.raises(BadModel, match="truncated"):
        run(str(path))


def test_missing_file_is_a_usage_error(tmp_path):
    """A file the command line names that cannot be read is exit 2, as a missing --target file is."""
    with pytest.raises(UsageError, match="cannot read"):
        run(str(tmp_path / "absent.onnx"))


def test_file_over_the_limit_is_refused_before_parsing(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\xff" * 100)  # not ONNX: the size check must fire first
    with pytest.raises(ModelTooLarge, match="100 bytes, over the limit of 99 bytes"):
        run(str(path), "--max-bytes", "99")
    with pytest.raises(BadModel, match="not an ONNX model"):
        run(str(path), "--max-bytes", "100")


def _external_model(tmp_path, location="weights.bin"):
    weight = numpy_helper.from_array(np.zeros((64, 192), np.float16), "w")
    inputs = [helper.make_tensor_value_info("x", FP16, [24, 64])]
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", inputs,
                              [helper.make_tensor_value_info("y", FP16, [24, 192])], [weight])
    model = helper.make_model(graph, opset_imports=OPSETS)
    onnx.save_model(model, str(tmp_path / "model.onnx"), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    saved = onnx.load_model(str(tmp_path / "model.onnx"), load_external_data=False)
    for entry in saved.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    return save(saved, tmp_path)


def test_readable_external_data_is_accepted(tmp_path):
    assert run(_external_model(tmp_path)).exit_code == 0  # no attention node: nothing to size


def test_a_model_without_its_weights_file_is_read(tmp_path):
    """Sizing needs shapes, not weights: a model copied without its (maybe 16 GB) data file is read."""
    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").unlink()
    assert run(path).exit_code == 0


def test_a_short_weights_file_is_refused(tmp_path):
    path = _external_model(tmp_path)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 10)
    with pytest.raises(BadModel, match=r"needs bytes \[0, 24576\) .* which has 10"):
        run(path)


@pytest.mark.parametrize("location", ["../weights.bin", "/tmp/weights.bin", "sub/../../weights.bin"])
def test_a_missing_weights_file_outside_the_folder_is_still_refused(location, tmp_path):
    path = _external_model(tmp_path, location)
    with pytest.raises(BadModel, match="relative path inside the model's folder"):
        run(path)


@pytest.mark.parametrize("location", ["weights.bin/", "weights.bin/.", "./weights.bin//", "sub/", "."])
def test_external_data_location_naming_a_folder_is_refused(location, tmp_path):
    """ONNX Runtime cannot open 'weights.bin/' (a regular file read as a folder): refused like any
    other location it cannot read, whatever lies there."""
    (tmp_path / "sub").mkdir()
    with pytest.raises(BadModel, match=f"initializer 'w': external data location {re.escape(repr(location))} ends in "
                                       "'/' or '.': it names a folder, not a file"):
        run(_external_model(tmp_path, location))


@pytest.mark.parametrize("location", ["../weights.bin", "/etc/passwd"])
def test_external_data_outside_the_model_folder(location, tmp_path):
    with pytest.raises(BadModel, match="must be a relative path inside the model's folder"):
        run(_external_model(tmp_path, location))


def test_bad_model_roots_at_workspace_error():
    assert issubclass(ModelTooLarge, BadModel) and issubclass(BadModel, WorkspaceError)
    assert issubclass(BadModel, ValueError)
