"""Hostile model files: escapes from the model's folder, files that never end, malformed contents.
Each is a BadModel (exit 1) with a clear message; none opens or examines a file outside the folder,
and none leaks anything about one."""

from __future__ import annotations

import os
import re
import sys
import threading
import time

import onnx
import pytest
from onnx import TensorProto

from attnws.model import BadModel, ModelTooLarge, ShapeBounds, analyze_model, load_model, shape_bounds
from attnws.model import infer as infer_module
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.model.load import DEFAULT_MAX_MODEL_NODES
from attnws.spec import documents

from .builders import (
    W_BYTES,
    constant_model,
    external,
    if_model,
    initializer_model,
    node_model,
    pmha_separate_inputs,
    save,
    sparse_model,
)


@pytest.fixture
def folder(tmp_path):
    """The model's folder (with a valid w.bin) next to a folder outside it with a secret file."""
    inside = tmp_path / "model"
    inside.mkdir()
    (inside / "w.bin").write_bytes(b"\1" * W_BYTES)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"\2" * 12345)
    return inside


@pytest.fixture
def opened(monkeypatch):
    """Record every path attnws's file layer opens, stats or follows (documents' `os`)."""
    seen: list[str] = []

    class Recorder:
        def __getattr__(self, name):
            real = getattr(os, name)
            if name in ("open", "stat", "lstat", "readlink", "access"):
                def call(path, *args, **kwargs):
                    seen.append(os.path.abspath(path))
                    return real(path, *args, **kwargs)
                return call
            return real

    monkeypatch.setattr(documents, "os", Recorder())
    return seen


def assert_inside(paths, folder):
    for path in paths:
        assert os.path.commonpath([path, str(folder)]) == str(folder), f"{path} is outside {folder}"


# -- external data stays in the model's folder ---------------------------------------------------

@pytest.mark.parametrize("build", [initializer_model, if_model, sparse_model, constant_model],
                         ids=["initializer", "subgraph", "sparse", "attribute"])
def test_valid_external_data_everywhere_is_accepted(build, folder, opened):
    load_model(save(build(external()), folder))
    assert_inside(opened, folder)


@pytest.mark.parametrize("build", [initializer_model, if_model, sparse_model, constant_model],
                         ids=["initializer", "subgraph", "sparse", "attribute"])
@pytest.mark.parametrize("location", ["/etc/passwd", "../outside/secret.bin", "../../x", "a/../../x"])
def test_location_outside_the_folder_is_refused_everywhere(build, location, folder, opened):
    with pytest.raises(BadModel, match="must be a relative path inside the model's folder"):
        load_model(save(build(external(location=location)), folder))
    assert_inside(opened, folder)


@pytest.mark.parametrize("target", ["../outside/secret.bin", "OUTSIDE/secret.bin", "../outside/absent.bin",
                                    "/etc/shadow", "/"], ids=["relative", "absolute", "absent", "shadow", "root"])
@pytest.mark.parametrize("length", [None, "12345", "3"], ids=["no-length", "true-length", "wrong-length"])
def test_symlink_out_of_the_folder_is_refused_without_a_look(target, length, folder, opened):
    (folder / "link.bin").symlink_to(target.replace("OUTSIDE", str(folder.parent / "outside")))
    entries = {} if length is None else {"length": length}
    tensor = external(location="link.bin", dims=(12345,), data_type=TensorProto.UINT8, **entries)
    with pytest.raises(BadModel) as caught:
        load_model(save(initializer_model(tensor), folder))
    message = str(caught.value)
    if length == "3":
        assert "length 3 differs from the 12345 bytes" in message  # the model's own claim, nothing outside
    else:
        assert message == ("initializer 'w': external data location 'link.bin' leads outside the model's folder "
                           "through a symbolic link")
    assert "which has" not in message  # never the size of a file outside
    assert_inside(opened, folder)


def test_symlinked_subgraph_data_escaping_is_refused(folder, opened):
    (folder / "link.bin").symlink_to(folder.parent / "outside" / "secret.bin")
    with pytest.raises(BadModel, match="leads outside the model's folder"):
        load_model(save(if_model(external(location="link.bin")), folder))
    assert_inside(opened, folder)


@pytest.mark.parametrize("make", [
    lambda d: (d / "link.bin").symlink_to("w.bin"),
    lambda d: (d / "link.bin").symlink_to(d / "w.bin"),
    lambda d: ((d / "sub").mkdir(), (d / "sub" / "up").symlink_to(".."), (d / "link.bin").symlink_to("sub/up/w.bin")),
    lambda d: ((d / "alias").symlink_to("."), (d / "link.bin").symlink_to("alias/alias/w.bin")),
], ids=["relative", "absolute", "through-parent-link", "through-self-link"])
def test_symlinks_that_stay_inside_are_followed(make, folder, opened):
    make(folder)
    load_model(save(initializer_model(external(location="link.bin")), folder))
    assert_inside(opened, folder)


def test_symlink_loop_is_refused(folder):
    (folder / "a.bin").symlink_to("b.bin")
    (folder / "b.bin").symlink_to("a.bin")
    with pytest.raises(BadModel, match="goes through more than 40 symbolic links"):
        load_model(save(initializer_model(external(location="a.bin")), folder))


def test_subgraph_data_is_resolved_in_the_model_folder_not_the_current_one(folder, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no w.bin here: the checker used to look here
    path = save(if_model(external()), folder)
    load_model(path)
    (folder / "w.bin").write_bytes(b"w")  # too short for the tensor
    with pytest.raises(BadModel, match="needs bytes"):
        load_model(path)
    (folder / "w.bin").rename(elsewhere / "w.bin")  # only in the current directory now: never looked at
    load_model(path)


@pytest.mark.parametrize("entries,message", [
    ({"offset": "-5"}, "offset '-5' must be a non-negative integer"),
    ({"length": "-1"}, "length '-1' must be a non-negative integer"),
    ({"offset": "abc"}, "offset 'abc' must be a non-negative integer"),
    ({"offset": "1" * 30}, "must be a non-negative integer"),
    ({"offset": "4"}, r"needs bytes \[4, 12\) of 'w.bin', which has 8"),
    ({"length": "9"}, "length 9 differs from the 8 bytes of its FLOAT16 [4] tensor"),
    ({"offset": ""}, "key 'offset' has an empty value"),
    ({"bogus": "1"}, "key 'bogus' is not one ONNX Runtime reads"),
], ids=["negative-offset", "negative-length", "offset-text", "offset-30-digits", "past-the-end", "length-mismatch",
        "empty-offset", "unknown-key"])
def test_bad_offsets_and_lengths(entries, message, folder):
    with pytest.raises(BadModel) as caught:
        load_model(save(initializer_model(external(**entries)), folder))
    assert message in str(caught.value) or re.search(message, str(caught.value))


@pytest.mark.parametrize("location,message", [
    ("", "key 'location' has an empty value"),
    ("w\0.bin", "holds a NUL character"),
    ("sub", "is not a regular file in the model's folder"),
    ("fifo", "is not a regular file in the model's folder"),
    ("w.bin/x", "Not a directory"),
    ("x" * 5000, "File name too long"),
], ids=["empty", "nul", "directory", "fifo", "file-as-directory", "too-long"])
def test_bad_locations(location, message, folder):
    (folder / "sub").mkdir()
    os.mkfifo(folder / "fifo")
    with pytest.raises(BadModel, match=message):
        load_model(save(initializer_model(external(location=location)), folder))


@pytest.mark.parametrize("tensor,message", [
    (external(dims=(-4,)), r"negative dimension \[-4\]"),
    (external(data_type=999), "data_type 999, which ONNX does not define"),
    (external(data_type=TensorProto.STRING), "a STRING tensor cannot be stored externally"),
], ids=["negative-dim", "data-type-999", "string"])
def test_bad_external_tensors(tensor, message, folder):
    with pytest.raises(BadModel, match=message):
        load_model(save(initializer_model(tensor), folder))


def test_model_on_standard_input_may_not_reference_external_data(folder, monkeypatch):
    import io
    data = initializer_model(external()).SerializeToString()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with pytest.raises(BadModel, match="read from standard input has no folder"):
        load_model("-")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(node_model(
        "PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4).SerializeToString())))
    assert load_model("-").graph.node[0].op_type == "PackedMultiHeadAttention"


# -- files that never end ----------------------------------------------------------------------

@pytest.mark.parametrize("path", ["fifo", "/dev/zero", "/dev/urandom", "."])
def test_model_paths_that_are_not_regular_files_are_refused_at_once(path, tmp_path, monkeypatch):
    if path.startswith("/dev") and not os.path.exists(path):
        pytest.skip(f"{path} is absent")
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("error", _error_of(load_model, path)), daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), f"load_model({path!r}) blocked"
    assert isinstance(box["error"], BadModel) and "not a regular file" in str(box["error"])


def _error_of(call, *args):
    try:
        call(*args)
    except Exception as error:  # noqa: BLE001 - returned to the test
        return error
    return None


# -- malformed contents ------------------------------------------------------------------------

def _with_input_elem_type(elem_type):
    model = node_model("PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4)
    model.graph.input[0].type.tensor_type.elem_type = elem_type
    return model


def _with_negative_input_dim():
    model = node_model("PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -24
    return model


def _bytes_with_invalid_utf8(field_value: bytes):
    model = node_model("PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4)
    data = model.SerializeToString()
    assert data.count(field_value) >= 1
    return data.replace(field_value, field_value[:1] + b"\xff" + field_value[2:])


@pytest.mark.parametrize("data,message", [
    (lambda: _with_input_elem_type(999).SerializeToString(), "elem_type 999, which ONNX does not define"),
    (lambda: _with_negative_input_dim().SerializeToString(), "negative dimension -24"),
    (lambda: _bytes_with_invalid_utf8(b"PackedMultiHeadAttention"), "field op_type holds .* which is not UTF-8 text"),
    (lambda: _bytes_with_invalid_utf8(b"num_heads"), "field name holds .* which is not UTF-8 text"),
    (lambda: _bytes_with_invalid_utf8(b"com.microsoft"), "which is not UTF-8 text"),
], ids=["input-elem-type-999", "negative-input-dim", "op-type-utf8", "attribute-name-utf8", "domain-utf8"])
def test_malformed_contents_are_bad_models(data, message, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(data())
    with pytest.raises(BadModel, match=message):
        load_model(path)


def test_unknown_element_type_in_memory_is_a_bad_model_not_a_crash():
    """analyze_model on an unchecked in-memory model names the type (ORT's schema allows float and
    float16 there) instead of crashing."""
    with pytest.raises(BadModel, match="input 0 \\(query 'q'\\) is unknown element type 999; ONNX Runtime's "
                                       "PackedMultiHeadAttention takes float or float16 there"):
        analyze_model(_with_input_elem_type(999), ShapeBounds())


# -- size: node limit and linear time ----------------------------------------------------------

def test_node_limit(tmp_path):
    path = save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path)
    assert len(load_model(path, max_nodes=18).graph.node) == 18
    with pytest.raises(ModelTooLarge, match="has 18 nodes, over the limit of 17 \\(--max-nodes\\)"):
        load_model(path, max_nodes=17)
    assert DEFAULT_MAX_MODEL_NODES >= 100_000


def test_inference_is_one_pass_whatever_the_depth(monkeypatch):
    calls = []
    real = infer_module._onnx_inference
    monkeypatch.setattr(infer_module, "_onnx_inference", lambda m: calls.append(1) or real(m))
    model = packed_encoder(EncoderSpec(layers=30, hidden=64, heads=4, ffn=64))
    report = analyze_model(model, shape_bounds(["token_count=24", "batch=4", "seq=8", "batch_plus_1=5"], None))
    assert report.complete and len(report.nodes) == 30 and calls == [1]


def test_four_hundred_layers_in_under_three_seconds(tmp_path):
    path = save(packed_encoder(EncoderSpec(layers=400, hidden=64, heads=4, ffn=64)), tmp_path)
    start = time.perf_counter()
    report = analyze_model(load_model(path), shape_bounds(["token_count=4096", "batch=8", "seq=512",
                                                             "batch_plus_1=9"], None))
    elapsed = time.perf_counter() - start
    assert report.complete and len(report.nodes) == 400
    assert elapsed < 3.0, f"400 layers took {elapsed:.2f} s"


def test_schemas_are_registered_only_during_inference():
    assert not onnx.defs.has("PackedMultiHeadAttention", "com.microsoft")
    with infer_module.contrib_schemas():
        assert onnx.defs.has("PackedMultiHeadAttention", "com.microsoft")
    assert not onnx.defs.has("PackedMultiHeadAttention", "com.microsoft")
