"""Issue 34, item 4: `attnws validate` on a problem ORT refuses before any kernel runs reported
`"status": "failed"` and, in its summary, `"ran": true` with `counts.failed` 1, so a CI reading the
counts saw a kernel fault. A refused problem is "rejected" (ORT's message, nothing run), counted
apart from the failed shapes, and exits 1 (EXIT_REJECTED) as a rejected problem does elsewhere."""

from __future__ import annotations

import json

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED

from tests.cli.helpers import attnws

# The problem: total_sequence_length 0, which ORT's GroupQueryAttention checks refuse.
ZERO_TOTAL = ("--op", "gqa", "--heads", "2", "--kv-heads", "2", "--head-size", "64", "--batch", "1", "--seq", "1",
              "--total-seq", "0")
TINY = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8, "label": "tiny"}
BAD_TOKENS = {**TINY, "tokens": 99, "label": "bad"}  # more tokens than B * S: the builder refuses it


def test_a_problem_ort_refuses_is_rejected_nothing_ran_and_nothing_failed():
    run = attnws("validate", *ZERO_TOTAL, "--json")
    result, summary = run.lines()
    assert run.code == EXIT_REJECTED
    assert result["status"] == "rejected" and not result["passed"] and result["failures"] == []
    assert result["error"] == "invalid_argument: total_sequence_length must be positive, got 0."
    assert result["stages"] == [] and result["allocations"] == []
    assert summary["counts"] == {"passed": 0, "failed": 0, "refused": 0, "rejected": 1}
    assert not summary["ran"] and not summary["passed"]


def test_the_text_says_rejected_with_ort_s_message_never_fail():
    run = attnws("validate", *ZERO_TOTAL)
    assert run.code == EXIT_REJECTED
    assert "FAIL" not in run.out and "failed: rejected" not in run.out
    assert ("REJ  gqa fp16 B=1 S=1 T=0 P=0 N=2 Nk=2 H=64 sm80: rejected by ORT before any kernel runs (nothing run): "
            "invalid_argument: total_sequence_length must be positive, got 0.") in run.out
    assert "REJECTED: 1 result(s) on the simulator: 0 passed, 0 failed, 1 rejected by ORT" in run.out


def test_a_document_counts_a_rejected_shape_apart_from_a_passed_one():
    run = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps([TINY, BAD_TOKENS]))
    *results, summary = run.lines()
    assert [r["status"] for r in results] == ["passed", "rejected"]
    assert summary["counts"] == {"passed": 1, "failed": 0, "refused": 0, "rejected": 1}
    assert summary["ran"] and not summary["passed"] and run.code == EXIT_REJECTED
    alone = attnws("validate", "--shapes", "-", stdin=json.dumps([TINY]))
    assert alone.code == EXIT_OK


def test_a_shape_no_route_runs_is_rejected_too():
    """ORT's GroupQueryAttention cascade runs no route for a quantized cache without Flash: ORT's
    run fails before any kernel, which is a rejection of the shape, not a kernel fault."""
    quantized = ("--op", "gqa", "--batch", "1", "--seq", "4", "--heads", "2", "--kv-heads", "2", "--head-size", "64",
                 "--total-seq", "8", "--kv-quant", "int8", "--env", "ORT_DISABLE_FLASH_ATTENTION=1")
    run = attnws("validate", *quantized, "--json")
    result, summary = run.lines()
    assert run.code == EXIT_REJECTED and result["status"] == "rejected"
    assert result["error"].startswith("runtime_failure (no_route): ")
    assert summary["counts"]["rejected"] == 1 and summary["counts"]["failed"] == 0
