"""The committed GroupQueryAttention targets that name an onnxruntime-genai builder model are that
model's nodes: read from the graph and its genai_config.json (tests/data/genai/), each node's ORT
estimate, proven maximum and kept routes are its target's, as the ledger records them."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnws.solver.ledger import read_ledger

from .builders import run

GENAI = Path(__file__).parent.parent / "data" / "genai"
# (builder model, the node's layer, the committed target it is)
NODES = [("gemma2-2b-bf16", "layers.0", "gemma-2-2b-bf16-sm80"),
         ("gemma2-2b-bf16", "layers.1", "gemma-2-2b-global-bf16-sm80")]


@pytest.fixture(scope="module")
def gemma_checks() -> dict[str, dict]:
    result = run(str(GENAI / "gemma2-2b-bf16" / "model.onnx"), "--dim", "batch_size=4", "--sm", "80", "--policy",
                 "tight")
    return result.json["checks"]


@pytest.mark.parametrize("model, layer, target", NODES, ids=[n[2] for n in NODES])
def test_the_builder_s_node_is_the_committed_target(gemma_checks, model, layer, target):
    (check,) = [c for path, c in gemma_checks.items() if f"/{layer}/" in path]
    committed = read_ledger()["targets"][target]["tight"]
    for key in ("ort_total_bytes", "tight_total_bytes", "kept_routes", "witness"):
        assert check["tight"][key] == committed[key], key


@pytest.mark.parametrize("model, target, rows", [("llama3-8b-fp16", "llama-3-8b-fp16-sm80", 8192),
                                                  ("qwen2.5-1.5b-fp16", "qwen2.5-1.5b-fp16-sm80", 4096),
                                                  ("phi3-mini-fp16", "phi-3-mini-fp16-sm89", 4096)])
def test_a_full_attention_target_is_its_builder_graph_at_its_rows(model, target, rows):
    """ORT's estimate of every node of the builder's graph, bounded as the target is (search.max_length
    `rows`), is the target's."""
    sm = read_ledger()["targets"][target]
    bounds = [arg for name in ("past_sequence_length", "sequence_length") for arg in ("--dim", f"{name}={rows}")]
    result = run(str(GENAI / model / "model.onnx"), "--dim", "batch_size=4", *bounds, "--max-total-seq", str(rows),
                 "--sm", target.rsplit("-sm", 1)[1])
    assert result.json["peak_total_bytes"] == sm["tight"]["ort_total_bytes"]
