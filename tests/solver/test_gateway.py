"""The gateway's verdicts: a table of formulas with known answers, limits, SMT-LIB2 output."""

from __future__ import annotations


import pytest
import z3

from attnws.spec.command_line import EXIT_UNKNOWN
from attnws.solver import gateway
from tests.solver.commands import solver_parser
from attnws.solver.gateway import Limits, Verdict
from attnws.spec.errors import UsageError

x, y = z3.Ints("x y")

KNOWN = [
    pytest.param([x >= 0], x * x >= 0, Verdict.PROVED, id="prove(x >= 0 => x*x >= 0)"),
    pytest.param([x >= 3, x <= 5], x < 5, Verdict.REFUTED, id="prove(3 <= x <= 5 => x < 5)"),
    pytest.param([], True, Verdict.PROVED, id="prove(True)"),
    pytest.param([], False, Verdict.REFUTED, id="prove(False)"),
    pytest.param([x > 0, y > 0, x % 7 == 3], (x * y) % 7 != 0, Verdict.REFUTED, id="prove(x%7==3 => x*y%7 != 0)"),
]


@pytest.mark.parametrize("premises, claim, expected", KNOWN)
def test_known_verdicts(premises, claim, expected):
    answer = gateway.prove("known", premises, claim, Limits())
    assert answer.verdict is expected
    assert (answer.model is not None) == (expected is Verdict.REFUTED)


def test_refuted_model_violates_the_claim():
    answer = gateway.prove("model", [x >= 3, x <= 5], x < 5, Limits())
    assert answer.model == {"x": 5}


def test_tiny_rlimit_is_unknown_never_proved():
    hard = [x > 1, y > 1, x * x * x + y * y * y == 1729 * x * y + 7]
    answer = gateway.search("hard", hard, Limits(rlimit=1))
    assert answer.status == "unknown" and answer.verdict is Verdict.UNKNOWN
    assert answer.reason


def test_rlimit_spent_is_per_query():
    first = gateway.search("a", [x * x == 49, x > 0], Limits())
    second = gateway.search("b", [x * x == 49, x > 0], Limits())
    assert 0 < second.rlimit < 10 * max(first.rlimit, 1)


@pytest.mark.parametrize("verdicts, worst", [
    ([], Verdict.PROVED),
    ([Verdict.PROVED, Verdict.UNKNOWN], Verdict.UNKNOWN),
    ([Verdict.UNKNOWN, Verdict.REFUTED, Verdict.PROVED], Verdict.REFUTED),
], ids=["worst()", "worst(PROVED, UNKNOWN)", "worst(UNKNOWN, REFUTED, PROVED)"])
def test_worst_verdict_wins(verdicts, worst):
    assert Verdict.worst(verdicts) is worst


@pytest.mark.parametrize("kwargs", [{"rlimit": 0}, {"rlimit": -5}, {"timeout_ms": 0}],
                         ids=["Limits(rlimit=0)", "Limits(rlimit=-5)", "Limits(timeout_ms=0)"])
def test_invalid_limits_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        Limits(**kwargs)


def test_smt2_dir_writes_standalone_queries(tmp_path):
    gateway.search("written query", [x > 2, x < 4], Limits(smt2_dir=tmp_path))
    files = list(tmp_path.glob("*.smt2"))
    assert len(files) == 1
    text = files[0].read_text()
    assert "(check-sat)" in text and "declare-fun x" in text


def test_prove_with_a_tiny_rlimit_exits_3():
    ns = solver_parser().parse_args(["prove", "--rlimit", "1", "--theorem", "safe_bound", "--theorem", "reachability"])
    result = ns.handler(ns, lambda _: None)
    assert result.exit_code == EXIT_UNKNOWN
    assert result.json["verdict"] == "UNKNOWN"
    assert all(r["verdict"] in ("UNKNOWN", "PROVED") and r["counterexample"] is None for r in result.json["results"])


def test_a_query_that_outruns_its_wall_clock_ceiling_is_cancelled_and_unknown(monkeypatch):
    """The planted fault: a procedure that never stops on its rlimit (here: a ceiling of 0 s over
    a query Z3 cannot settle quickly) ends UNKNOWN, naming the flag, never as a verdict."""
    a, b, c = z3.Ints("a b c")
    monkeypatch.setattr(gateway, "SECONDS_PER_RLIMIT", 0.0)
    answer = gateway.search("cubes", [a > 0, b > 0, c > 0, a * a * a + b * b * b == c * c * c], Limits())
    assert answer.status == "unknown"
    assert "cancelled" in answer.reason and "--timeout-ms" in answer.reason


def test_the_ceiling_follows_the_timeout_or_the_rlimit():
    assert gateway.wall_ceiling(Limits(timeout_ms=2000)) == 3.0
    assert gateway.wall_ceiling(Limits(rlimit=40_000_000)) == 2 * gateway.wall_ceiling(Limits())
