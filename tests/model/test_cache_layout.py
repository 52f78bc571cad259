"""How `attnws model` reads a GroupQueryAttention node's cache layout: from --cache-layout, else
from genai_config.json, else shared, assumed and said."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnws.model.bounds import ShapeBounds
from attnws.model.load import load_model
from attnws.model.reader import DEFAULT_CACHE_LAYOUT, Session
from attnws.model.report import analyze_model, node_target, with_exact_dims
from attnws.spec.errors import UsageError
from attnws.spec.gqa.problem import CACHE_LAYOUTS
from attnws.spec.target import Target

from .builders import run

DATA = Path(__file__).parent.parent / "data"
GEMMA = str(DATA / "genai" / "gemma2-2b-bf16" / "model.onnx")


def test_without_a_config_or_a_flag_a_shared_cache_is_assumed_and_said():
    result = run(str(DATA / "gqa_decoder.onnx"), "--dim", "batch_size=2")
    assert result.json["cache_layout"] == {"value": "shared", "from": "assumed"}
    assert result.text.splitlines()[1].startswith("cache layout: shared assumed")
    assert all(node["session_options"]["cache_layout"] == "shared" for node in result.json["nodes"])


def test_the_assumed_layout_is_one_the_spec_names_and_the_session_s_default():
    assert DEFAULT_CACHE_LAYOUT in CACHE_LAYOUTS and Session().cache_layout == DEFAULT_CACHE_LAYOUT


def test_the_flag_reads_a_growing_cache_whose_past_ranges_from_zero():
    dims = ("--dim", "batch_size=2", "--dim", "sequence_length=16", "--dim", "past_sequence_length=64",
            "--max-total-seq", "80", "--policy", "tight")
    shared = run(str(DATA / "gqa_decoder.onnx"), *dims)
    growing = run(str(DATA / "gqa_decoder.onnx"), *dims, "--cache-layout", "separate")
    assert growing.json["cache_layout"] == {"value": "separate", "from": "--cache-layout"}
    assert "cache layout:" not in growing.text
    witnesses = [c["tight"]["witness"] for c in growing.json["checks"].values()]
    assert witnesses and all(w["past"] < w["total_seq"] for w in witnesses)  # beyond any shared buffer of P rows
    assert shared.json["checks"]
    assert all(c["tight"]["witness"]["past"] == 64 for c in shared.json["checks"].values())


def _targets(path: str, layout: str, dims: dict[str, int], max_total: int) -> dict[str, Target]:
    """Each sized node's solver target, by layer (no solving)."""
    model = load_model(path)
    bounds = ShapeBounds(dims)
    report = with_exact_dims(model, analyze_model(model, bounds, None, (), path, max_total, layout), bounds)
    return {node.name.split("/")[2]: node_target(node) for node in report.provable}


def test_a_windowed_cache_stays_shared_under_a_separate_layout():
    """ORT refuses a windowed cache whose past and present do not alias: Gemma's windowed layer is
    read shared (P its window, exact), its global layer growing (P from 0, T up to P + S, at most
    the session bound)."""
    dims = {"batch_size": 1, "sequence_length": 8192, "past_sequence_length": 8192, "total_sequence_length": 8192,
            "past_sliding_length": 4096, "total_sliding_length": 4096, "kv_cache_dim": 256}
    targets = _targets(GEMMA, "separate", dims, 8192)
    windowed, whole = targets["layers.0"], targets["layers.1"]
    assert (windowed.cache_layout, windowed.past.lo, windowed.past.hi) == ("shared", 4096, 4096)
    assert (whole.cache_layout, whole.past.lo, whole.past.hi, whole.total_seq.hi) == ("separate", 0, 8192, 8192)
    shared = _targets(GEMMA, "shared", dims, 8192)["layers.1"]
    assert (shared.cache_layout, shared.past.lo, shared.total_seq.hi) == ("shared", 8192, 8192)


MHA_DECODER = (str(DATA / "mha_decoder.onnx"), "--dim", "batch_size=1", "--dim", "sequence_length=8",
               "--dim", "past_sequence_length=16")


@pytest.mark.parametrize("flag, value", [("--cache-layout", "separate"), ("--max-total-seq", "64")])
def test_a_session_flag_no_node_reads_is_refused_not_ignored(flag, value):
    """A model without a GroupQueryAttention node reads neither session option: the flag cannot
    apply (exit 2), as `estimate --op pmha --cache-layout` is refused; with one, it is read."""
    with pytest.raises(UsageError, match=f"{flag} {value}: no node of this model reads it \\(a GroupQueryAttention "
                                         "node's session option\\)"):
        run(*MHA_DECODER, flag, value)
    read = run(str(DATA / "gqa_decoder.onnx"), "--dim", "batch_size=2", flag, value)
    assert "--cache-layout" not in flag or read.json["cache_layout"] == {"value": value, "from": "--cache-layout"}
    assert all(str(node["session_options"][{"--cache-layout": "cache_layout",
                                            "--max-total-seq": "max_total_sequence_length"}[flag]]) == value
               for node in read.json["nodes"])
