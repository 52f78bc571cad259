"""A `--dim` no attention node's input shape depends on is a usage error naming it, never accepted
and ignored: a builder graph's total_sequence_length (the attention mask's width, which the graph
turns into the values of GroupQueryAttention's seqlens_k and total_sequence_length inputs), with
and without the genai_config.json beside the model. A bound that matters, or that the model checks
by deriving the symbol, is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import onnx
from onnx import TensorProto, helper

from attnws.model.bounds import ShapeBounds
from attnws.model.examples import packed_encoder
from attnws.model.inert import inert_resolution
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.spec.errors import UsageError

from .builders import MS, OPSETS, run, save

DATA = Path(__file__).parent.parent / "data"
GENAI = DATA / "genai"
BUILDER_MODELS = sorted(p.name for p in GENAI.iterdir() if (p / "model.onnx").is_file())


def _model(name: str, config: bool, tmp_path: Path) -> str:
    """Return the builder model `name` in a folder of its own, with or without its genai_config.json."""
    folder = tmp_path / name
    shutil.copytree(GENAI / name, folder, ignore=None if config else shutil.ignore_patterns("genai_config.json"))
    return str(folder / "model.onnx")


@pytest.mark.parametrize("config", [False, True], ids=["flags-only", "genai-config"])
@pytest.mark.parametrize("name", BUILDER_MODELS)
def test_the_attention_mask_width_is_refused_by_name_with_why(name, config, tmp_path):
    path = _model(name, config, tmp_path)
    without = run(path, "--dim", "batch_size=1")
    assert without.exit_code == (EXIT_OK if config else EXIT_REJECTED)  # sized from the config; else P, H missing
    with pytest.raises(UsageError) as refused:
        run(path, "--dim", "batch_size=1", "--dim", "total_sequence_length=100")
    message = str(refused.value)
    assert message.startswith("--dim total_sequence_length=100 changes nothing: no attention node's input shape "
                              "depends on it, and attnws sizes a node from its input shapes, never from a tensor's "
                              "value; the graph computes from it the value of GroupQueryAttention node "
                              "/model/layers.0/attn/GroupQueryAttention's input 5 (seqlens_k) and input 6 "
                              "(total_sequence_length), and likewise of 1 more node(s); drop it")
    assert message.endswith("its session option, --max-total-seq N")


def test_a_symbol_only_an_output_declares_is_refused_without_a_value_reader():
    """The committed decoder's total_sequence_length is present's declared length only."""
    with pytest.raises(UsageError, match=r"^--dim total_sequence_length=64 changes nothing: no attention node's "
                                         r"input shape depends on it, .*tensor's value; drop it$"):
        run(str(DATA / "gqa_decoder.onnx"), "--dim", "batch_size=2", "--dim", "sequence_length=8",
            "--dim", "past_sequence_length=32", "--dim", "total_sequence_length=64")


def test_a_bound_the_model_derives_is_checked_not_refused(tmp_path):
    """batch_plus_1 reaches the node only through the derivation from batch: given, it is checked."""
    result = run(save(packed_encoder(), tmp_path), "--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=5")
    assert result.exit_code == EXIT_OK


def test_a_bound_a_graph_operator_ties_to_the_node_is_kept():
    """The builder graph's sequence_length reaches GroupQueryAttention only through the MatMul after
    input_ids' embedding: it is the query's S."""
    result = run(str(GENAI / "llama3-8b-fp16" / "model.onnx"), "--dim", "batch_size=1", "--dim", "sequence_length=16")
    assert result.exit_code == EXIT_OK and result.json["nodes"][0]["input_shapes"][0][:2] == [1, 16]


def test_a_symbol_an_override_also_binds_is_not_judged(tmp_path):
    """attention_mask [batch_size, total_sequence_length]: the override binds the mask's width
    anyway, so the --dim beside it is not refused; without the override it is."""
    path = _model("llama3-8b-fp16", False, tmp_path)
    dims = ("--dim", "batch_size=1", "--dim", "total_sequence_length=100")
    overridden = run(path, *dims, "--max-shape-override", "attention_mask:[1,100]")
    assert overridden.exit_code == EXIT_REJECTED  # not refused: sized as far as the flags go (P, H missing)
    with pytest.raises(UsageError, match=r"^--dim total_sequence_length=100 changes nothing"):
        run(path, *dims)


def _no_attention() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    return helper.make_model(graph, opset_imports=OPSETS)


def test_a_model_without_attention_nodes_refuses_no_bound(tmp_path):
    """Every bound changes no attention node's input shape where there is none (the probe alone
    would call --dim n inert): nothing is refused, and the report says there is nothing to reserve."""
    model = _no_attention()
    assert inert_resolution(model, ShapeBounds({"n": 4}), "n", []) is not None
    result = run(save(model, tmp_path), "--dim", "n=4")
    assert result.exit_code == EXIT_OK and result.json["nodes"] == []
    assert result.text.startswith("nothing to reserve: the model has no ")


def _mask_through_a_sequence() -> onnx.ModelProto:
    """GroupQueryAttention with static shapes whose total_sequence_length the graph computes from a
    sequence of masks [mask_len]: the symbol is in the sequence's element type only
    (ConcatFromSequence's output has no inferred dimensions)."""
    b, s, n, nk, h, p = 1, 4, 2, 1, 8, 16
    info = helper.make_tensor_value_info
    nodes = [helper.make_node("ConcatFromSequence", ["masks"], ["mask"], axis=0),
             helper.make_node("ReduceSum", ["mask"], ["width"], keepdims=0),
             helper.make_node("Cast", ["width"], ["total"], to=TensorProto.INT32),
             helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total"],
                              ["out", "present_key", "present_value"], name="attn", domain=MS, num_heads=n,
                              kv_num_heads=nk)]
    fp16 = TensorProto.FLOAT16
    inputs = [helper.make_tensor_sequence_value_info("masks", TensorProto.INT64, ["mask_len"]),
              info("q", fp16, [b, s, n * h]), info("k", fp16, [b, s, nk * h]), info("v", fp16, [b, s, nk * h]),
              info("pk", fp16, [b, nk, p, h]), info("pv", fp16, [b, nk, p, h]), info("seqlens", TensorProto.INT32, [b])]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, [info("out", fp16, None)]), opset_imports=OPSETS)


def test_a_symbol_a_sequence_s_elements_carry_is_traced_to_the_value_it_computes(tmp_path):
    """The trace reads the tensors a sequence holds (`infer.symbols_of`): the refusal names the
    input whose value the graph computes from the symbol, and the node's reader's advice."""
    with pytest.raises(UsageError) as refused:
        run(save(_mask_through_a_sequence(), tmp_path), "--dim", "mask_len=100", "--max-total-seq", "16")
    assert str(refused.value) == (
        "--dim mask_len=100 changes nothing: no attention node's input shape depends on it, and attnws sizes a node "
        "from its input shapes, never from a tensor's value; the graph computes from it the value of "
        "GroupQueryAttention node attn's input 6 (total_sequence_length); drop it; the longest total sequence ONNX "
        "Runtime's estimator reads is its session option, --max-total-seq N")
