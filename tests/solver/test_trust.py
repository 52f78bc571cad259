"""Answers a user can trust: decided searches say so, verdicts do not depend on what ran before,
Ctrl-C is never swallowed, and targets keep everything they declare through the CLI."""

from __future__ import annotations

from dataclasses import replace
import threading
import _thread

import pytest
import z3

from attnws.spec.command_line import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNKNOWN, target_from_args
from attnws.solver import gateway, theorems
from tests.solver.commands import parse, run as _run
from attnws.solver.gateway import Limits
from attnws.solver.ledger import TARGETS_DIR, committed_targets
from attnws.solver.theorems import THEOREMS, prove_target
from attnws.spec.target import load_target

ORDER_TARGETS = ["bert-base-pmha-fp32-sm80", "small-head-pmha-fp16-sm80-trt-regime", "pa-fp16-sm86-odd-heads"]
PA_ATTENTION_BIAS = ["--op", "pa", "--dtype", "fp16", "--attn-bias", "--sm", "80", "--batch", "1..8", "--seq", "1..128",
                     "--heads", "1", "--head-size", "64", "--tokens", "1..1024"]


@pytest.mark.parametrize("name", ORDER_TARGETS)
def test_every_verdict_and_witness_is_the_same_alone_and_in_any_set(name):
    target = load_target(TARGETS_DIR / f"{name}.json")
    together = {r.theorem: r.as_dict(timing=False) for r in prove_target(target, names=list(THEOREMS))}
    backwards = {r.theorem: r.as_dict(timing=False) for r in
                 [THEOREMS[n](theorems.context(target)) for n in reversed(THEOREMS)]}
    for theorem in THEOREMS:
        alone = prove_target(target, names=[theorem])[0].as_dict(timing=False)
        assert alone == together[theorem] == backwards[theorem], theorem


def test_theorems_decided_on_several_processes_are_the_same_as_on_one():
    """`prove --jobs N` decides the theorems at once, then the patterns (handed the whole target's
    maximum): the results, witnesses included, are those of one process, in the same order."""
    from attnws.solver.parallel import prove_all

    target = load_target(TARGETS_DIR / "mha-decoder-kv-cache-fp16-sm90.json")
    one = [r.as_dict(timing=False) for r in prove_all(target, Limits(), None, 1)]
    two = [r.as_dict(timing=False) for r in prove_all(target, Limits(), None, 2)]
    assert one == two and len(one) == len(theorems.DEFAULT_THEOREMS) + len(target.patterns) == 12


def test_a_ledger_proven_on_several_processes_is_the_one_proven_on_one():
    """`prove --write-ledger --jobs N` proves N targets at once: the document, target order
    included, is the one a single process writes."""
    from attnws.solver.ledger import compute_ledger

    targets = [load_target(TARGETS_DIR / f"{name}.json") for name in ("pa-fp16-sm86-odd-heads", "phi-3-mini-fp16-sm89")]
    told: list[str] = []
    one, two = compute_ledger(targets), compute_ledger(targets, progress=told.append, jobs=2)
    assert one == two and list(two["targets"]) == [t.name for t in targets]
    assert told == [f"proved {t.name}" for t in targets]


def test_the_pa_attention_bias_pair_is_found_and_the_search_decided():
    result = _run("counterexamples", *PA_ATTENTION_BIAS, "--kind", "nonmonotonic", "--json")
    assert result.exit_code == EXIT_OK
    (search,) = result.json["searches"]
    assert search["status"] == "found" and search["complete"]
    seqs = sorted(record["seq"] for record in result.json["shapes"])
    assert seqs[1] - seqs[0] == 1 and seqs[1] <= 16, seqs


@pytest.mark.parametrize("kind", ["nonmonotonic", "naive-cascade"])
def test_an_undecided_search_never_says_none(kind):
    result = _run("counterexamples", *PA_ATTENTION_BIAS, "--kind", kind, "--rlimit", "1", "--json")
    assert result.exit_code == EXIT_UNKNOWN and not result.json["shapes"]
    assert [s["status"] for s in result.json["searches"]] == ["undecided"]
    assert "--rlimit" in result.json["searches"][0]["reason"]
    text = _run("counterexamples", *PA_ATTENTION_BIAS, "--kind", kind, "--rlimit", "1").text
    assert "undecided" in text and "none" not in text and " 0 " not in text


def test_only_the_searched_kind_is_reported():
    result = _run("counterexamples", *PA_ATTENTION_BIAS, "--kind", "nonmonotonic")
    assert "naive" not in result.text


def test_max_elements_keeps_every_witness_small():
    bound = 2_000_000
    result = _run("counterexamples", "--target", "bert-base-pmha-fp32-sm80", "--max-elements", str(bound), "--json")
    assert result.json["shapes"]
    for r in result.json["shapes"]:
        hv = r["v_head_size"]
        assert r["batch"] * r["heads"] * r["seq"] * (r["seq"] + 2 * r["head_size"] + hv) <= bound


def test_prove_reports_undecided_findings_with_the_flag_to_raise():
    result = _run("prove", *PA_ATTENTION_BIAS, "--theorem", "nonmonotonic_dispatch", "--rlimit", "1", "--json")
    assert result.exit_code == EXIT_UNKNOWN
    assert "--rlimit" in result.json["results"][0]["reason"]


HARD = [z3.Int("x") > 1, z3.Int("y") > 1,
        z3.Int("x") ** 3 + z3.Int("y") ** 3 == 1729 * z3.Int("x") * z3.Int("y") + 7]


def test_ctrl_c_inside_a_query_is_raised_not_swallowed():
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        gateway.search("hard", HARD, Limits(rlimit=gateway.MAX_RLIMIT))
    timer.cancel()
    assert gateway.search("after", [z3.Int("x") == 2], Limits()).status == "sat"


def test_an_interrupted_prove_reports_partial_results_and_exit_130(monkeypatch):
    def interrupted(ctx):
        raise KeyboardInterrupt

    monkeypatch.setitem(THEOREMS, "containment", interrupted)
    result = _run("prove", "--target", "bert-base-pmha-fp16-sm80", "--json")
    assert result.exit_code == EXIT_INTERRUPTED
    assert result.json["interrupted"] and not result.json["complete"] and result.json["verdict"] is None
    assert [r["theorem"] for r in result.json["results"]] == ["safe_bound", "reachability", "route_monotonicity"]
    text = _run("prove", "--target", "bert-base-pmha-fp16-sm80").text
    assert "partial" in text and "PROVED: " not in text


@pytest.mark.parametrize("target", committed_targets(), ids=lambda t: t.name)
def test_targets_keep_everything_they_declare_through_the_cli(target):
    assert target_from_args(parse("prove", "--target", target.name)) == target


def test_an_encoding_mismatch_is_one_line_naming_the_shape_exit_4(monkeypatch, capsys):
    from attnws import cli
    from attnws.solver import bounds

    real = bounds.estimate_exact

    def off_by_256(g, config):
        exact = real(g, config)
        return replace(exact, total_workspace_bytes=exact.total_workspace_bytes + 256)

    monkeypatch.setattr(bounds, "estimate_exact", off_by_256)
    code = cli.run(["prove", "--target", "bert-base-pmha-fp32-sm80", "--theorem", "tightness"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4 and len(err) == 1, err
    assert "please report" in err[0] and "B=" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize("folder", ["README.md", "/proc/nope"])
def test_an_unusable_smt2_dir_is_a_usage_error(folder, capsys):
    from attnws import cli

    assert cli.run(["prove", "--smt2-dir", folder]) == 2
    assert "--smt2-dir" in capsys.readouterr().err
