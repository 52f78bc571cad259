"""`attnws validate`: flags or a shapes document in, a CommandResult with the right exit code out."""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace

import pytest

from attnws.command import EXIT_OK, EXIT_REJECTED
from attnws.kernels import backends
from attnws.kernels.device import device_kind
from attnws.kernels.commands import register
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
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    ns = parser.parse_args(["validate", *argv])
    if monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    messages: list[str] = []
    return ns.handler(ns, messages.append)


def test_one_shape_passes_and_names_the_device():
    result = run([*TRT_FLAGS, "--json"])
    assert result.exit_code == EXIT_OK
    assert result.json["device"] == device_kind() and result.json["reports"][0]["backend"] == "trt"
    assert result.text.startswith(f"device: {device_kind()}")


def test_forced_backend_the_spec_rejects_exits_1():
    result = run(["--op", "pa", *TRT_FLAGS[2:], "--backend", "flash"])
    assert result.exit_code == EXIT_REJECTED and "Flash" in result.text


def test_failed_check_exits_1(monkeypatch):
    monkeypatch.setattr(backends, "scale", lambda p: 1.0)
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
