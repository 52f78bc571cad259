"""Fuzzing model files in-process (hypothesis, fixed seeds from tests/conftest.py).

Generated models with bytes flipped or cut, and models whose external data points anywhere (a
trailing '/' included), from the main graph, a subgraph, a sparse tensor, an attribute or a
model-local function, through symbolic links laid out in a temporary folder, some leading outside
it to a secret file. Asserted for every example: only a WorkspaceError escapes `load_model` and
`analyze_model`; attnws's file layer (`spec.documents`, patched) opens, stats and follows nothing
outside the model's folder; no message reveals the secret file's size; and an accepted model's
every reference, opened as written, really is a regular file inside the folder that holds the
bytes it claims.

Models with model-local functions (calls nested, recursive, inside `If` branches, unused; num_heads
fixed, passed by ref_attr_name, defaulted or missing; MultiHeadAttention with mixed element types)
are held against ONNX Runtime 1.31.1's own inlining (CPU): whenever ORT loads one, attnws reports
exactly the attention nodes ORT keeps, with the same num_heads (a ref_attr_name outside a function
body aside: ONNX's IR forbids it and attnws refuses it, where ORT reads the attribute's value
fields); a function attnws refuses as recursive ORT refuses too.

Packed encoders whose dimensions are each static or symbolic, with some of them given (now and
then inconsistently): the dimensions attnws derives hold at every sized node (B + 1, T = B * S as
T's maximum), only a given value the model contradicts is a usage error, and giving the derived
values as well changes no estimate.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import onnx
import pytest
from hypothesis import event, given, settings
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st
from onnx import TensorProto

from attnws.model import ShapeBounds, analyze_model, load_model
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.model.graph import model_tensors
from attnws.spec import documents
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.problem import Op

from ..model.builders import (
    FP16,
    FP32,
    W_BYTES,
    call,
    constant_model,
    external,
    functions_model,
    heads_attribute,
    if_model,
    initializer_model,
    local_function,
    mha_node,
    node_model,
    ort_attention_nodes,
    pmha_separate_inputs,
    sparse_model,
)

EXAMPLES = 2000  # per suite
SECRET_SIZE = 7919  # the size of the file outside the folder: never in a message
BOUNDS = {"token_count": 24, "batch": 4, "seq": 8, "batch_plus_1": 5}

BASES = {
    "pmha-node": node_model("PackedMultiHeadAttention", pmha_separate_inputs(), num_heads=4).SerializeToString(),
    "encoder": packed_encoder(EncoderSpec(layers=1, hidden=32, heads=2, ffn=32)).SerializeToString(),
    "external-everywhere": if_model(external(tensor_name="v")).SerializeToString(),
    "sparse-external": sparse_model(external()).SerializeToString(),
    "functions": functions_model([call("Layer", ["x"], ["y1"], "layer0", heads=4),
                                  call("Layer", ["y1"], ["y"], "layer1", heads=2)],
                                 [local_function("Layer", [mha_node()]),
                                  local_function("Unused", [mha_node(heads=2)])]).SerializeToString(),
}


def function_constant_model(tensor):
    """Return a model whose one model-local function holds a Constant node with value `tensor`."""
    body = [onnx.helper.make_node("Constant", [], ["c"], value=tensor), onnx.helper.make_node("Identity", ["c"], ["y"])]
    return functions_model([call("Const", [], ["y"], "const")], [local_function("Const", body, inputs=(),
                                                                                 attributes=())], elem=FP16)


PLACES = {"initializer": initializer_model, "subgraph": if_model, "sparse": sparse_model, "attribute": constant_model,
          "function": function_constant_model}


class Recorder:
    """Stands in for `os` inside spec.documents: records every path opened, stat-ed or followed."""

    CALLS = ("open", "stat", "lstat", "readlink", "access")

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name not in self.CALLS:
            return real

        def call(path, *args, **kwargs):
            self.paths.append(os.path.abspath(path))
            return real(path, *args, **kwargs)
        return call


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-models")
    (root / "outside").mkdir()
    (root / "outside" / "secret.bin").write_bytes(b"s" * SECRET_SIZE)
    return root


def fresh_folder(root: Path) -> Path:
    folder = root / "model"
    if folder.exists() or folder.is_symlink():
        shutil.rmtree(folder)
    folder.mkdir()
    (folder / "w.bin").write_bytes(b"w" * W_BYTES)
    (folder / "sub").mkdir()
    return folder


def note(message: str) -> None:
    if currently_in_test_context():
        event(message)


def bounds_for(model: onnx.ModelProto) -> ShapeBounds:
    """Return the encoder's bounds for the symbols the (possibly mutated) model's inputs name."""
    symbols = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim}
    return ShapeBounds({name: value for name, value in BOUNDS.items() if name in symbols})


def load_and_analyze(path: str, folder: Path) -> tuple[onnx.ModelProto | None, str]:
    """Return (model or None, error message), asserting that only WorkspaceErrors escape and that
    nothing outside the folder was touched."""
    recorder = Recorder()
    model, message = None, ""
    with mock.patch.object(documents, "os", recorder):
        try:
            model = load_model(path)
            note("loaded")
            analyze_model(model, bounds_for(model))
            note("analyzed")
        except WorkspaceError as error:
            note(f"rejected: {type(error).__name__}")
            message = str(error)
    real_folder = os.path.realpath(folder)
    for seen in recorder.paths:
        assert os.path.commonpath([seen, str(folder)]) == str(folder) or \
            os.path.commonpath([seen, real_folder]) == real_folder, f"attnws examined {seen}, outside {folder}"
    return model, message


@settings(max_examples=EXAMPLES)
@given(st.sampled_from(sorted(BASES)), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
       st.integers(0, 3), st.booleans())
def test_models_with_flipped_bytes(sandbox, base, flips, cut, insert):
    data = bytearray(BASES[base])
    for position, value in flips:
        if insert:
            data.insert(position % (len(data) + 1), value)
        else:
            data[position % len(data)] = value
    folder = fresh_folder(sandbox)
    path = folder / "model.onnx"
    path.write_bytes(bytes(data[: len(data) - cut]))
    _, message = load_and_analyze(str(path), folder)
    assert str(SECRET_SIZE) not in message


LINK_NAMES = ("link.bin", "alias", "loop", "sub/up", "sub/w.bin", "other")
LINK_TARGETS = ("OUTSIDE/secret.bin", "../outside/secret.bin", "w.bin", ".", "..", "loop", "/", "/etc/shadow",
                "sub", "FOLDER/w.bin", "../model/w.bin", "sub/../../outside/secret.bin", "up/w.bin", "alias/w.bin",
                "../w.bin", "FOLDER", "fifo")
LOCATIONS = st.one_of(
    st.sampled_from(["w.bin", "link.bin", "sub/w.bin", "./w.bin", "sub/up/w.bin", "alias/w.bin", "alias/link.bin",
                     "../outside/secret.bin", "/etc/passwd", "", "w.bin\0", "sub", "loop", "x" * 300, "//w.bin",
                     "link.bin/..", "other", "fifo", "sub/up/up/outside/secret.bin", "w.bin/", "w.bin/.",
                     "link.bin/", "alias/w.bin/", "sub/", "./"]),
    st.text(alphabet="./abinlkw\\~", max_size=14),
)
COUNTS = st.one_of(st.none(), st.sampled_from(["0", "-1", "8", "4", "abc", "", "1" * 25, str(SECRET_SIZE), " 8"]),
                   st.integers(-10, 10**4).map(str))


INSIDE_TARGETS = ("w.bin", ".", "FOLDER/w.bin", "sub", "up/w.bin", "alias/w.bin", "FOLDER", "..")


@st.composite
def external_cases(draw):
    """Return (place, location, entries, links, dims, data type): half the time near a sound
    reference (links that stay inside, true sizes), else anything."""
    sound = draw(st.booleans())
    if sound:
        links = [("link.bin", "w.bin"), ("alias", "."), ("sub/up", "..")]
        links += draw(st.lists(st.tuples(st.sampled_from(["other", "sub/w.bin"]), st.sampled_from(INSIDE_TARGETS)),
                               max_size=2, unique_by=lambda pair: pair[0]))
        location = draw(st.sampled_from(["w.bin", "./w.bin", "link.bin", "alias/w.bin", "sub/up/w.bin",
                                         "alias/link.bin", "sub/up/alias/link.bin", "other", "sub/w.bin"]))
        entries = draw(st.dictionaries(st.sampled_from(["offset", "length"]), st.just("")))
        entries = {key: "0" if key == "offset" else str(W_BYTES) for key in entries}
        dims, data_type = draw(st.sampled_from([((4,), FP16), ((8,), TensorProto.UINT8), ((2, 2), FP16),
                                                ((16,), TensorProto.INT4)]))
    else:
        links = draw(st.lists(st.tuples(st.sampled_from(LINK_NAMES), st.sampled_from(LINK_TARGETS)), max_size=3,
                              unique_by=lambda pair: pair[0]))
        location = draw(LOCATIONS)
        entries = {key: value for key in ("offset", "length") if (value := draw(COUNTS)) is not None}
        dims = draw(st.sampled_from([(4,), (SECRET_SIZE,), (0,), (2, 2), (-4,), (2**40,)]))
        data_type = draw(st.sampled_from([FP16, FP16, TensorProto.UINT8, TensorProto.STRING, TensorProto.INT4, 999]))
    if draw(st.integers(0, 9)) == 0:
        entries[draw(st.sampled_from(["checksum", "bogus", "prepacked_1"]))] = draw(st.sampled_from(["", "x", "1"]))
    return draw(st.sampled_from(sorted(PLACES))), location, entries, links, dims, data_type


def _claims(location: str, entries: dict, dims: tuple) -> str:
    return " ".join([location, *entries.values(), *map(str, dims)])


@settings(max_examples=EXAMPLES)
@given(external_cases())
def test_external_references(sandbox, case):
    place, location, entries, links, dims, data_type = case
    folder = fresh_folder(sandbox)
    os.mkfifo(folder / "fifo")
    for name, target in links:
        target = target.replace("OUTSIDE", str(sandbox / "outside")).replace("FOLDER", str(folder))
        (folder / name).symlink_to(target)
    tensor = external(location=location, dims=dims, data_type=data_type, **entries)
    path = folder / "model.onnx"
    path.write_bytes(PLACES[place](tensor).SerializeToString())
    model, message = load_and_analyze(str(path), folder)
    if str(SECRET_SIZE) not in _claims(location, entries, dims):
        assert str(SECRET_SIZE) not in message, message
    if model is None:
        return
    real_folder = os.path.realpath(folder)
    for stored, _ in model_tensors(model):  # accepted: every reference is sound, checked independently
        if stored.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in stored.external_data}
        real = os.path.realpath(folder / info["location"])
        assert os.path.commonpath([real, real_folder]) == real_folder, f"accepted {info} -> {real}"
        if not os.path.lexists(real):
            continue  # no weights file: read without it, as a model copied without its weights is
        assert os.path.isfile(os.path.join(folder, info["location"])), f"ORT cannot open {info['location']!r}"
        assert int(info.get("offset", "0")) + int(info.get("length", W_BYTES)) <= os.path.getsize(real)


@pytest.mark.parametrize("base", sorted(BASES))
def test_model_paths_that_are_links(sandbox, base):
    """A model file behind a link is read (the user named it), and its external data is looked up
    in the folder the link sits in, never beside the file it points to."""
    folder = fresh_folder(sandbox)
    real = sandbox / "outside" / f"{base}.onnx"
    real.write_bytes(BASES[base])
    (folder / "model.onnx").symlink_to(real)
    load_and_analyze(str(folder / "model.onnx"), folder)
    (sandbox / "outside" / "w.bin").write_bytes(b"w" * W_BYTES)
    (folder / "w.bin").unlink()
    (sandbox / "outside" / "w.bin").write_bytes(b"w")  # too short: read, it would be refused
    model, message = load_and_analyze(str(folder / "model.onnx"), folder)
    assert model is not None, message  # the folder has no w.bin: read without it, never the one outside


# -- model-local functions against ONNX Runtime's own inlining --------------------------------------

FUNCTION_NAMES = ("A", "B", "C")
HEADS = st.sampled_from([None, "ref", 1, 2, 3, 4, 4])  # None: no num_heads; "ref": the function's `heads`
MAIN_HEADS = st.sampled_from([None, 1, 2, 3, 4, 4, 4, 2, 2, "ref"])  # a ref_attr_name in the main graph: rarely


def _heads(spec) -> dict:
    return {} if spec is None or spec == "ref" else {"heads": spec}


def _call_node(name: str, inputs: list[str], output: str, label: str, spec) -> onnx.NodeProto:
    node = call(name, inputs, [output], label, **_heads(spec))
    if spec == "ref":
        node.attribute.append(heads_attribute("heads", "heads"))  # pass the caller's own `heads` on
    return node


@st.composite
def body_nodes(draw, label: str, callees: tuple[str, ...], defined: tuple[str, ...]) -> list[onnx.NodeProto]:
    """Nodes from x to y: MultiHeadAttention (num_heads fixed, by ref_attr_name or none; key and
    value sometimes float16 beside a float query), calls of `callees` (now and then of any defined
    function, which may recurse), some in an If branch, Identity."""
    nodes, current = [], "x"
    heads_strategy = MAIN_HEADS if label == "m" else HEADS
    for j in range(draw(st.integers(0, 3))):
        out = f"{label}{j}"
        kind = draw(st.sampled_from(["mha", "mha", "call", "call", "if", "mixed"]))
        heads = draw(heads_strategy)
        if kind in ("call", "if"):
            any_function = not callees or draw(st.integers(0, 5)) == 0
            callee = draw(st.sampled_from(defined if any_function else callees))
        if kind in ("mha", "mixed"):
            key = current
            if kind == "mixed":
                key = f"{out}_half"
                nodes.append(onnx.helper.make_node("Cast", [current], [key], to=FP16))
            node = mha_node([current, key, key], out, f"attn{j}", None if heads == "ref" else heads)
            if heads is None:
                del node.attribute[:]
            nodes.append(node)
        elif kind == "call":
            nodes.append(_call_node(callee, [current], out, f"call{j}", heads))
        else:
            then = onnx.helper.make_graph([_call_node(callee, [current], f"{out}_then", "inner", heads)], "then", [],
                                          [onnx.helper.make_tensor_value_info(f"{out}_then", FP32, None)])
            other = onnx.helper.make_graph([onnx.helper.make_node("Identity", [current], [f"{out}_else"])], "else", [],
                                           [onnx.helper.make_tensor_value_info(f"{out}_else", FP32, None)])
            nodes += [onnx.helper.make_node("Constant", [], [f"{out}_c"], value=onnx.helper.make_tensor(
                          f"{out}_v", onnx.TensorProto.BOOL, [], [True])),
                      onnx.helper.make_node("If", [f"{out}_c"], [out], name=f"gate{j}", then_branch=then,
                                            else_branch=other)]
        current = out
    return [*nodes, onnx.helper.make_node("Identity", [current], ["y"])]


@st.composite
def function_models(draw) -> onnx.ModelProto:
    """A main graph and one to three functions; each calls the functions after it (sometimes any)."""
    defined = FUNCTION_NAMES[:draw(st.integers(1, len(FUNCTION_NAMES)))]
    functions = []
    for i, name in enumerate(defined):
        default = draw(st.sampled_from([None, None, 2, 4]))
        functions.append(local_function(name, draw(body_nodes(name.lower(), defined[i + 1:], defined)),
                                        attributes=() if default else ("heads",),
                                        defaults=[onnx.helper.make_attribute("heads", default)] if default else ()))
    return functions_model(draw(body_nodes("m", defined, defined)), functions)


def _num_heads(node: onnx.NodeProto) -> int | None:
    return next((a.i for a in node.attribute if a.name == "num_heads"), None)


@settings(max_examples=400)
@given(function_models())
def test_functions_report_every_attention_node_onnx_runtime_runs(tmp_path_factory, model):
    folder = tmp_path_factory.mktemp("functions", numbered=True)
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    report, message = None, ""
    try:
        report = analyze_model(load_model(str(path)), ShapeBounds())
        note(f"reported {len(report.nodes)} node(s)")
    except WorkspaceError as error:
        message = str(error)
        note(f"rejected: {message.split(':')[-1][:40]}")
    try:
        kept = ort_attention_nodes(model, folder)
    except Exception:  # noqa: BLE001 - ORT refuses the model: nothing to compare
        kept = None
    if "calls itself" in message:
        assert kept is None, "ONNX Runtime ran a recursive function attnws refused"
    if kept is None or "which only a function body may do" in message:
        return  # ONNX's IR allows ref_attr_name only in a function body; ORT reads the value fields instead
    assert report is not None, f"ONNX Runtime runs a model attnws refuses: {message}"
    assert len(report.nodes) == len(kept)
    assert sorted(n.attributes.get("num_heads", 0) for n in report.nodes) == sorted(_num_heads(n) or 0 for n in kept)


# -- dimensions derived from the model ---------------------------------------------------------------

PACKED_SYMBOLS = ("token_count", "batch", "seq", "batch_plus_1")


@st.composite
def packed_cases(draw):
    """A one-layer packed encoder whose four dimensions are each symbolic or static, and bounds
    for some of the symbolic ones: mostly consistent (B + 1, T <= B * S), sometimes not."""
    spec = draw(st.sampled_from([EncoderSpec(layers=1, hidden=32, heads=2, ffn=32),
                                 EncoderSpec(layers=1, hidden=32, heads=2, ffn=32, op=Op.PA)]))
    b, s = draw(st.integers(1, 6)), draw(st.integers(1, 9))
    values = {"batch": b, "seq": s, "batch_plus_1": b + 1, "token_count": draw(st.integers(1, b * s))}
    if draw(st.integers(0, 4)) == 0:  # an inconsistent value
        name = draw(st.sampled_from(PACKED_SYMBOLS))
        values[name] = draw(st.integers(1, 60))
    static = {name for name in PACKED_SYMBOLS if draw(st.integers(0, 3)) == 0}
    given = {name: values[name] for name in PACKED_SYMBOLS if name not in static and draw(st.booleans())}
    model = packed_encoder(spec)
    for info in model.graph.input:
        for dim in info.type.tensor_type.shape.dim:
            if dim.dim_param in static:
                dim.dim_value = values[dim.dim_param]
    for info in model.graph.output:
        for dim in info.type.tensor_type.shape.dim:
            if dim.dim_param in static:
                dim.dim_value = values[dim.dim_param]
    return model, given


@settings(max_examples=400)
@given(packed_cases())
def test_derived_dimensions_hold_and_change_nothing_when_given(case):
    """Whatever is static and whatever given: only a usage error for a given value the model
    contradicts, or a report whose derived equalities hold at every sized node, whose derived T is
    B * S, that asks only for symbols nobody gave, and whose estimates stay the same when every
    derived value is given as well."""
    model, given = case
    try:
        report = analyze_model(model, ShapeBounds(given))
    except UsageError as error:
        note("contradiction")
        assert "contradicts the model" in str(error) or "exceeds" in str(error)
        return
    derived = {d.name: d for d in report.derived}
    assert not set(derived) & set(given) and not {m.name for m in report.missing} & (set(given) | set(derived))
    for node in report.sized:
        p = node.estimate.problem
        assert p.token_count <= p.batch_size * p.sequence_length
        if "token_count" in derived:
            assert derived["token_count"].relation == "maximum"
            assert p.token_count == derived["token_count"].value == p.batch_size * p.sequence_length
        if "batch_plus_1" in derived:
            assert derived["batch_plus_1"].value == p.batch_size + 1
    note(f"derived {sorted(derived)}, missing {sorted(m.name for m in report.missing)}, sized {len(report.sized)}")
    if derived:
        again = analyze_model(model, ShapeBounds({**given, **{d.name: d.value for d in derived.values()}}))
        assert [n.estimate for n in again.nodes] == [n.estimate for n in report.nodes] and again.derived == ()
