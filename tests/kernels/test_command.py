"""`attnws validate`: flags or a shapes document in, a CommandResult with the right exit code out."""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, CommandResult
from attnws.kernels.packed import routes
from attnws.kernels.device import device_kind
from attnws.kernels.allocation_checks import Oversize
from attnws.kernels.family_checks import compared, not_applicable, outcome
from attnws.kernels.commands import format_bytes, format_report, register
from attnws.kernels.measure import IncompleteWrite, Measurement, StrayWrite
from attnws.kernels.report import ValidationReport
from attnws.spec import Op, QkvFormat, RuntimeConfig, UsageError
from attnws.spec.hints import Geometry
from attnws.spec.shapes_file import shape_record

TRT_FLAGS = ["--op", "pmha", "--batch", "2", "--seq", "4", "--heads", "1", "--head-size", "32", "--tokens", "5"]
MEA_FP32 = {"ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32": "4"}
# S = 3 runs unfused (below the fp32 MEA threshold), S = 4 runs MEA reading its inputs directly.
SMALLER = Geometry(Op.PMHA, 4, batch=1, seq=3, heads=1, head_size=8, pmha_format=QkvFormat.SEPARATE)
PAIR = [shape_record(SMALLER, RuntimeConfig.make(sm=80, env=MEA_FP32), MEA_FP32, pair="fp32-threshold", role="smaller"),
        shape_record(replace(SMALLER, seq=4), RuntimeConfig.make(sm=80, env=MEA_FP32), MEA_FP32,
                     pair="fp32-threshold", role="larger")]


def run(argv: list[str], stdin: str = "", monkeypatch=None):
    """Run the handler and collect its stream: the text blocks joined, the JSON records as
    {"results": [...], "summary": {...}}, the summary's exit code."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    ns = parser.parse_args(["validate", *argv])
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    messages: list[str] = []
    result = ns.handler(ns, messages.append)
    if result.stream is None:
        return result
    items = list(result.stream)
    records = [item.json for item in items if item.json is not None]
    doc = {"results": [r for r in records if r["record"] == "result"], **records[-1]}
    return CommandResult(items[-1].exit_code, "\n".join(item.text for item in items), doc)


def test_one_shape_passes_and_names_the_device():
    result = run([*TRT_FLAGS, "--json"])
    assert result.exit_code == EXIT_OK
    assert result.json["device"] == device_kind() and result.json["results"][0]["backend"] == "trt"
    assert result.text.startswith(f"device: {device_kind()}")


def test_forced_backend_the_spec_rejects_exits_1():
    result = run(["--op", "pa", *TRT_FLAGS[2:], "--backend", "flash"])
    assert result.exit_code == EXIT_REJECTED and "Flash" in result.text


def test_failed_check_exits_1(monkeypatch):
    monkeypatch.setattr(routes, "softmax_scale", lambda head_size: 1.0)
    result = run(TRT_FLAGS)
    assert result.exit_code == EXIT_REJECTED and "failed: reference" in result.text


def test_shapes_from_stdin_show_the_smaller_shape_allocating_more(monkeypatch):
    result = run(["--shapes", "-"], json.dumps({"shapes": PAIR}), monkeypatch)
    assert result.exit_code == EXIT_OK, result.text
    [pair] = result.json["pairs"]
    assert [m["backend"] for m in pair["members"]] == ["unfused", "mea"]
    assert pair["smaller_allocates_more"] and "the smaller shape allocates more" in result.text


def test_shapes_file_with_a_rejected_record_exits_1(tmp_path):
    bad = {**PAIR[0], "tokens": 99}
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps([bad]))
    result = run(["--shapes", str(path)])
    assert result.exit_code == EXIT_REJECTED and "invalid_argument" in result.text


@pytest.mark.parametrize("argv", [
    ["--shapes", "-", "--op", "pmha"],
    ["--shapes", "-", "--backend", "mea"],
    ["--seq", "4"],
    ["--shapes", "/nonexistent/shapes.json"],
], ids=["shapes-and-flags", "shapes-and-backend", "no-op", "missing-file"])
def test_usage_errors_raise(argv, monkeypatch):
    with pytest.raises(UsageError):
        run(argv, "[]", monkeypatch)


def test_malformed_json_is_a_usage_error(monkeypatch):
    with pytest.raises(UsageError):
        run(["--shapes", "-"], "{not json", monkeypatch)


BIAS_FLAGS = [*TRT_FLAGS, "--qkv-bias"]  # the producer materializes the interleaved Q/K/V into the workspace
REPR_MARKS = ("{", "}", "None", "()", "[", "'")


@pytest.mark.parametrize("nbytes, text", [(0, "0 B"), (1280, "1,280 B"), (2**20 - 1, "1,048,575 B"),
                                          (3 * 2**20, "3,145,728 B (3.0 MiB)")])
def test_bytes_read_as_people_write_them(nbytes, text):
    assert format_bytes(nbytes) == text


def test_text_names_every_buffer_in_bytes_without_python_reprs():
    result = run(BIAS_FLAGS)
    assert result.exit_code == EXIT_OK, result.text
    assert "stages: materialize_qkv, attention" in result.text
    assert "qkv_interleaved at attention + 0: reserved 960 B, footprint 960 B, touched 960 B" in result.text
    assert not any(mark in result.text for mark in REPR_MARKS), result.text


def test_json_reports_each_buffer_and_keeps_the_existing_keys():
    report = run([*BIAS_FLAGS, "--json"]).json["results"][0]
    assert {"recipe_bytes", "allocated_bytes", "allocations_match", "guard_bands_intact", "untouched_outside_views",
            "first_stray_write", "max_error", "estimate_bytes", "failures", "passed"} <= report.keys()
    assert [b["name"] for b in report["buffers"]] == ["qkv_interleaved", "output"]
    assert set(report["buffers"][0]) == {"name", "allocation", "offset", "reserved_bytes", "footprint_bytes",
                                         "touched_bytes", "unwritten_bytes", "padding_bytes"}


def test_failures_read_as_sentences():
    shape = shape_record(SMALLER, RuntimeConfig.make(sm=80))
    report = ValidationReport(
        shape, "simulator", "unfused", (("attention", 2048),), oversized=(Oversize("attention", 2048, 1024, 256),),
        unplaced=("q",), measurement=Measurement(stray=(StrayWrite("scores", "attention", 576, 4),),
                                                 incomplete=(IncompleteWrite("attention", "softmax_lse", 0, 18),)))
    text = format_report(report)
    assert "failed: unplaced buffers, oversized, stray writes, incomplete writes" in text
    assert ("oversized: the recipe reserves 2,048 B for attention, more than its footprint 1,024 B plus documented "
            "slack 256 B") in text
    assert "stray writes: scores wrote 4 B of attention outside the buffers it declares, the first at offset 576" in text
    assert "incomplete writes: attention wrote 0 of the 18 elements of softmax_lse it must write" in text
    assert not any(mark in text for mark in REPR_MARKS), text


def test_the_family_checks_read_as_sentences_and_every_result_carries_them():
    shape = shape_record(SMALLER, RuntimeConfig.make(sm=80))
    report = ValidationReport(
        shape, "simulator", "flash", (("attention", 2048),), stages=("attention",), route="fast decode, 2 splits",
        outside_regions=outcome(["expanded_key"]), present_cache=outcome(["present_key of batch entry 0: off"]),
        lse=compared("LSE", 0.5, 0.001), slack=not_applicable("ORT documents no slack"), spare_bytes=640,
        untouched_regions=(("row_sum", 512),), launches_not_run=("the write-back",))
    text = format_report(report)
    assert "FAIL pmha fp32 T=3 B=1 S=3 N=1 H=8 Hv=8 sm80: flash (fast decode, 2 splits), recipe" in text
    assert "LSE error 0.5 (tolerance 0.001)" in text
    assert "failed: outside regions, lse, present cache" in text
    assert "outside regions: buffers running past the room of their recipe region (up to the next region): " \
           "expanded_key" in text
    assert "present cache: present_key of batch entry 0: off" in text and "lse: LSE error 0.5 > tolerance 0.001" in text
    assert ("reserved beyond the footprint: 640 B no buffer covers (whole regions: row_sum 512 B); not a failure: "
            "ORT documents no slack here") in text
    assert "ORT's launches not run here: the write-back" in text
    doc = report.as_dict()
    assert doc["lse"] == {"status": "failed", "why": "", "failures": ["LSE error 0.5 > tolerance 0.001"],
                          "max_error": 0.5, "tolerance": 0.001}
    assert doc["slack"]["status"] == "not applicable" and doc["untouched_regions"] == {"row_sum": 512}
    plain = run([*TRT_FLAGS, "--json"]).json["results"][0]
    assert {key: plain[key]["status"] for key in ("outside_regions", "slack", "present_cache", "lse")} == {
        "outside_regions": "not applicable", "slack": "passed", "present_cache": "not applicable",
        "lse": "not applicable"}
    assert plain["recipe"]["backend"] == "trt" and plain["route"] == "" and plain["unmodelled"] is False


def test_a_shape_without_kernels_here_is_not_run_and_says_why():
    shape = shape_record(SMALLER, RuntimeConfig.make(sm=80))
    report = ValidationReport(shape, "simulator", "cudnn", refused="no kernels here: route=cudnn", unmodelled=True)
    assert format_report(report) == ("SKIP pmha fp32 T=3 B=1 S=3 N=1 H=8 Hv=8 sm80: cudnn: not run: no kernels here: "
                                     "route=cudnn")
    assert report.status == "refused" and report.passed and not report.ran
