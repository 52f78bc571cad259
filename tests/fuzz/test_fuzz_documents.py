"""Fuzzing the document readers in-process (hypothesis, fixed seeds from tests/conftest.py).

Targets, shapes documents and `--input-shapes` hints, as JSON values with every field drawn from
any JSON type and as raw bytes flipped from valid files. Asserted for every example: nothing but a
WorkspaceError escapes the reader or the specification behind it, and a document that is accepted
holds exactly what was read (a flag given as "false" can never come back true).
"""

from __future__ import annotations

import json

import pytest

from hypothesis import event, given, settings
from hypothesis import strategies as st

from attnws.spec.dispatch import dispatch
from attnws.spec.documents import DocumentError
from attnws.spec.errors import WorkspaceError
from attnws.spec.estimate import estimate_from_hints, runtime_problem
from attnws.spec.hints import parse_input_shapes
from attnws.spec.problem import ELEMENT_SIZES, Op
from attnws.spec.shapes_file import GEOMETRY_KEYS, CONFIG_KEYS, load_shapes_document, read_shapes_document
from attnws.spec.target import TARGET_KEYS, DimRange, load_target, target_from_dict

EXAMPLES = 2500  # per reader; the whole file runs in well under half a minute on two cores

BOOL_KEYS = ("qkv_hidden_sizes", "qkv_bias", "attn_bias", "attn_bias_broadcast_batch", "attn_bias_broadcast_heads",
             "flash_build", "mea_build", "expect_unavailable_estimate")
RECORD_BOOL_KEYS = ("qkv_bias", "attn_bias", "attn_bias_broadcast_batch", "attn_bias_broadcast_heads",
                    "flash_build", "mea_build")
TARGET = {"name": "t", "op": "pmha", "dtype": "fp16", "batch": "1..4", "seq": "1..64", "heads": "2..2",
          "head_size": "16..16", "sm": 80}
RECORD = {"op": "pmha", "dtype": "fp16", "tokens": 6, "batch": 2, "seq": 4, "heads": 2, "head_size": 16,
          "v_head_size": 16, "input_hidden": None, "qkv_hidden_sizes": None, "format": "packed", "qkv_bias": False,
          "attn_bias": False, "attn_bias_broadcast_batch": False, "attn_bias_broadcast_heads": False, "sm": 80,
          "sdpa_kernel": 0, "env": {}, "flash_build": True, "mea_build": True, "trt_runner": "auto"}

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.integers(-3, 600)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["false", "true", "0", "1", "fp32", "pa", "separate", "1..8", "8..1", "1_0", "-1..3",
                              "ORT_DISABLE_FLASH_ATTENTION", "\ud800", "unknown", "available"]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6) | st.sampled_from(sorted(TARGET_KEYS)), inner,
                                             max_size=4), max_leaves=10)
# Values close to valid ones, so that accepted documents are common enough to check.
good_values = {
    "op": st.sampled_from(["pa", "pmha"]), "dtype": st.sampled_from(list(ELEMENT_SIZES)),
    "format": st.sampled_from(["packed", "separate"]), "trt_runner": st.sampled_from(["auto", "unknown"]),
    "sm": st.sampled_from([75, 80, 90]), "sdpa_kernel": st.sampled_from([0, 1, 2, 4, 16]),
    "env": st.sampled_from([{}, {"ORT_DISABLE_FLASH_ATTENTION": "1"}, {"ORT_DISABLE_FLASH_ATTENTION": "false"}]),
    **{key: st.booleans() for key in BOOL_KEYS},
    **{key: st.sampled_from([2, 8, "1..4", [1, 8], "16..16"]) for key in ("batch", "seq", "heads", "head_size")},
}


def field_values(key: str) -> st.SearchStrategy:
    return st.one_of(json_values, good_values[key]) if key in good_values else json_values


@st.composite
def documents_like(draw, base: dict, keys) -> dict:
    """Return `base` with some fields replaced by any JSON value, some removed, maybe one unknown."""
    doc = dict(base)
    for key in draw(st.lists(st.sampled_from(sorted(keys)), max_size=4, unique=True)):
        if draw(st.integers(0, 5)) == 0:
            doc.pop(key, None)
        else:
            doc[key] = draw(field_values(key))
    if draw(st.integers(0, 9)) == 0:
        doc[draw(st.text(max_size=10))] = draw(json_values)
    return doc


def _dims_read_as_given(data: dict, target) -> None:
    for key in ("batch", "seq", "heads", "head_size", "v_head_size", "tokens", "input_hidden"):
        if data.get(key) is not None:
            assert getattr(target, key) == DimRange.parse(data[key], key)


@settings(max_examples=EXAMPLES)
@given(documents_like(TARGET, TARGET_KEYS | {"bogus"}))
def test_target_documents(data):
    try:
        target = target_from_dict(data)
    except WorkspaceError as error:
        event(f"rejected: {type(error).__name__}")
        return
    event("accepted")
    for key in BOOL_KEYS:  # no coercion: an accepted flag is a JSON boolean, read as given
        if key in data:
            assert isinstance(data[key], bool) and data[key] is target.as_dict().get(key, False)
    assert isinstance(data.get("env", {}) or {}, dict)
    assert all(isinstance(v, str) for v in (data.get("env") or {}).values())
    for key in ("sm", "sdpa_kernel"):
        if key in data:
            assert type(data[key]) is int and target.as_dict()[key] == data[key]
    assert target.element_size == ELEMENT_SIZES[data.get("dtype", "fp16")]
    _dims_read_as_given(data, target)
    assert target_from_dict(target.as_dict()) == target


@settings(max_examples=EXAMPLES)
@given(st.lists(documents_like(RECORD, set(GEOMETRY_KEYS + CONFIG_KEYS) | {"label", "atn_bias"}), min_size=1,
                max_size=2),
       st.booleans())
def test_shapes_documents(records, wrapped):
    document = {"shapes": records} if wrapped else records
    try:
        read = read_shapes_document(document)
    except WorkspaceError as error:
        event(f"rejected: {type(error).__name__}")
        return
    event("accepted")
    for record, (geometry, config, labels) in zip(records, read):
        for key in RECORD_BOOL_KEYS:
            if key in record:
                assert isinstance(record[key], bool)
        for key in ("batch", "seq", "heads", "head_size"):
            assert type(record[key]) is int and getattr(geometry, key) == record[key]
        assert geometry.attn_bias is record.get("attn_bias", False)
        assert config.build.flash is record.get("flash_build", True)
        try:  # what a shapes document feeds: the concrete specification, which raises only its own errors
            dispatch(runtime_problem(geometry), config)
        except WorkspaceError:
            pass


@st.composite
def near_valid_hints(draw) -> str:
    """Return ORT's hints for a valid PA or PMHA node with a few dimensions replaced."""
    hints = draw(st.sampled_from([
        [[6, 6], [6, 24], [24], [2, 4], [3], None],  # PA, num_heads 2
        [[6, 2, 3, 4], None, None, None, [2, 4], [3], [2, 2, 4, 4]],  # PMHA packed, num_heads 2
    ]))
    hints = [list(h) if isinstance(h, list) else h for h in hints]
    for _ in range(draw(st.integers(0, 3))):
        row = draw(st.integers(0, len(hints) - 1))
        if not isinstance(hints[row], list) or not hints[row] or draw(st.integers(0, 4)) == 0:
            hints[row] = draw(st.one_of(st.none(), st.just("no_shape"), st.lists(st.integers(-1, 70), max_size=4)))
        else:
            hints[row][draw(st.integers(0, len(hints[row]) - 1))] = draw(st.integers(-1, 2**33))
    return json.dumps(hints)


@settings(max_examples=EXAMPLES)
@given(st.one_of(near_valid_hints(), json_values.map(lambda v: json.dumps(v, allow_nan=True)),
                 st.lists(st.one_of(st.none(), st.just("no_shape"),
                                    st.lists(st.integers(-3, 2**40) | st.booleans(), max_size=5)), max_size=8)
                 .map(json.dumps),
                 st.text(max_size=40)),
       st.sampled_from(list(Op)), st.sampled_from([2, 2, 2, -1, 0, 3, 2**31]))
def test_input_shapes(text, op, heads):
    try:
        hints = parse_input_shapes(text)
    except DocumentError:
        event("rejected")
        return
    try:
        event(f"estimate ok: {estimate_from_hints(op, 2, heads, hints).ok}")
    except WorkspaceError as error:
        event(f"estimate raised {type(error).__name__}")


def _flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for position, value in flips:
        if out:
            out[position % len(out)] = value
    return bytes(out)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-documents")


@settings(max_examples=EXAMPLES)
@given(st.sampled_from([json.dumps(TARGET).encode(), json.dumps({**TARGET, "env": {"ORT_DISABLE_FLASH_ATTENTION": "1"},
                                                                 "v_head_size": [16, 16]}).encode()]),
       st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, 2))
def test_target_files_with_flipped_bytes(scratch, data, flips, cut):
    mutated = _flip(data, flips)[: len(data) - cut]
    path = scratch / "t.json"
    path.write_bytes(mutated)
    try:
        load_target(path)
        event("accepted")
    except WorkspaceError as error:
        event(f"rejected: {type(error).__name__}")
    path.write_bytes(json.dumps({"shapes": [RECORD]}).encode()[: len(mutated)] + mutated)
    try:
        read_shapes_document(load_shapes_document(path))
    except WorkspaceError:
        pass
