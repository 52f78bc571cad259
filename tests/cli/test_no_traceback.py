"""Issue 10, "Tracebacks" and "Unbounded reads": every case ends in one line and a documented exit
code, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from attnws.spec import commands as spec_commands
from attnws.spec.command_line import EXIT_INTERRUPTED, EXIT_REJECTED, EXIT_USAGE

from .helpers import attnws


def one_line_error(run, code: int) -> str:
    assert run.code == code, (run.code, run.out, run.err)
    assert "Traceback" not in run.out + run.err
    lines = [line for line in run.err.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, run.err  # the message, and for parse errors a pointer to --help
    return lines[0]


@pytest.fixture
def target_file(tmp_path):
    def write(content: str) -> str:
        path = tmp_path / "target.json"
        path.write_text(content)
        return str(path)
    return write


@pytest.mark.parametrize("content, says", [
    ("[]", "expected a JSON object"),
    ('{"op": "pmha", "batch": 2, "seq": 4, "heads": 1, "head_size": 8, "env": "x"}', "env"),
    ("{not json", "not JSON"),
    ("", "not JSON"),
], ids=["list", "env-string", "malformed", "empty"])
def test_malformed_target_file_is_a_usage_error(target_file, content, says):
    line = one_line_error(attnws("estimate", "--target", target_file(content)), EXIT_USAGE)
    assert line.startswith("attnws estimate: usage error: --target") and says in line


def test_shapes_record_with_a_list_env_is_a_usage_error(tmp_path):
    record = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8, "env": [1]}
    line = one_line_error(attnws("validate", "--shapes", "-", stdin=json.dumps([record])), EXIT_USAGE)
    assert "--shapes -" in line and "env" in line


@pytest.mark.parametrize("argv, code", [
    (["model", "/dev/zero"], EXIT_USAGE),  # a file the command line names that cannot be read, as the others
    (["validate", "--shapes", "/dev/zero"], EXIT_USAGE),
    (["estimate", "--target", "/dev/zero"], EXIT_USAGE),
    (["estimate", "--target", "/nonexistent/target.json"], EXIT_USAGE),
    (["validate", "--shapes", "/nonexistent/shapes.json"], EXIT_USAGE),
    (["prove", "--rlimit", "4294967296"], EXIT_USAGE),
], ids=["model-dev-zero", "shapes-dev-zero", "target-dev-zero", "target-missing", "shapes-missing", "rlimit-2^32"])
def test_unreadable_or_unbounded_inputs_end_in_one_line(argv, code):
    run = attnws(*argv)
    assert run.code == code and "Traceback" not in run.out + run.err
    assert "character device" in run.out + run.err or "no such file" in run.out + run.err or "rlimit" in run.err


@pytest.mark.parametrize("directory", ["README.md", "/proc/nope"])
def test_unusable_smt2_dir_is_a_usage_error(directory):
    run = attnws("prove", "--target", "bert-base-pmha-fp16-sm80", "--theorem", "safe_bound", "--smt2-dir", directory)
    one_line_error(run, EXIT_USAGE)


def test_write_ledger_from_an_installed_package_says_why(monkeypatch):
    monkeypatch.setattr("attnws.solver.ledger.in_source_checkout", lambda *a: False)
    line = one_line_error(attnws("prove", "--write-ledger"), EXIT_USAGE)
    assert "source checkout" in line and "package data" in line


def test_ctrl_c_exits_130_with_one_line(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(spec_commands, "estimate_geometry", interrupted)
    line = one_line_error(attnws("estimate"), EXIT_INTERRUPTED)
    assert line == "attnws estimate: interrupted"


def test_ctrl_c_during_a_stream_says_the_output_is_partial(monkeypatch, tmp_path):
    from attnws.kernels import validate

    real = validate.validate_shape
    calls = []

    def second_is_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(validate, "validate_shape", second_is_interrupted)
    record = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8}
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps([record, record]))
    assert run.code == EXIT_INTERRUPTED and "Traceback" not in run.err
    [result] = run.lines()
    assert result["record"] == "result" and result["status"] == "passed"
    assert "interrupted after 1 result(s): the output is partial" in run.err


def test_closed_pipe_is_quiet():
    """`attnws estimate --json | head -c 1`: the writer ends quietly, without a BrokenPipeError."""
    reader, writer = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "attnws", "targets", "--json"], stdout=writer,
                            stderr=subprocess.PIPE, text=True)
    os.close(writer)
    os.read(reader, 1)
    os.close(reader)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_sigint_exits_130_without_a_traceback(tmp_path):
    """A real SIGINT while validate runs a shape: exit 130, one line, the finished result printed."""
    shapes = [{"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8},
              {"op": "pmha", "batch": 2, "seq": 128, "heads": 2, "head_size": 8}]
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(shapes))
    proc = subprocess.Popen([sys.executable, "-m", "attnws", "validate", "--shapes", str(path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = proc.stdout.readline()  # the first shape's result: the second is now running
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert json.loads(first)["status"] == "passed"
    assert proc.returncode == EXIT_INTERRUPTED and "Traceback" not in err, err
    assert "interrupted" in err and '"record": "summary"' not in rest


def test_console_script_prints_a_rejection_not_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "attnws", "recipe", "--op", "pmha", "--backend", "unfused",
                           "--batch", "1", "--seq", "46341", "--heads", "1", "--head-size", "8"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_REJECTED and "Traceback" not in proc.stderr + proc.stdout
    assert "46341 * 46341" in proc.stdout
