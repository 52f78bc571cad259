"""`attnws validate` on GroupQueryAttention shapes, as a user runs it, through the one validator
every operator shares: a key-length drop, as `attnws counterexamples --op gqa --json` writes it (T
and T + 1, roles by their bytes, with the environment that keeps Flash's own route), piped into
`attnws validate --shapes -` runs both shapes on the simulator, each measured against the
footprint, and the summary shows the smaller shape (T) allocating more than T + 1; one shape from
the shared problem flags, --backend and --max-memory-bytes as for every operator; cuDNN's route (no
recipe, no kernels) and a shape over --max-sim-seconds are not run (exit 3); a shape the
specification rejects fails (exit 1); a document may mix operators; a malformed document and a
missing flag are usage errors."""

from __future__ import annotations

import json

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, EXIT_USAGE
from attnws.spec.options import ENV_DISABLE_FLASH_DECODE, ENV_ENABLE_XQA, RuntimeConfig
from attnws.spec.shapes_file import shape_record

from tests.cli.helpers import REPR_MARKS, attnws
from tests.kernels.gqa_shapes import gqa_geometry

# Flash's split heuristic on 3 SMs with H 256 (64-key blocks): T = 192 takes 3 splits, 193 takes 1.
NODE = ("--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "2", "--kv-heads", "2", "--head-size", "256",
        "--past", "256", "--sm", "80", "--sm-count", "3")
TINY_PMHA = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8, "label": "tiny"}


def results(run) -> list[dict]:
    return [line for line in run.lines() if line.get("record") == "result"]


def drop_document() -> dict:
    """Return the shapes document of the Flash key-length drop at T = 192 (NODE's shape), records as
    `attnws counterexamples --op gqa --json` writes them."""
    env = {ENV_ENABLE_XQA: "0", ENV_DISABLE_FLASH_DECODE: "1"}
    config = RuntimeConfig.make(sm=80, sm_count=3, env=env)
    return {"shapes": [shape_record(gqa_geometry(1, 1, 2, 2, 256, t, past=256), config, env, label="drop",
                                    pair="flash 1", role=role) for t, role in ((192, "larger"), (193, "smaller"))]}


def test_a_key_length_drop_validates_on_the_kernels():
    found = drop_document()
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps(found))
    summary = run.lines()[-1]
    assert run.code == EXIT_OK and [r["status"] for r in results(run)] == ["passed", "passed"]
    assert [r["recipe"]["splits"] for r in results(run)] == [3, 1]
    assert all(r["allocated_bytes"] == r["recipe_bytes"] and r["lse"]["status"] == "passed" for r in results(run))
    (pair,) = summary["pairs"]
    assert pair["smaller_allocates_more"] and summary["counts"]["passed"] == 2
    assert [m["dimensions"] for m in pair["members"]] == [{"total_seq": 192}, {"total_seq": 193}]
    text = attnws("validate", "--shapes", "-", stdin=json.dumps(found))
    assert "flash (3 splits)" in text.out and "flash (1 split)" in text.out
    assert "(total_seq=192, flash) vs 264 B (total_seq=193, flash): the smaller shape allocates more" in text.out
    assert not any(m in text.out for m in REPR_MARKS)


def test_one_shape_from_flags_and_a_route_without_kernels():
    xqa = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "8", "--kv-heads", "2",
                 "--head-size", "64", "--total-seq", "300", "--past", "600", "--sm-count", "8")
    assert xqa.code == EXIT_OK and "ok   gqa fp16 B=1 S=1 T=300 P=600 N=8 Nk=2 H=64 sm80: xqa, recipe" in xqa.out
    assert "reserved beyond the footprint" in xqa.out and "not a failure: ORT documents no slack here" in xqa.out
    one = attnws("validate", *NODE, "--total-seq", "100", "--env", "ORT_ENABLE_XQA=0", "--json")
    (result,) = results(one)
    assert one.code == EXIT_OK and result["status"] == "passed" and result["shape"]["total_seq"] == 100
    assert result["shape"]["op"] == "gqa" and result["backend"] == "flash"
    assert result["slack"]["status"] == "not applicable" and result["outside_regions"]["status"] == "passed"
    assert result["present_cache"]["status"] == "passed" and result["lse"]["status"] == "passed"
    cudnn = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "4", "--heads", "2", "--kv-heads", "2",
                   "--head-size", "256", "--total-seq", "4", "--sm", "90")
    assert cudnn.code == EXIT_UNKNOWN and "not run: no kernels here: route=cudnn" in cudnn.out
    assert "no shape ran" in cudnn.out and "no kernels here model their route or features" in cudnn.out


def test_a_shape_the_specification_rejects_or_no_route_runs_is_rejected_not_failed():
    run = attnws("validate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "3", "--kv-heads", "2",
                 "--head-size", "64", "--total-seq", "16", "--json")
    (result,) = results(run)
    assert run.code == EXIT_REJECTED and result["status"] == "rejected" and result["error"].startswith("invalid_argument")
    quantized = ("--op", "gqa", "--batch", "1", "--seq", "4", "--heads", "2", "--kv-heads", "2", "--head-size", "64",
                 "--total-seq", "8", "--kv-quant", "int8")
    no_route = attnws("validate", *quantized, "--env", "ORT_DISABLE_FLASH_ATTENTION=1")
    assert no_route.code == EXIT_REJECTED and "runtime_failure (no_route): ORT fails at run time" in no_route.out
    flash = attnws("validate", *quantized)  # Flash takes it, on a cache the kernels here do not model
    assert flash.code == EXIT_UNKNOWN and "flash: not run: no kernels here: " in flash.out and "quantized" in flash.out


def test_a_document_mixing_operators_runs_each_and_a_malformed_one_is_a_usage_error():
    record = {"op": "gqa", "heads": 2, "kv_heads": 2, "head_size": 64, "past": 16, "batch": 1, "seq": "1..2",
              "total_seq": 16}
    run = attnws("validate", "--shapes", "-", stdin=json.dumps({"shapes": [record]}))
    assert run.code == EXIT_USAGE and "record 1: field seq" in run.err and run.out == ""
    mixed = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps([{**record, "seq": 1}, TINY_PMHA]))
    assert mixed.code == EXIT_OK and [(r["shape"]["op"], r["status"]) for r in results(mixed)] == [
        ("gqa", "passed"), ("pmha", "passed")]


def test_the_backend_and_the_memory_limit_apply_as_for_every_operator():
    mea = attnws("validate", *NODE, "--total-seq", "100", "--backend", "mea", "--json")
    (result,) = results(mea)
    assert mea.code == EXIT_OK and result["backend"] == "mea" and result["status"] == "passed"
    small = attnws("validate", *NODE, "--total-seq", "100", "--max-memory-bytes", "10000", "--json")
    (result,) = results(small)
    assert small.code == EXIT_UNKNOWN and result["refused"].startswith("too large for this machine's memory")
    assert result["allocations"] == [] and not result["unmodelled"]


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
    assert run.code == EXIT_UNKNOWN and result["status"] == "refused"
    assert result["refused"].startswith("too large for the simulator") and result["cost"]["simulator_seconds"] > 60
    small = attnws("validate", *NODE, "--total-seq", "100", "--max-sim-seconds", "1", "--json")
    (result,) = results(small)
    assert small.code == EXIT_UNKNOWN and "over --max-sim-seconds 1" in result["refused"]
