"""bench/gpu_validation.py's own logic, on the simulator with a tiny shapes document: the preflight
gates the run, one line per shape streams out as it finishes, any failure makes the exit code 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from attnws.kernels.device import driver_present
from attnws.spec.options import RuntimeConfig
from attnws.spec.shapes_file import shape_record

from tests.kernels.gqa_shapes import gqa_geometry

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_validation.py"
PASSING = {"op": "pmha", "dtype": "fp16", "tokens": 6, "batch": 2, "seq": 4, "heads": 2, "head_size": 8,
           "format": "separate", "qkv_bias": True, "sm": 80, "label": "flash"}
REJECTED = {**PASSING, "tokens": 99, "label": "rejected"}


def run_script(tmp_path: Path, shapes: list[dict], **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "shapes.json").write_text(json.dumps({"shapes": shapes}))
    out = tmp_path / "out"
    clean = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "OUT")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--shapes", str(tmp_path / "shapes.json"),
                           "--no-pytest", "--no-bench", "--budget-s", "120"], env={**clean, **env},
                          capture_output=True, text=True, timeout=300)
    return done, out


def test_each_shape_streams_a_line_and_a_rejected_shape_exits_1_apart_from_the_failures(tmp_path):
    done, out = run_script(tmp_path, [PASSING, REJECTED], NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = (out / "results.txt").read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [["1/2", "ok"], ["2/2", "REJ"]]
    assert "rejected: invalid_argument" in lines[1] and all(line in done.stdout for line in lines)
    summary = json.loads((out / "gpu_validation.json").read_text())["summary"]
    assert summary["failed_shapes"] == [] and summary["rejected_shapes"] == [1] and summary["passed"] == 1
    assert summary["counts"] == {"passed": 1, "failed": 0, "refused": 0, "rejected": 1}


def test_all_passing_exits_0(tmp_path):
    done, _ = run_script(tmp_path, [PASSING], NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(driver_present(), reason="a machine with an NVIDIA driver passes the preflight")
def test_preflight_refuses_a_silent_fallback_to_the_simulator(tmp_path):
    done, out = run_script(tmp_path, [PASSING])
    assert done.returncode == 2 and "no usable GPU" in done.stdout
    assert not (out / "results.txt").exists()


def test_a_group_query_attention_record_runs_on_the_one_validator(tmp_path):
    """A GroupQueryAttention shape record (`"op": "gqa"`, the shared record `counterexamples --op
    gqa` writes) streams its line and counts like every operator's; one whose features have no
    kernels here (bf16) is not run, not a failure."""
    node = gqa_geometry(1, 1, 2, 2, 64, 40, past=64)
    config = RuntimeConfig.make(sm=80, sm_count=4, env={"ORT_ENABLE_XQA": "0"})
    records = [shape_record(g, config, {"ORT_ENABLE_XQA": "0"}, label="tiny") for g in (node, replace(node, bf16=True))]
    done, out = run_script(tmp_path, records, NUMBA_ENABLE_CUDASIM="1")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (out / "results.txt").read_text().splitlines()
    head = "1/2 ok   gqa fp16 B=1 S=1 T=40 P=64 N=2 Nk=2 H=64 sm80 [tiny]: flash (fast decode, "
    assert lines[0].startswith(head), lines
    assert lines[1].startswith("2/2 ok   gqa bf16 ") and "not run: no kernels here" in lines[1]
    assert "is_bf16" in lines[1]
    assert json.loads((out / "gpu_validation.json").read_text())["summary"]["counts"] == {
        "passed": 1, "failed": 0, "refused": 1, "rejected": 0}


def test_step_3_validates_every_committed_target_but_group_query_attention_s():
    """The maximum geometry of every committed target, bounded; GroupQueryAttention's shapes are
    gpu_shapes.json's (the planted bug: a targets folder that does not exist gave no shapes at all)."""
    import importlib.util

    from attnws.solver.ledger import committed_targets

    spec = importlib.util.spec_from_file_location("gpu_validation", SCRIPT)
    gpu_validation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_validation)
    labels = [r["label"] for r in gpu_validation.target_records()]
    assert labels == [f"max:{t.name}" for t in committed_targets() if t.op.value != "gqa"] and len(labels) >= 40
