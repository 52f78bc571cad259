"""A `--dim` no attention node's input shape depends on is a usage error naming it, never accepted
and ignored: a builder graph's total_sequence_length (the attention mask's width, which the graph
turns into the values of GroupQueryAttention's seqlens_k and total_sequence_length inputs), with
and without the genai_config.json beside the model. A bound that matters, or that the model checks
by deriving the symbol, is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attnws.model.examples import packed_encoder
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.spec.errors import UsageError

from .builders import run, save

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
