"""A second opinion from cvc5: agreement on real queries, and a planted wrong "unsat" caught."""

from __future__ import annotations

from dataclasses import replace

import pytest
import z3

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.solver import gateway
from tests.solver.commands import run as _run
from attnws.solver.gateway import Limits
from attnws.solver.second_opinion import CONFIRMED, DISAGREEMENT, cvc5_check, second_opinion

pytest.importorskip("cvc5")

x, y = z3.Ints("x y")
SECOND = Limits(second_opinion="cvc5")


def test_cvc5_reads_the_scripts_z3_exports():
    unsat = gateway.search("unsat", [x > 2, x < 3], SECOND)
    sat = gateway.search("sat", [x * y == 12, x > 1, y > 1], SECOND)
    assert cvc5_check(unsat.smt2, SECOND) == ("unsat", "") and cvc5_check(sat.smt2, SECOND) == ("sat", "")
    opinion = second_opinion([unsat, sat], SECOND)
    assert opinion.verdict == CONFIRMED and opinion.confirmed == opinion.queries == 2


def test_a_wrong_unsat_is_a_disagreement_and_its_query_is_kept(tmp_path):
    """Plant: the query file of an unsat answer altered so that it is satisfiable."""
    real = gateway.search("real", [x > 2, x < 3], replace(SECOND, smt2_dir=tmp_path))
    planted = replace(real, smt2=real.smt2.replace("(< x 3)", "(< x 4)"))
    assert planted.smt2 != real.smt2
    opinion = second_opinion([planted], replace(SECOND, smt2_dir=tmp_path))
    assert opinion.verdict == DISAGREEMENT and "Z3 said unsat, cvc5 said sat" in opinion.disagreements[0]
    kept = [p for p in tmp_path.glob("*.smt2") if "(< x 4)" in p.read_text()]
    assert len(kept) == 1 and str(kept[0]) in opinion.disagreements[0]


def test_a_model_cvc5_rejects_is_a_disagreement(tmp_path):
    answer = gateway.search("sat", [x * y == 12, x > 1, y > 1], SECOND)
    wrong = replace(answer, model={"x": 5, "y": 5})
    opinion = second_opinion([wrong], replace(SECOND, smt2_dir=tmp_path))
    assert opinion.verdict == DISAGREEMENT and f"kept in {tmp_path}" in opinion.disagreements[0]


def test_prove_on_the_default_target_is_confirmed_by_cvc5():
    result = _run("prove", "--second-opinion", "cvc5", "--json")
    assert result.exit_code == EXIT_OK
    opinions = [r["second_opinion"] for r in result.json["results"]]
    assert all(o["verdict"] == CONFIRMED and o["queries"] == o["confirmed"] > 0 for o in opinions), opinions
    assert "confirmed by cvc5" in _run("prove", "--second-opinion", "cvc5", "--theorem", "safe_bound").text


def test_a_planted_wrong_unsat_fails_prove(monkeypatch, tmp_path):
    real = gateway.search

    def satisfiable(name, constraints, limits):
        answer = real(name, constraints, limits)
        if answer.status == "unsat" and name.endswith("/safe_bound"):
            return replace(answer, smt2="(declare-fun planted () Int)\n(assert (= planted 1))\n(check-sat)\n")
        return answer

    monkeypatch.setattr(gateway, "search", satisfiable)
    kept = ("--smt2-dir", str(tmp_path))  # the disagreeing query is kept there, not in a folder of its own
    result = _run("prove", "--second-opinion", "cvc5", "--theorem", "safe_bound", *kept, "--json")
    assert result.exit_code == EXIT_REJECTED
    opinion = result.json["results"][0]["second_opinion"]
    assert opinion["verdict"] == DISAGREEMENT and all(f"kept in {tmp_path}" in d for d in opinion["disagreements"])
    assert "DISAGREEMENT with cvc5" in _run("prove", "--second-opinion", "cvc5", "--theorem", "safe_bound", *kept).text


def test_the_ledger_records_a_confirmation_for_every_theorem():
    """Every committed verdict has cvc5's opinion, none disagrees, and what cvc5 leaves undecided
    is listed, never counted as agreement. cvc5's default budget decides most queries of the
    packed and MultiHeadAttention families (94 to 97 % when the ledger was written) but about half
    of GroupQueryAttention's (the unrolled split heuristic), so the floor is per family
    (PagedAttention's: 93 % when its entries were written)."""
    from attnws.solver.ledger import committed_targets, read_ledger

    ledger = read_ledger()
    family = {t.name: t.op.value for t in committed_targets()}
    asked: dict[str, list[int]] = {}
    for name, target in ledger["targets"].items():
        for result in [*target["theorems"].values(), target["tight"]["proof"]]:
            opinion = result.get("second_opinion")
            assert opinion is not None and not opinion["disagreements"], (name, result["theorem"])
            assert opinion["queries"] == opinion["confirmed"] + len(opinion["undecided"]), (name, result["theorem"])
            counts = asked.setdefault(family[name], [0, 0])
            counts[0] += opinion["confirmed"]
            counts[1] += opinion["queries"]
    floors = {"pa": 0.9, "pmha": 0.9, "mha": 0.9, "gqa": 0.5, "paged": 0.9}
    assert {op: confirmed / queries >= floors[op] for op, (confirmed, queries) in asked.items()} == \
        {op: True for op in floors}


def test_a_ledger_check_without_second_opinions_ignores_the_recorded_ones_at_any_depth():
    """The committed ledger records cvc5's opinion inside each pattern's result (a list); a check run
    without --second-opinion compares the verdicts and numbers, not the missing opinions."""
    from attnws.solver.ledger import ledger_differences

    opinion = {"solver": "cvc5", "queries": 3, "confirmed": 3, "verdict": "confirmed"}
    fresh = {"targets": {"t": {"patterns": {"patterns": [{"verdict": "PROVED", "max": 8}], "uncovered": None}}}}
    stored = {"targets": {"t": {"patterns": {"patterns": [{"verdict": "PROVED", "max": 8, "second_opinion": opinion}],
                                             "uncovered": None}}}}
    assert ledger_differences(stored, fresh) == []
    moved = {"targets": {"t": {"patterns": {"patterns": [{"verdict": "PROVED", "max": 9}], "uncovered": None}}}}
    assert len(ledger_differences(stored, moved)) == 1
