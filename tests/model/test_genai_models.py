"""Models onnxruntime-genai's builder (0.18.0) writes, read as a user would: `model.onnx` and
`genai_config.json` as the builder wrote them, without the weights file (tests/data/genai/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from attnws.model.errors import BadModel
from attnws.solver.ledger import read_ledger
from attnws.spec.command_line import EXIT_OK

from .builders import run

GENAI = Path(__file__).parent.parent / "data" / "genai"
MODELS = sorted(p.name for p in GENAI.iterdir() if (p / "model.onnx").is_file())


def test_every_builder_precision_and_geometry_is_here():
    assert len(MODELS) == 7 and {"llama3-8b-int4", "gemma2-2b-bf16", "qwen3-8b-fp16"} <= set(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_the_whole_command_is_the_batch(name):
    """No weights file, ORT's own SimplifiedLayerNormalization, and every other bound from the config."""
    folder = GENAI / name
    assert not (folder / "model.onnx.data").exists()
    result = run(str(folder / "model.onnx"), "--dim", "batch_size=4")
    assert result.exit_code == EXIT_OK, result.text
    taken = result.json["genai_config"]["taken"]
    config = json.loads((folder / "genai_config.json").read_text())
    assert taken["kv_cache_dim"] == {"value": config["model"]["decoder"]["head_size"], "from": "model.decoder.head_size"}
    assert taken["--max-total-seq"]["value"] == config["search"]["max_length"]
    assert taken["--cache-layout"] == {"value": "shared", "from": "search.past_present_share_buffer true, num_beams 1"}
    assert result.json["cache_layout"] == {"value": "shared", "from": "genai_config.json"}
    assert result.text.startswith(f"from {folder / 'genai_config.json'}: kv_cache_dim = ")


def test_llama_3_8b_matches_the_committed_target_to_the_byte():
    """The target was written by hand from the model card; the builder's graph is read from the file."""
    result = run(str(GENAI / "llama3-8b-fp16" / "model.onnx"), "--dim", "batch_size=4", "--sm", "80")
    target = read_ledger()["targets"]["llama-3-8b-fp16-sm80"]
    assert result.json["peak_total_bytes"] == target["tight"]["ort_total_bytes"]


def test_gemma_s_windowed_layer_takes_its_window(tmp_path):
    result = run(str(GENAI / "gemma2-2b-bf16" / "model.onnx"), "--dim", "batch_size=1")
    taken = result.json["genai_config"]["taken"]
    assert taken["past_sliding_length"]["value"] == 4096 and taken["past_sequence_length"]["value"] == 8192


def test_a_flag_wins_over_the_config():
    path = str(GENAI / "llama3-8b-fp16" / "model.onnx")
    full = run(path, "--dim", "batch_size=4")
    halved = run(path, "--dim", "batch_size=4", "--dim", "past_sequence_length=4096", "--dim", "sequence_length=4096",
                 "--max-total-seq", "4096")
    taken = halved.json["genai_config"]["taken"]
    assert set(taken) == {"kv_cache_dim", "--cache-layout"}  # total_sequence_length would change nothing
    assert halved.json["peak_total_bytes"] < full.json["peak_total_bytes"]


def _copy(tmp_path: Path, edit) -> str:
    folder = tmp_path / "model"
    shutil.copytree(GENAI / "llama3-8b-fp16", folder)
    config = json.loads((folder / "genai_config.json").read_text())
    edit(config)
    (folder / "genai_config.json").write_text(json.dumps(config))
    return str(folder / "model.onnx")


@pytest.mark.parametrize("edit,words", [
    (lambda c: c["search"].update(past_present_share_buffer=False), "search.past_present_share_buffer false"),
    (lambda c: c["search"].update(num_beams=4), "search.num_beams 4: beam search turns sharing off"),
], ids=["not-shared", "beam-search"])
def test_a_growing_cache_is_read_with_a_separate_present_and_says_why(edit, words, tmp_path):
    """Without a shared buffer the cache grows: P ranges from 0 and T reaches P + S, up to search.max_length."""
    result = run(_copy(tmp_path, edit), "--dim", "batch_size=4", "--policy", "tight")
    assert result.json["genai_config"]["taken"]["--cache-layout"] == {"value": "separate", "from": words}
    assert result.json["cache_layout"] == {"value": "separate", "from": "genai_config.json"}
    assert f"--cache-layout separate ({words})" in result.text
    (check, _) = result.json["checks"].values()
    witness = check["tight"]["witness"]
    assert witness["past"] < witness["total_seq"]  # a growing step: T = P + S, beyond what a shared buffer holds


def test_the_cache_layout_flag_wins_over_the_config(tmp_path):
    path = _copy(tmp_path, lambda c: c["search"].update(past_present_share_buffer=False))
    result = run(path, "--dim", "batch_size=4", "--cache-layout", "shared")
    assert "--cache-layout" not in result.json["genai_config"]["taken"]
    assert result.json["peak_total_bytes"] == run(str(GENAI / "llama3-8b-fp16" / "model.onnx"), "--dim",
                                                  "batch_size=4").json["peak_total_bytes"]


@pytest.mark.parametrize("edit,words", [
    (lambda c: c["search"].update(max_length="8192"), "search: field max_length = \"8192\" is a string; expected an integer"),
    (lambda c: c["model"]["decoder"].update(head_size=0), "field head_size = 0 is outside"),
    (lambda c: c.update(model=[]), "model is a list"),
], ids=["string-length", "zero-head-size", "model-not-object"])
def test_a_bad_config_names_the_field(edit, words, tmp_path):
    with pytest.raises(BadModel, match=words):
        run(_copy(tmp_path, edit), "--dim", "batch_size=4")


def test_on_an_h100_the_decode_pattern_is_the_committed_target_s_and_says_what_it_leaves_out():
    """ORT declares nothing where cuDNN is reachable; the solver still runs on the node. Its decode
    pattern meets the committed llama-3-8b-fp16-sm90's maximum, and since one decode shape (the
    one-token prompt, S = T = 1) takes cuDNN, which no recipe sizes, the pattern bounds nothing."""
    result = run(str(GENAI / "llama3-8b-fp16" / "model.onnx"), "--dim", "batch_size=4", "--sm", "90", "--policy",
                 "tight", "--pattern", "decode:seq=1")
    committed = next(p for p in read_ledger()["targets"]["llama-3-8b-fp16-sm90"]["patterns"]["patterns"]
                     if p["details"]["pattern"] == "decode")
    (check, _) = result.json["checks"].values()
    decode = check["patterns"]["decode"]
    assert decode["result"]["details"]["max_runtime_bytes"] == committed["details"]["max_runtime_bytes"] == 369_024
    assert set(decode["result"]["details"]["left_out"]) == {"cudnn"} and decode["reserve_bytes"] is None
    assert check["tight"] is None and result.json["totals"]["patterns"]["decode"] == {"peak": None, "sum": None}
    assert "decode  none: some of its shapes take cudnn, which no recipe sizes" in result.text
    assert "the others need at most 369,024 B" in result.text


@pytest.mark.parametrize("setting", [("--sdpa-kernel", "1"), ("--env", "ORT_ENABLE_CUDNN_FLASH_ATTENTION=0")],
                         ids=["sdpa-kernel", "env"])
def test_on_an_h100_the_report_names_the_setting_that_makes_ort_s_estimate_sizable(setting):
    path = str(GENAI / "llama3-8b-fp16" / "model.onnx")
    unavailable = run(path, "--dim", "batch_size=4", "--sm", "90")
    assert "keeps cuDNN off and makes it sizable" in unavailable.text and unavailable.json["peak_total_bytes"] is None
    sized = run(path, "--dim", "batch_size=4", "--sm", "90", *setting)
    assert sized.exit_code == EXIT_OK and sized.json["peak_total_bytes"] > 0
