"""Review finding: `attnws validate` reported attnws's own bugs as "rejected by ORT". The validator
wrapped the whole of `validate_shape` (ORT's checks, the recipe, the footprint, the kernels) in
`except WorkspaceError`, and `InternalError` is one, so an InternalError planted in the recipe or
the footprint printed "REJ ... rejected by ORT before any kernel runs" and exited 1.

Only ORT's own checks (building the runtime problem, its dispatch, a cascade with no route, the
recipe ORT sizes) reject a shape; an InternalError propagates (the CLI exits 4), and any other
error raised past ORT's checks, by attnws's own footprint, inputs or kernels, is raised as one."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import attnws.kernels.validate as validate
from attnws.kernels.commands import STATUSES, VERDICT
from attnws.spec import Op, QkvFormat, RuntimeConfig
from attnws.spec.command_line import EXIT_INTERNAL, EXIT_OK, EXIT_REJECTED
from attnws.spec.errors import InternalError, InvalidArgument
from attnws.spec.hints import Geometry

from tests.cli.helpers import attnws
from tests.kernels.gqa_shapes import gqa_geometry

TINY = Geometry(Op.PMHA, 4, batch=1, seq=4, heads=1, head_size=8, pmha_format=QkvFormat.SEPARATE)
TINY_FLAGS = ("--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8")
TINY_RECORD = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8, "label": "tiny"}
BUG = "planted: an invariant of attnws's own code does not hold"


def plant(monkeypatch: pytest.MonkeyPatch, where: str, error: Exception) -> None:
    """Make validate's `recipe` or `footprint` raise `error`."""
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(validate, where, broken)


@pytest.mark.parametrize("where", ["recipe", "footprint"])
def test_an_internal_error_propagates_from_validate_shape(monkeypatch, where):
    plant(monkeypatch, where, InternalError(BUG))
    with pytest.raises(InternalError, match=BUG):
        validate.validate_shape(TINY, RuntimeConfig.make(sm=80))


@pytest.mark.parametrize("where", ["recipe", "footprint"])
def test_the_cli_exits_4_on_an_internal_error_and_never_says_rejected(monkeypatch, where):
    plant(monkeypatch, where, InternalError(BUG))
    run = attnws("validate", *TINY_FLAGS)
    assert run.code == EXIT_INTERNAL, (run.out, run.err)
    assert "internal error (internal), a bug in attnws" in run.err and BUG in run.err
    assert "REJ" not in run.out and "rejected" not in run.out + run.err


def test_a_shapes_document_exits_4_on_an_internal_error_and_never_counts_it_rejected(monkeypatch):
    plant(monkeypatch, "recipe", InternalError(BUG))
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps([TINY_RECORD]))
    assert run.code == EXIT_INTERNAL, (run.out, run.err)
    assert not any(line.get("status") == "rejected" or line.get("record") == "summary" for line in run.lines())
    assert BUG in run.err


def test_an_error_of_attnws_s_own_past_ort_s_checks_is_internal_not_a_rejection(monkeypatch):
    """An InvalidArgument raised by the footprint (attnws's own statement, not ORT's check) once
    ORT accepted the shape and sized its recipe is a bug here, never ORT refusing the shape."""
    plant(monkeypatch, "footprint", InvalidArgument("head_size=8 must be a multiple of 16"))
    with pytest.raises(InternalError, match="ORT accepts the shape.*invalid_argument: head_size=8") as raised:
        validate.validate_shape(TINY, RuntimeConfig.make(sm=80))
    assert isinstance(raised.value.__cause__, InvalidArgument)
    run = attnws("validate", *TINY_FLAGS)
    assert run.code == EXIT_INTERNAL and "REJ" not in run.out


def test_the_unplanted_shape_passes():
    report = validate.validate_shape(TINY, RuntimeConfig.make(sm=80))
    assert report.status == "passed" and not report.rejected and report.error == ""
    assert attnws("validate", *TINY_FLAGS).code == EXIT_OK


def test_ort_s_own_rejection_is_still_rejected_with_its_message():
    """GroupQueryAttention with total_sequence_length 0: ORT's checks refuse it (builder)."""
    report = validate.validate_shape(gqa_geometry(1, 1, 2, 2, 64, 0), RuntimeConfig.make(sm=80))
    assert report.rejected and report.status == "rejected" and not report.passed and report.failures == ()
    assert report.error == "invalid_argument: total_sequence_length must be positive, got 0."
    assert report.stages == () and report.backend is None


def test_a_forced_backend_the_operator_has_no_route_for_is_still_rejected_by_ort_s_recipe():
    run = attnws("validate", *TINY_FLAGS, "--backend", "xqa")
    assert run.code == EXIT_REJECTED
    assert "REJ  pmha" in run.out and "invalid_argument: PackedMultiHeadAttention has no xqa route" in run.out


def test_a_rejected_report_is_one_ort_s_checks_made_not_any_report_with_an_error():
    report = validate.refusal({"op": "pmha"}, "simulator", InvalidArgument("ORT says no"))
    assert report.rejected and report.status == "rejected" and report.error == "invalid_argument: ORT says no"
    assert not validate.ValidationReport({"op": "pmha"}, "simulator").rejected


def test_the_gpu_script_uses_validate_s_own_words():
    """bench/gpu_validation.py's verdicts and status counts are `attnws validate`'s; a worker's
    error (an InternalError included) is a failure, never a rejection."""
    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_validation.py"
    spec = importlib.util.spec_from_file_location("gpu_validation_words", script)
    gpu_validation = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_validation)
    error = {"event": "error", "index": 0, "record": TINY_RECORD, "error": "InternalError: " + BUG}
    assert gpu_validation.result_line(error, 1).startswith(f"1/1 {VERDICT['failed']} ")
    assert not gpu_validation.entry_rejected(error)
    summary = gpu_validation.summarize([error])
    assert summary["failed_shapes"] == [0] and summary["rejected_shapes"] == []
    assert tuple(summary["counts"]) == STATUSES
