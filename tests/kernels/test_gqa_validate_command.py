"""`attnws validate` on GroupQueryAttention shapes, as a user runs it: a key-length drop found by
`attnws counterexamples --op gqa --json` piped into `attnws validate --shapes -` runs both shapes
on the simulator, each measured against the footprint, and the summary shows the longer key
length allocating less; one shape from the shared problem flags; cuDNN's route (no recipe, no
kernels) and a shape over --max-sim-seconds are not run (exit 3); a shape the specification rejects
fails (exit 1); a malformed or mixed document, a missing flag and a flag the harness does not read
are usage errors."""

from __future__ import annotations

import json

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, EXIT_USAGE

from tests.cli.helpers import REPR_MARKS, attnws

# Flash's split heuristic on 3 SMs with H 256 (64-key blocks): T = 192 takes 3 splits, 193 takes 1.
NODE = ("--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "2", "--kv-heads", "2", "--head-size", "256",
        "--past", "256", "--sm", "80", "--sm-count", "3")


def results(run) -> list[dict]:
    return [line for line in run.lines() if line.get("record") == "result"]


def test_a_drop_found_by_counterexamples_validates_on_the_kernels():
    found = attnws("counterexamples", *NODE, "--total-seq", "150..256", "--json")
    assert found.code == EXIT_OK
    shapes = found.json()["shapes"]
    assert [(r["total_seq"], r["role"]) for r in shapes] == [(192, "larger"), (193, "smaller")]
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps(found.json()))
    summary = run.lines()[-1]
    assert run.code == EXIT_OK and [r["status"] for r in results(run)] == ["passed", "passed"]
    assert [r["splits"] for r in results(run)] == [3, 1]
    assert all(r["allocated"]["attention"] == r["workspace_bytes"] for r in results(run))
    (pair,) = summary["pairs"]
    assert pair["drops"] and pair["bytes"] > pair["next_bytes"] and summary["counts"]["passed"] == 2
    text = attnws("validate", "--shapes", "-", stdin=json.dumps(found.json()))
    assert "the longer key length needs less" in text.out and not any(m in text.out for m in REPR_MARKS)


def test_one_shape_from_flags_and_a_route_without_kernels():
    xqa = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "8", "--kv-heads", "2",
                 "--head-size", "64", "--total-seq", "300", "--past", "600", "--sm-count", "8")
    assert xqa.code == EXIT_OK and "gqa fp16 B=1 S=1 T=300 P=600 N=8 Nk=2 H=64 sm80: passed: xqa" in xqa.out
    one = attnws("validate", *NODE, "--total-seq", "100", "--env", "ORT_ENABLE_XQA=0", "--json")
    (result,) = results(one)
    assert one.code == EXIT_OK and result["status"] == "passed" and result["total_seq"] == 100
    assert result["op"] == "gqa" and result["name"] == "gqa fp16 B=1 S=1 T=100 P=256 N=2 Nk=2 H=256 sm80"
    cudnn = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "4", "--heads", "2", "--kv-heads", "2",
                   "--head-size", "256", "--total-seq", "4", "--sm", "90")
    assert cudnn.code == EXIT_UNKNOWN and "not run: route=cudnn" in cudnn.out and "no shape ran" in cudnn.out


def test_a_shape_the_specification_rejects_fails():
    run = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "3", "--kv-heads", "2",
                 "--head-size", "64", "--total-seq", "16", "--json")
    (result,) = results(run)
    assert run.code == EXIT_REJECTED and result["status"] == "failed" and result["failures"][0]


def test_a_malformed_or_mixed_document_is_a_usage_error():
    record = {"op": "gqa", "heads": 2, "kv_heads": 2, "head_size": 64, "past": 16, "batch": 1, "seq": "1..2",
              "total_seq": 16}
    run = attnws("validate", "--shapes", "-", stdin=json.dumps({"shapes": [record]}))
    assert run.code == EXIT_USAGE and "record 1: field seq" in run.err and run.out == ""
    for mixed, stray in (([{**record, "seq": 1}, {"op": "mha"}], 2), ([{"op": "pmha"}, {**record, "seq": 1}], 1)):
        run = attnws("validate", "--shapes", "-", stdin=json.dumps({"shapes": mixed}))
        assert run.code == EXIT_USAGE and f"record {stray} is not GroupQueryAttention's" in run.err


@pytest.mark.parametrize("extra, words", [
    (("--backend", "flash"), "--backend does not apply to GroupQueryAttention"),
    (("--max-memory-bytes", "1000000"), "--max-memory-bytes does not apply to GroupQueryAttention"),
], ids=["backend", "max-memory-bytes"])
def test_a_flag_the_harness_does_not_read_is_a_usage_error(extra, words):
    run = attnws("validate", *NODE, "--total-seq", "100", *extra)
    assert run.code == EXIT_USAGE and words in run.err


def test_a_shape_without_its_kv_heads_or_in_fp32_is_a_usage_error():
    run = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "2", "--head-size", "64")
    assert run.code == EXIT_USAGE and "--kv-heads --total-seq" in run.err
    run = attnws("validate", *NODE, "--total-seq", "100", "--dtype", "fp32")
    assert run.code == EXIT_USAGE and "run fp32 here, not GroupQueryAttention" in run.err


def test_a_shape_too_large_for_the_simulator_is_not_run():
    llama = ("--op", "gqa", "--batch", "4", "--seq", "1", "--heads", "32", "--kv-heads", "8", "--head-size", "128",
             "--total-seq", "8192", "--rotary", "--json")
    run = attnws("validate", *llama)
    (result,) = results(run)
    assert run.code == EXIT_UNKNOWN and result["status"] == "not_run" and "too large for the simulator" in result["reason"]
    small = attnws("validate", *NODE, "--total-seq", "100", "--max-sim-seconds", "1", "--json")
    (result,) = results(small)
    assert small.code == EXIT_UNKNOWN and "over --max-sim-seconds 1" in result["reason"]
