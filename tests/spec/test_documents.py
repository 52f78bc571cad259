"""Hostile files and documents: every reader refuses them at once with a DocumentError naming the file
and the field, never a raw TypeError / ValueError / OSError / RecursionError / UnicodeDecodeError."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading

import pytest

from attnws.spec import documents
from attnws.spec.documents import (
    MAX_JSON_DEPTH,
    MAX_JSON_INT_DIGITS,
    DocumentError,
    DocumentTooLarge,
    parse_json_text,
    read_user_bytes,
    read_user_json,
    read_user_text,
)
from attnws.spec.errors import InvalidArgument
from attnws.spec.hints import MISSING, NO_SHAPE, parse_input_shapes
from attnws.spec.shapes_file import load_shapes_document, read_shape_record, read_shapes_document
from attnws.spec.target import DimRange, load_target, target_from_dict

TARGET = {"op": "pmha", "batch": "1..4", "seq": "1..8", "heads": "2..2", "head_size": "16..16"}
RECORD = {"op": "pmha", "dtype": "fp16", "tokens": 6, "batch": 2, "seq": 4, "heads": 2, "head_size": 16,
          "v_head_size": 16, "input_hidden": None, "qkv_hidden_sizes": None, "format": "packed"}


def returns_within(seconds, call):
    """Run call() in a thread; return its outcome (value or exception), failing if it blocks."""
    box = {}

    def target():
        try:
            box["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the reader blocked for more than {seconds} s"
    return box.get("error", box.get("value"))


# -- what may be opened --------------------------------------------------------------------------

def test_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    error = returns_within(5, lambda: read_user_bytes(fifo, "model"))
    assert isinstance(error, DocumentError) and "is a FIFO, not a regular file" in str(error)


def test_symlink_to_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link.json").symlink_to(tmp_path / "fifo")
    error = returns_within(5, lambda: load_target(tmp_path / "link.json"))
    assert isinstance(error, DocumentError) and "FIFO" in str(error)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused_without_reading(device):
    if not os.path.exists(device):
        pytest.skip(f"{device} is absent")
    error = returns_within(5, lambda: read_user_bytes(device, "model", 2**40))
    assert isinstance(error, DocumentError) and "is a character device, not a regular file" in str(error)


def test_directory_and_socket_are_refused(tmp_path):
    with pytest.raises(DocumentError, match="is a directory"):
        load_target(tmp_path)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(DocumentError, match="is a socket"):
            read_user_text(tmp_path / "sock", "shapes document")
    finally:
        server.close()


@pytest.mark.parametrize("path,message", [
    ("absent.json", "no such file"),
    ("a" * 300, "File name too long"),
    ("bad\0name", "embedded null"),
    ("dir/inner.json", "no such file"),
], ids=["missing", "300-characters", "nul-byte", "missing-directory"])
def test_unreadable_paths(path, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DocumentError, match=message) as caught:
        load_target(path)
    assert len(str(caught.value)) < 400  # a long path is shortened in the message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_permissions(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TARGET))
    path.chmod(0)
    with pytest.raises(DocumentError, match="Permission denied"):
        load_target(path)


# -- size limits, enforced while reading ---------------------------------------------------------

def test_size_limit_from_the_file_and_while_reading(tmp_path):
    path = tmp_path / "doc.json"
    path.write_bytes(b"[" + b" " * 98 + b"]")
    assert read_user_bytes(path, "doc", 100) == path.read_bytes()
    with pytest.raises(DocumentTooLarge, match=r"'.*doc.json' is 100 bytes, over the limit of 99 bytes \(--max-bytes\)"):
        read_user_bytes(path, "doc", 99, " (--max-bytes)")


def test_a_file_whose_stat_size_is_zero_stops_at_the_limit():
    proc = "/proc/self/status"  # a regular file whose stat size is 0
    if not os.path.exists(proc) or os.stat(proc).st_size != 0:
        pytest.skip("no /proc file with a zero stat size")
    with pytest.raises(DocumentTooLarge, match="is over the limit of 10 bytes"):
        read_user_bytes(proc, "doc", 10)


def test_standard_input_is_read_with_the_same_limit(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(TARGET).encode())))
    assert load_target("-").batch == DimRange(1, 4)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * 50)))
    with pytest.raises(DocumentTooLarge, match="on standard input is over the limit of 10 bytes"):
        read_user_bytes("-", "shapes document", 10)


def test_negative_limit_is_invalid(tmp_path):
    with pytest.raises(InvalidArgument, match="max_bytes"):
        read_user_bytes(tmp_path, "doc", -1)


# -- text and JSON ----------------------------------------------------------------------------

def write(tmp_path, data: bytes | str, name="doc.json"):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_non_utf8_is_refused(tmp_path):
    with pytest.raises(DocumentError, match=r"is not UTF-8 text: byte 1 is b'\\xff'"):
        load_target(write(tmp_path, b"{\xff}"))


def test_byte_order_mark_is_dropped(tmp_path):
    assert load_target(write(tmp_path, "\ufeff" + json.dumps(TARGET))).seq == DimRange(1, 8)


@pytest.mark.parametrize("text,message", [
    ("[" * 2000 + "]" * 2000, f"nests deeper than {MAX_JSON_DEPTH} levels"),
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), f"nests deeper than {MAX_JSON_DEPTH} levels"),
    ('{"batch": ' + "9" * 4301 + "}", "an integer of 4301 digits"),
    ('{"batch": -' + "9" * (MAX_JSON_INT_DIGITS + 1) + "}", f"an integer of {MAX_JSON_INT_DIGITS + 1} digits"),
    ('{"batch": NaN}', "holds NaN, which is not JSON"),
    ('{"batch": -Infinity}', "holds -Infinity, which is not JSON"),
    ('{"attn_bias": true, "attn_bias": false}', 'gives key "attn_bias" twice'),
    ('{"name": "\\ud800"}', "lone surrogate"),
    ("", "is not JSON: Expecting value at line 1 column 1"),
    ("{'op': 'pa'}", "is not JSON"),
], ids=["depth-2000", "depth-limit+1", "int-4301-digits", "int-limit+1", "nan", "infinity", "duplicate-key",
        "lone-surrogate", "empty", "python-dict"])
def test_hostile_json(text, message, tmp_path):
    with pytest.raises(DocumentError, match=message):
        read_user_json(write(tmp_path, text), "doc")


def test_json_at_the_limits_is_read():
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json_text(nested, "doc") is not None
    assert parse_json_text("9" * MAX_JSON_INT_DIGITS, "doc") == int("9" * MAX_JSON_INT_DIGITS)
    assert parse_json_text('["[[[[", "]]]"]', "doc") == ["[[[[", "]]]"]  # brackets in strings do not nest
    assert parse_json_text('"\\"[[["', "doc") == '"[[['


# -- target fields: types named, never coerced ------------------------------------------------------

@pytest.mark.parametrize("field,value,message", [
    ("attn_bias", "false", 'field attn_bias = "false" is a string; expected a JSON boolean (true or false)'),
    ("qkv_bias", 1, "field qkv_bias = 1 is an integer; expected a JSON boolean"),
    ("flash_build", "false", "field flash_build = \"false\" is a string; expected a JSON boolean"),
    ("mea_build", None, "field mea_build = null is null; expected a JSON boolean"),
    ("qkv_hidden_sizes", "abc", 'field qkv_hidden_sizes = "abc" is a string; expected a JSON boolean'),
    ("expect_unavailable_estimate", 1, "expected a JSON boolean"),
    ("env", "x", 'field env = "x" is a string; expected an object of string values'),
    ("env", 5, "field env = 5 is an integer; expected an object of string values"),
    ("env", {"ORT_DISABLE_FLASH_ATTENTION": 1}, "field env.ORT_DISABLE_FLASH_ATTENTION = 1 is an integer; expected a string"),
    ("dtype", [], "field dtype = [] is a list; expected one of the strings ['fp16', 'fp32', 'bf16']"),
    ("dtype", "int8", "field dtype = \"int8\"; expected one of the strings ['fp16', 'fp32', 'bf16']"),
    ("op", 5, "field op = 5 is an integer; expected one of the strings ['pa', 'pmha', 'mha', 'gqa', 'paged']"),
    ("format", True, "field format = true is a boolean; expected one of the strings"),
    ("trt_runner", 0, "field trt_runner = 0 is an integer; expected one of the strings"),
    ("sm", "80", 'field sm = "80" is a string; expected an integer'),
    ("sdpa_kernel", 1.0, "field sdpa_kernel = 1.0 is a number; expected an integer"),
    ("name", 5, "field name = 5 is an integer; expected a string"),
    ("description", ["x"], "field description = [\"x\"] is a list; expected a string"),
    ("batch", 3.5, "field batch = 3.5: expected N, LO..HI or N..N (an integer"),
    ("batch", True, "field batch = true: expected N, LO..HI or N..N"),
    ("batch", [1, "2"], 'field batch = [1, "2"]: expected'),
    ("batch", [True, 4], "field batch = [true, 4]: expected"),
    ("batch", [1, 2, 3], "field batch = [1, 2, 3]: expected"),
    ("batch", {"lo": 1}, 'field batch = {"lo": 1}: expected'),
    ("batch", "1_000", "field batch = '1_000': expected N, LO..HI or N..N"),
    ("batch", "\u0663", "field batch = '\u0663': expected"),
    ("batch", [5, 3], "range 5..3 must satisfy 0 <= lo <= hi"),
    ("batch", -3, "range -3..-3 must satisfy"),
    ("seq", None, "field seq is required"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_target_field_of_the_wrong_type(field, value, message, tmp_path):
    path = write(tmp_path, json.dumps({**TARGET, field: value}), "t.json")
    with pytest.raises(DocumentError) as caught:
        load_target(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith("target file '")


def test_bf16_is_group_query_attention_s_alone(tmp_path):
    """bf16 is an element type only GroupQueryAttention runs here: another operator's target naming
    it is refused by name, never read as fp16."""
    with pytest.raises(InvalidArgument, match=r"bf16: GroupQueryAttention \(op gqa\) and PagedAttention \(op paged\) only"):
        load_target(write(tmp_path, json.dumps({**TARGET, "dtype": "bf16"}), "t.json"))


def test_target_document_that_is_not_an_object(tmp_path):
    with pytest.raises(DocumentError, match=r"is a list \(\[1, 2\]\); expected a JSON object"):
        load_target(write(tmp_path, "[1, 2]"))


def test_target_booleans_are_read_as_given():
    assert target_from_dict({**TARGET, "attn_bias": True}).attn_bias is True
    assert target_from_dict({**TARGET, "attn_bias": False}).attn_bias is False
    target = target_from_dict({**TARGET, "env": {"ORT_DISABLE_FLASH_ATTENTION": "1"}, "flash_build": False})
    assert not target.config.build.flash and dict(target.env) == {"ORT_DISABLE_FLASH_ATTENTION": "1"}


@pytest.mark.parametrize("text,expected", [
    ("7", (1, 7)), (" 3 .. 7 ", (3, 7)), ("7..7", (7, 7)), ("0", (0, 0)), (7, (1, 7)), ([2, 9], (2, 9)),
    ((2, 9), (2, 9)),
])
def test_dim_range_forms(text, expected):
    assert DimRange.parse(text, "--seq") == DimRange(*expected)


# -- shapes documents ----------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,message", [
    ("qkv_hidden_sizes", 5, "field qkv_hidden_sizes = 5 is an integer; expected null or a list of 3 integers >= 0"),
    ("qkv_hidden_sizes", [8, 8], "field qkv_hidden_sizes = [8, 8] is a list; expected null or a list of 3"),
    ("qkv_hidden_sizes", "abc", 'field qkv_hidden_sizes = "abc" is a string; expected null or a list of 3'),
    ("qkv_hidden_sizes", [8, 8, -8], "field qkv_hidden_sizes = [8, 8, -8]"),
    ("qkv_hidden_sizes", [8, 8, True], "field qkv_hidden_sizes = [8, 8, true]"),
    ("attn_bias", "false", 'field attn_bias = "false" is a string; expected a JSON boolean'),
    ("env", "x", 'field env = "x" is a string; expected an object of string values'),
    ("env", [], "field env = [] is a list; expected an object"),
    ("batch", "2", 'field batch = "2" is a string; expected an integer'),
    ("batch", None, "field batch = null is null; expected an integer"),
    ("tokens", 6.0, "field tokens = 6.0 is a number; expected an integer or null"),
    ("dtype", [], "field dtype = [] is a list; expected one of the strings"),
    ("atn_bias", True, "unknown key 'atn_bias'; did you mean 'attn_bias'?"),
    ("head_sise", 16, "unknown key 'head_sise'; did you mean 'head_size'?"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_shape_record_field_of_the_wrong_type(field, value, message):
    with pytest.raises(DocumentError) as caught:
        read_shapes_document({"shapes": [RECORD, {**RECORD, field: value}]})
    assert message in str(caught.value) and "shapes document, record 2: " in str(caught.value)


def test_shape_record_required_fields_and_labels():
    with pytest.raises(DocumentError, match="field op is required"):
        read_shape_record({k: v for k, v in RECORD.items() if k != "op"})
    with pytest.raises(DocumentError, match="field heads is required"):
        read_shape_record({k: v for k, v in RECORD.items() if k != "heads"})
    geometry, config, labels = read_shape_record({**RECORD, "label": "x", "pair": [1, {"a": None}], "env": None})
    assert labels == {"label": "x", "pair": [1, {"a": None}]} and geometry.t == 6 and config.device.sm == 80


@pytest.mark.parametrize("document,message", [
    ("x", 'shapes document is a string \\("x"\\); expected'),
    ({"shape": []}, "shapes document is an object"),
    ([5], r"record 1 is an integer \(5\); expected a JSON object"),
    ({"shapes": [[]]}, "record 1 is a list"),
])
def test_shapes_document_structure(document, message):
    with pytest.raises(DocumentError, match=message):
        read_shapes_document(document)


def test_shapes_document_file(tmp_path):
    path = write(tmp_path, json.dumps({"shapes": [RECORD]}))
    assert len(read_shapes_document(load_shapes_document(path))) == 1
    with pytest.raises(DocumentError, match="shapes document '.*doc.json' is not UTF-8"):
        load_shapes_document(write(tmp_path, b"\x80"))


# -- --input-shapes -----------------------------------------------------------------------------

def test_input_shapes_parse():
    assert parse_input_shapes('[[6, 6], null, "no_shape", "?", "missing", [-1, 0]]') == [
        (6, 6), MISSING, NO_SHAPE, NO_SHAPE, MISSING, (-1, 0)]


@pytest.mark.parametrize("text,message", [
    ("[" * 2000 + "]" * 2000, "nests deeper"),
    ("[[" + "9" * 5000 + "]]", "an integer of 5000 digits"),
    ('{"a": 1}', "--input-shapes is an object; expected a JSON list"),
    ("[[6, -2]]", r"hint 0 = \[6, -2\]: expected null, \"no_shape\" or a list of integers \(-1 for an unknown"),
    ("[[true, 6]]", r"hint 0 = \[true, 6\]"),
    ("[{}]", "hint 0 = {}"),
    ("[5]", "hint 0 = 5"),
    ("nope", "--input-shapes is not JSON"),
])
def test_input_shapes_refused(text, message):
    with pytest.raises(DocumentError, match=message):
        parse_input_shapes(text)


def test_document_errors_are_invalid_arguments():
    assert issubclass(DocumentError, InvalidArgument) and issubclass(DocumentTooLarge, DocumentError)
    assert DocumentError.status == "bad_document"


def test_one_opener(tmp_path, monkeypatch):
    """Every reader goes through documents.open_user_file (the fuzz suites patch it)."""
    seen = []
    real = documents.open_user_file
    monkeypatch.setattr(documents, "open_user_file", lambda path, what: seen.append(str(path)) or real(path, what))
    path = write(tmp_path, json.dumps(TARGET), "t.json")
    load_target(path)
    load_shapes_document(write(tmp_path, "[]", "s.json"))
    assert seen == [str(path), str(tmp_path / "s.json")]
