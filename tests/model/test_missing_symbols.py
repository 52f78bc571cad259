"""`missing` (text lines and JSON) names every symbol a node's reasons name as unbound, for every
family, from one reading (`translate.unbound_dims`); a symbol inside a sequence or optional type
reaches an attention node through SequenceAt / OptionalGetElement, is named, and `--dim` binds it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from attnws.model.examples import packed_encoder
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED

from .builders import FP16, MS, OPSETS, run, save

DATA = Path(__file__).parent.parent / "data"
GENAI = DATA / "genai"
BUILDER_MODELS = sorted(p.name for p in GENAI.iterdir() if (p / "model.onnx").is_file())

_REASON = re.compile(r"symbolic dimension '([^']+)' with no bound \(give")
_LINE = re.compile(r"^missing: --dim (.+)=MAX \(", re.MULTILINE)


def named_in_text(text: str) -> set[str]:
    """Return the symbols the text asks a bound for: its `missing:` lines and the nodes' reasons."""
    return set(_REASON.findall(text)) | set(_LINE.findall(text))


def wrapped_model(kind: str) -> onnx.ModelProto:
    """MultiHeadAttention over x, which SequenceAt or OptionalGetElement takes out of a graph input
    whose sequence / optional type holds the only [batch, S, 64] the model declares."""
    if kind == "sequence":
        holder = helper.make_tensor_sequence_value_info("xs", FP16, ["batch", "S", 64])
        nodes = [helper.make_node("SequenceAt", ["xs", "i"], ["x"], name="take")]
        inputs = [holder, helper.make_tensor_value_info("i", TensorProto.INT64, [])]
    else:
        tensor = helper.make_tensor_type_proto(FP16, ["batch", "S", 64])
        holder = helper.make_value_info("xs", helper.make_optional_type_proto(tensor))
        nodes = [helper.make_node("OptionalGetElement", ["xs"], ["x"], name="take")]
        inputs = [holder]
    nodes.append(helper.make_node("MultiHeadAttention", ["x", "x", "x"], ["out"], name="attn", domain=MS,
                                  num_heads=4))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("out", FP16, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


@pytest.mark.parametrize("kind", ["sequence", "optional"])
def test_a_symbol_inside_a_sequence_or_optional_type_is_missing_and_bound_by_dim(kind, tmp_path):
    path = save(wrapped_model(kind), tmp_path)
    unbound = run(path)
    assert unbound.exit_code == EXIT_REJECTED
    assert [m["name"] for m in unbound.json["missing"]] == ["batch", "S"]
    assert named_in_text(unbound.text) == {"batch", "S"}
    bound = run(path, "--dim", "batch=2", "--dim", "S=8")
    assert bound.exit_code == EXIT_OK and bound.json["missing"] == []
    assert bound.json["nodes"][0]["input_shapes"][0] == [2, 8, 64]


def _builder_without_config(name: str, tmp_path: Path) -> str:
    """Return the builder model `name` copied without its genai_config.json: every bound from flags."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(GENAI / name / "model.onnx", folder / "model.onnx")
    return str(folder / "model.onnx")


@pytest.mark.parametrize("name", BUILDER_MODELS)
@pytest.mark.parametrize("dims", [(), ("batch_size=1",), ("batch_size=1", "sequence_length=16")],
                         ids=["nothing", "batch", "batch-and-seq"])
def test_a_builder_model_s_missing_names_what_the_text_names(name, dims, tmp_path):
    """The GroupQueryAttention nodes of every builder graph: four or five symbols, in JSON as in text."""
    result = run(_builder_without_config(name, tmp_path), *(a for d in dims for a in ("--dim", d)))
    missing = [m["name"] for m in result.json["missing"]]
    assert len(missing) == len(set(missing)) and set(missing) == named_in_text(result.text)
    assert {"past_sequence_length", "kv_cache_dim"} <= set(missing)
    assert result.text.count("\nmissing: --dim ") == len(missing)


@pytest.mark.parametrize("model", ["gqa_decoder", "mha_decoder", "mha_encoder_decoder", "packed_encoder"])
def test_every_family_s_missing_names_what_the_text_names(model, tmp_path):
    path = save(packed_encoder(), tmp_path) if model == "packed_encoder" else str(DATA / f"{model}.onnx")
    result = run(path)
    missing = {m["name"] for m in result.json["missing"]}
    assert missing and missing == named_in_text(result.text)
