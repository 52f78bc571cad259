"""`attnws validate` on GroupQueryAttention shapes, as a user runs it: a key-length drop found by
`attnws counterexamples --op gqa --json` piped into `attnws validate --shapes -` runs both shapes
on the simulator, each measured against the footprint, and the summary shows the longer key
length allocating less; one shape from flags; cuDNN's route (no recipe, no kernels) and a shape
too large for the simulator are not run (exit 3); a malformed or mixed document is a usage error."""

from __future__ import annotations

import json

from attnws.spec.command_line import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE

from tests.cli.helpers import REPR_MARKS, attnws

# Flash's split heuristic on 3 SMs with H 256 (64-key blocks): T = 192 takes 3 splits, 193 takes 1.
NODE = ("--heads", "2", "--kv-heads", "2", "--head-size", "256", "--past", "256", "--sm", "80", "--sm-count", "3")


def test_a_drop_found_by_counterexamples_validates_on_the_kernels():
    found = attnws("counterexamples", "--op", "gqa", "--batch", "1", "--seq", "1", *NODE, "--total-seq", "150..256",
                   "--json")
    assert found.code == EXIT_OK
    shapes = found.json()["shapes"]
    assert [(r["total_seq"], r["role"]) for r in shapes] == [(192, "larger"), (193, "smaller")]
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps(found.json()))
    results = [line for line in run.lines() if line.get("record") == "result"]
    summary = run.lines()[-1]
    assert run.code == EXIT_OK and [r["status"] for r in results] == ["passed", "passed"]
    assert [r["splits"] for r in results] == [3, 1]
    assert all(r["allocated"]["attention"] == r["workspace_bytes"] for r in results)
    (pair,) = summary["pairs"]
    assert pair["drops"] and pair["bytes"] > pair["next_bytes"] and summary["counts"]["passed"] == 2
    text = attnws("validate", "--shapes", "-", stdin=json.dumps(found.json()))
    assert "the longer key length needs less" in text.out and not any(m in text.out for m in REPR_MARKS)


def test_one_shape_from_flags_and_a_route_without_kernels():
    xqa = attnws("validate", "--op", "gqa", "--heads", "8", "--kv-heads", "2", "--head-size", "64",
                 "--total-seq", "300", "--past", "600", "--sm-count", "8")
    assert xqa.code == EXIT_OK and "passed: xqa" in xqa.out
    one = attnws("validate", "--op", "gqa", *NODE, "--total-seq", "100", "--env", "ORT_ENABLE_XQA=0", "--json")
    (result,) = [line for line in one.lines() if line.get("record") == "result"]
    assert one.code == EXIT_OK and result["status"] == "passed" and result["total_seq"] == 100
    cudnn = attnws("validate", "--op", "gqa", *NODE[:6], "--seq", "4", "--total-seq", "4", "--sm", "90")
    assert cudnn.code == EXIT_UNKNOWN and "not run: route=cudnn" in cudnn.out and "no shape ran" in cudnn.out


def test_a_malformed_record_is_a_usage_error():
    document = {"shapes": [{"op": "gqa", "heads": 2, "kv_heads": 2, "head_size": 64, "past": 16, "batch": 1,
                            "seq": "1..2", "total_seq": 16}]}
    run = attnws("validate", "--shapes", "-", stdin=json.dumps(document))
    assert run.code == EXIT_USAGE and "shape record 1: field seq" in run.err and run.out == ""
    mixed = {"shapes": [{**document["shapes"][0], "seq": 1}, {"op": "mha"}]}
    run = attnws("validate", "--shapes", "-", stdin=json.dumps(mixed))
    assert run.code == EXIT_USAGE and "record 2 is not GroupQueryAttention's" in run.err


def test_a_shape_too_large_for_the_simulator_is_not_run():
    run = attnws("validate", "--op", "gqa", "--target", "llama-3-8b-fp16-sm80", "--json")
    (result,) = [line for line in run.lines() if line.get("record") == "result"]
    assert run.code == EXIT_UNKNOWN and result["status"] == "not_run" and "too large for the simulator" in result["reason"]
