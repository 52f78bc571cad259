"""Issue 10, "The README's validate pipeline never finishes on a CPU": validate streams one result
per shape, estimates a run's cost first and refuses, without failing, a shape too large for the
simulator or for the memory limit."""

from __future__ import annotations

import argparse
import json
import time

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE
from attnws.kernels import budget, commands, validate
from attnws.spec.estimate import runtime_problem
from attnws.spec.footprint import footprint
from attnws.spec.hints import Geometry
from attnws.spec.problem import Backend, Op
from attnws.spec.recipe import recipe

from .helpers import attnws

TINY = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8, "label": "tiny"}
# The README's naive-cascade witness of bert-base-pmha-fp32-sm80: hours on the simulator.
NAIVE = {"op": "pmha", "dtype": "fp32", "batch": 36, "seq": 252, "tokens": 1, "heads": 12, "head_size": 64,
         "label": "naive-cascade"}


def test_a_shape_too_large_for_the_simulator_is_refused_and_not_a_failure():
    started = time.perf_counter()
    run = attnws("validate", "--shapes", "-", stdin=json.dumps([TINY, NAIVE]))
    assert time.perf_counter() - started < 30
    assert run.code == EXIT_OK, run.out
    assert "SKIP pmha fp32 T=1 B=36 S=252" in run.out
    assert "not run: too large for the simulator: about" in run.out and "run on a GPU or shrink" in run.out
    assert "passed: 2 result(s) on the simulator: 1 passed, 0 failed, 1 not run because too large (not failures" in run.out


def test_json_lines_one_result_per_shape_then_a_summary():
    lines = attnws("validate", "--shapes", "-", "--json", stdin=json.dumps([TINY, NAIVE])).lines()
    assert [(line["record"], line.get("status")) for line in lines] == [
        ("result", "passed"), ("result", "refused"), ("summary", None)]
    refused = lines[1]
    assert refused["passed"] and refused["refused"].startswith("too large for the simulator")
    assert refused["cost"]["simulator_seconds"] > 3600 and refused["stages"] == []
    assert lines[2]["counts"] == {"passed": 1, "failed": 0, "refused": 1, "rejected": 0} and lines[2]["passed"]


def test_a_shape_over_the_memory_limit_is_refused_before_allocation():
    run = attnws("validate", "--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8",
                 "--max-memory-bytes", "1000", "--json")
    [result, summary] = run.lines()
    assert run.code == EXIT_UNKNOWN and result["status"] == "refused" and result["allocations"] == []
    assert result["refused"].startswith("too large for this machine's memory") and summary["counts"]["refused"] == 1
    assert summary["passed"] and not summary["ran"]  # nothing failed, and nothing ran: exit 3


@pytest.mark.parametrize("flag, value", [("--max-sim-seconds", "0"), ("--max-sim-seconds", "nan"),
                                         ("--max-memory-bytes", "-1")])
def test_limits_must_be_positive(flag, value):
    assert attnws("validate", "--shapes", "-", flag, value, stdin="[]").code == EXIT_USAGE


def test_results_stream_as_each_shape_finishes(monkeypatch):
    """The first result is handed to the CLI before the second shape runs."""
    calls: list[str] = []
    real = validate.validate_shape

    def recorded(geometry, *args, **kwargs):
        calls.append(f"S={geometry.seq}")
        return real(geometry, *args, **kwargs)
    monkeypatch.setattr(validate, "validate_shape", recorded)
    monkeypatch.setattr(commands, "read_document", lambda source: [TINY, {**TINY, "seq": 5}])
    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers())
    ns = parser.parse_args(["validate", "--shapes", "x.json"])
    stream = ns.handler(ns, lambda message: None).stream
    assert next(stream).text.startswith("device:") and calls == []
    assert "S=4" in next(stream).text and calls == ["S=4"]
    assert "S=5" in next(stream).text and calls == ["S=4", "S=5"]
    assert next(stream).text.startswith("passed: 2 result(s)")


def _estimate(geometry: Geometry, backend: Backend) -> float:
    p = runtime_problem(geometry)
    from attnws.kernels.placement import place

    fp = footprint(p, backend)
    placement = place(p, fp, recipe(p, backend, trt_runner_available=True))
    return budget.run_cost(p, fp, placement, simulator=True).simulator_seconds


def test_the_cost_model_orders_shapes_by_their_work():
    small = _estimate(Geometry(Op.PMHA, 2, batch=1, seq=64, heads=1, head_size=8), Backend.UNFUSED)
    large = _estimate(Geometry(Op.PMHA, 2, batch=2, seq=128, heads=2, head_size=8), Backend.UNFUSED)
    assert 4 * small < large
    naive = _estimate(Geometry(Op.PMHA, 4, batch=36, seq=252, heads=12, head_size=64, tokens=1), Backend.UNFUSED)
    assert naive > 3600  # about 2 CPU-hours measured: refused under the default 60 s


def test_the_default_memory_limit_is_a_quarter_of_the_ram():
    total = budget.physical_memory_bytes()
    assert total is None or budget.default_max_memory_bytes() == total // 4
