"""The command line as users run it: JSON numbers, human tables and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from attnws.cli import run

SMALL = ["--batch", "2", "--seq", "4", "--heads", "2", "--head-size", "4", "--tokens", "6"]


def cli(capsys, *argv):
    code = run(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_json(capsys, *argv):
    code, out, _ = cli(capsys, *argv, "--json")
    return code, json.loads(out)


def test_estimate_without_arguments_reports_the_default_target(capsys):
    code, out, _ = cli(capsys, "estimate")
    assert code == 0
    assert "bert-base-pmha-fp16-sm80" in out and "safe bound" in out
    assert "478,150,656" in out  # unfused at B=32, S=512, N=12, H=64: C + 2 * align256(2*32*12*512*512)


@pytest.mark.parametrize("argv,field,value", [
    (["--op", "pmha", "--backend", "flash"], "attention_workspace_bytes", 448),
    (["--op", "pmha", "--backend", "flash", "--format", "separate"], "attention_workspace_bytes", 64),
    (["--op", "pmha", "--backend", "trt", "--format", "separate"], "interleaved_qkv_bytes", 288),
    (["--op", "pmha", "--backend", "unfused"], "attention_workspace_bytes", 896),
    (["--op", "pmha", "--backend", "mea"], "qkv_layout", "planar"),
])
def test_recipe_json_reproduces_fact_sheet_golden_values(capsys, argv, field, value):
    code, doc = cli_json(capsys, "recipe", *argv, *SMALL)
    assert code == 0 and doc["status"] == "ok"
    assert doc[field] == value


def test_pa_recipe_reports_projection_and_root_layout(capsys):
    code, doc = cli_json(capsys, "recipe", "--op", "pa", "--backend", "unfused", *SMALL, "--v-head-size", "2",
                         "--qkv-hidden-sizes", "8,8,4", "--input-hidden", "6")
    assert code == 0
    assert (doc["projection_bytes"], doc["projection_n"], doc["attention_workspace_bytes"]) == (240, 20, 832)
    assert doc["second_scratch_offset_bytes"] == 576
    assert doc["attention_workspace_offset_bytes"] == 256 and doc["total_workspace_bytes"] == 256 + 832
    assert doc["requirements"] == [{"size_bytes": 1088, "slot_id": 0, "alignment_bytes": 256}]


def test_dispatch_explains_skipped_backends(capsys):
    code, doc = cli_json(capsys, "dispatch", "--op", "pmha", "--batch", "1", "--seq", "512", "--heads", "12",
                         "--head-size", "64", "--sm", "90")
    assert code == 0 and doc["backend"] == "mea"
    assert {"backend": "flash", "reason": "flash: packed QKV needs S >= 513, S = 512"} in doc["skipped"]
    code, out, _ = cli(capsys, "dispatch", "--op", "pmha", "--batch", "1", "--seq", "512", "--heads", "12",
                       "--head-size", "64", "--sm", "90")
    assert "picks mea" in out


def test_estimate_from_ort_positional_hints(capsys):
    code, doc = cli_json(capsys, "estimate", "--op", "pa", "--heads", "2", "--qkv-hidden-sizes", "8,8,8",
                         "--sdpa-kernel", "16", "--input-shapes", "[[6,6],[6,24],[24],[2,4],[3],null]")
    assert code == 0
    assert (doc["projection_bytes"], doc["attention_workspace_offset_bytes"], doc["total_workspace_bytes"]) == (288, 512, 1408)
    assert doc["requirements"] == [{"size_bytes": 1408, "slot_id": 0, "alignment_bytes": 256}]


def test_estimate_exact_is_one_route(capsys):
    code, doc = cli_json(capsys, "estimate", "--exact", "--op", "pmha", "--batch", "1", "--seq", "128",
                         "--heads", "12", "--head-size", "64")
    assert code == 0 and doc["classification"] == "exact"
    assert [r["backend"] for r in doc["routes"]] == ["trt"] and doc["total_workspace_bytes"] == 0


def test_estimate_reads_flags_as_maxima_and_is_a_safe_bound(capsys):
    code, doc = cli_json(capsys, "estimate", "--op", "pmha", "--batch", "1", "--seq", "128", "--heads", "12",
                         "--head-size", "64")
    assert code == 0 and doc["classification"] == "safe_bound"
    assert {r["backend"] for r in doc["routes"] if r["reachable"]} == {"trt", "mea", "unfused"}


def test_zero_hint_is_unavailable_never_zero(capsys):
    code, doc = cli_json(capsys, "estimate", "--op", "pmha", "--heads", "2",
                         "--input-shapes", "[[0,2,3,4],null,null,null,[2,4],[3],null]")
    assert code == 1
    assert doc["classification"] == "unavailable" and doc["requirements"] == []
    assert "zero dimension" in doc["message"]


def test_rejected_problem_exits_1_with_status(capsys):
    code, doc = cli_json(capsys, "recipe", "--op", "pa", "--backend", "flash", *SMALL)
    assert code == 1 and doc["status"] == "invalid_argument" and "no Flash route" in doc["message"]


@pytest.mark.parametrize("argv", [
    ["recipe", "--op", "pmha", *SMALL],  # --backend missing
    ["recipe", "--op", "pmha", "--backend", "flash", "--batch", "2", "--seq", "abc", "--heads", "2", "--head-size", "4"],
    ["dispatch", "--op", "pmha", *SMALL, "--env", "NOVALUE"],
    ["dispatch", "--op", "pmha", "--batch", "2"],
    ["estimate", "--op", "pmha", "--heads", "2", "--input-shapes", "not json"],
    [],
])
def test_usage_errors_exit_2(capsys, argv):
    assert run(argv) == 2


def test_console_script_never_shows_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "attnws.cli", "recipe", "--op", "pmha", "--backend", "unfused",
                           "--batch", "1", "--seq", "46341", "--heads", "1", "--head-size", "8"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "46341 * 46341" in proc.stdout
