"""`attnws model` end to end through its own register(): exit codes, JSON numbers, text."""

from __future__ import annotations

import pytest

from attnws.command import EXIT_OK, EXIT_REJECTED
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.spec.errors import UsageError
from attnws.spec.estimate import estimate_geometry
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op, QkvFormat
from attnws.spec.units import format_bytes
from attnws.spec_commands import estimate_json

from .builders import run, save

DIMS = ["--dim", "token_count=24", "--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=5"]
SPEC = EncoderSpec(layers=2, hidden=64, heads=4, ffn=64, pmha_format=QkvFormat.SEPARATE, qkv_bias=True)
GEOMETRY = Geometry(op=Op.PMHA, element_size=2, batch=4, seq=8, heads=4, head_size=16, tokens=24,
                    pmha_format=QkvFormat.SEPARATE, qkv_bias=True)


@pytest.fixture
def model_path(tmp_path):
    return save(packed_encoder(SPEC), tmp_path)


def test_json_numbers_equal_the_estimate_command(model_path):
    result = run(model_path, *DIMS, "--sm", "90")
    expected = estimate_geometry(GEOMETRY, RuntimeConfig.make(sm=90))
    assert result.exit_code == EXIT_OK
    doc = result.json
    assert doc["complete"] and doc["node_count"] == doc["sized_count"] == 2
    assert [n["estimate"] for n in doc["nodes"]] == [estimate_json(expected)] * 2
    assert doc["nodes"][0]["estimate"]["requirements"] == [r.as_dict() for r in expected.requirements()]
    assert doc["sum_total_bytes"] == 2 * expected.total_workspace_bytes
    assert doc["peak_total_bytes"] == expected.total_workspace_bytes
    assert doc["nodes"][0]["input_shapes"] == [[24, 64], [24, 64], [24, 64], [192], [4, 8], [5], None]


def test_text_shows_each_node_and_the_totals(model_path):
    text = run(model_path, *DIMS).text
    total = estimate_geometry(GEOMETRY).total_workspace_bytes
    assert "attention_0, attention_1 (x2, identical) in graph main: PackedMultiHeadAttention" in text
    assert f"sum of the nodes' totals (a partition budget)  {format_bytes(2 * total)}" in text
    assert f"peak (nodes run one after another)            {format_bytes(total)}" in text
    assert not any(mark in text for mark in ("{'", "None", "()")), text


def test_unbounded_dimension_exits_1_with_the_reason(model_path):
    result = run(model_path, "--dim", "batch=4")
    assert result.exit_code == EXIT_REJECTED
    assert not result.json["complete"] and result.json["sum_total_bytes"] == 0
    assert "'token_count' with no bound" in result.json["nodes"][0]["estimate"]["message"]


@pytest.mark.parametrize("argv,message", [
    (["--dim", "batch"], "expected NAME=MAX"),
    (["--dim", "batch=x"], "not an integer"),
    (["--dim", "batch=-1"], "must be within"),
    (["--dim", "batch=1", "--dim", "batch=2"], "given twice"),
    (["--max-shape-override", "token_offset=[4,8]"], "expected NAME:"),
    (["--max-shape-override", "token_offset:[4,8];token_offset:[4,8]"], "twice"),
    (["--max-bytes", "-1"], "must be non-negative"),
    (["--env", "NOEQUALS"], "expected NAME=VALUE"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_usage_errors(argv, message, model_path):
    with pytest.raises(UsageError, match=message):
        run(model_path, *argv)


def test_environment_reaches_the_estimate(model_path):
    result = run(model_path, *DIMS, "--env", "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION=1")
    expected = estimate_geometry(GEOMETRY, RuntimeConfig.make(env={"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}))
    assert result.json["nodes"][1]["estimate"] == estimate_json(expected)


def test_max_nodes_flag(model_path):
    from attnws.model import ModelTooLarge

    assert run(model_path, *DIMS, "--max-nodes", "20").exit_code == EXIT_OK  # 2 layers of 10 nodes
    with pytest.raises(ModelTooLarge, match=r"has 20 nodes, over the limit of 19 \(--max-nodes\)"):
        run(model_path, *DIMS, "--max-nodes", "19")
