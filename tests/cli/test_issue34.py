"""Issue 34, item 9: `plot` says why a number is missing (the estimate's reason, as `estimate`
gives it), heads a compared configuration with what it plots, `prove --second-opinion` never
lets an undecided query read as agreement, and `targets` fits 100 columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, TARGETS_DIR

from .helpers import attnws

# MultiHeadAttention fp32 up to S = 65535: the unfused GEMM stride S * T overflows int32 at the maximum.
MHA_OVERFLOW = ["--op", "mha", "--dtype", "fp32", "--batch", "4", "--seq", "65535", "--heads", "12",
                "--head-size", "64"]
# A past without the present outputs, which ORT refuses: no shape runs.
MHA_NO_PRESENT = {"name": "mha-past-without-present", "op": "mha", "dtype": "fp16", "batch": 2, "seq": 4,
                  "heads": "2..2", "head_size": "8..8", "with_past": True, "with_present": False}
SMALL_PMHA = ["--op", "pmha", "--batch", "2", "--seq", "8", "--heads", "2", "--head-size", "8"]
PMHA_H100 = {"name": "pmha-h100", "op": "pmha", "dtype": "fp16", "batch": 2, "seq": 8, "heads": "2..2",
             "head_size": "8..8", "sm": 90}


def problem_args(problem: list[str] | dict[str, Any], folder: Path) -> list[str]:
    """Return the command-line words of a problem: flags as they are, a target document as its file."""
    if isinstance(problem, list):
        return problem
    path = folder / "target.json"
    path.write_text(json.dumps(problem))
    return ["--target", str(path)]


@pytest.mark.parametrize("problem, sweep", [(MHA_OVERFLOW, "batch"), (MHA_NO_PRESENT, "seq")],
                         ids=["int32-stride-overflow", "past-without-present"])
def test_an_mha_plot_says_why_its_estimate_is_unavailable_as_estimate_does(problem, sweep, tmp_path):
    """The estimate's reason word for word, and no missing number of the report left as "n/a"
    (where no shape runs: the runtime and the proven maximum)."""
    given = problem_args(problem, tmp_path)
    estimate = attnws("estimate", *given)
    assert estimate.code == EXIT_REJECTED
    reason = next(line for line in estimate.out.splitlines() if line.startswith("  unavailable: "))
    plot = attnws("plot", *given, "--sweep", sweep, "--out", str(tmp_path / "line.svg"))
    assert plot.code == EXIT_OK
    assert f"  attnws's AOT estimate unavailable: {reason.removeprefix('  unavailable: ')}\n" in plot.out
    assert not [line for line in plot.out.splitlines() if "n/a" in line and not line.startswith("wrote ")], plot.out


def test_a_compared_configuration_other_than_the_target_s_says_so(tmp_path):
    """`--compare sm=80,90` on an sm90 target: the sm80 section is headed by what it plots, the
    target under sm80, with the target's own setting; the sm90 section is the target's own."""
    plot = attnws("plot", *problem_args(PMHA_H100, tmp_path), "--sweep", "batch", "--compare", "sm=80,90",
                  "--out", str(tmp_path / "compared.svg"))
    assert plot.code == EXIT_OK
    lines = plot.out.splitlines()
    assert lines[0] == "sm80 (not the target's own configuration, which has sm90):"
    assert lines[1].startswith("  pmha-h100 under sm80: PackedMultiHeadAttention fp16; sm80; ")
    own = lines.index("sm90 (the target's own configuration):")
    assert lines[own + 1].startswith("  pmha-h100: PackedMultiHeadAttention fp16; sm90; ")


def test_a_compared_environment_names_the_target_s_own_value(tmp_path):
    env = "ORT_DISABLE_FLASH_ATTENTION"
    plot = attnws("plot", *SMALL_PMHA, "--sweep", "batch", "--compare", f"env={env}=1,{env}=0",
                  "--out", str(tmp_path / "compared.svg"))
    assert plot.code == EXIT_OK
    assert plot.out.splitlines()[0] == f"{env}=1 (not the target's own configuration, which has {env} unset):"


def test_undecided_second_opinions_are_not_called_agreement():
    """cvc5 with a tiny budget decides some queries and leaves others undecided: the verdict stays
    Z3's (exit 0), and the words say the undecided queries are not confirmations."""
    pytest.importorskip("cvc5")
    argv = ["prove", *SMALL_PMHA, "--theorem", "safe_bound", "--theorem", "containment",
            "--second-opinion", "cvc5", "--second-opinion-rlimit", "2000"]
    run, doc = attnws(*argv), attnws(*argv, "--json").json()
    assert run.code == EXIT_OK
    opinions = [r["second_opinion"] for r in doc["results"]]
    confirmed, queries = sum(o["confirmed"] for o in opinions), sum(o["queries"] for o in opinions)
    undecided = sum(len(o["undecided"]) for o in opinions)
    assert undecided and confirmed + undecided == queries
    for o in opinions:
        if o["undecided"]:
            assert (f"second opinion: cvc5 confirmed {o['confirmed']} of {o['queries']} queries; "
                    f"{len(o['undecided'])} undecided, not confirmed") in run.out
    summary = run.out.splitlines()[-2]
    assert summary.startswith(f"second opinion (cvc5): {confirmed} of {queries} decided queries confirmed; "
                              f"{undecided} undecided, which is not agreement")


def test_targets_fit_100_columns_and_keep_every_description_whole():
    run, doc = attnws("targets"), attnws("targets", "--json").json()
    assert run.code == EXIT_OK
    lines = run.out.splitlines()
    assert lines[1] == f"  {TARGETS_DIR}"  # a folder's path is not broken, however long
    assert [line for line in lines[:1] + lines[2:] if len(line) > 100] == []
    listed = " ".join(line.strip() for line in lines)
    for target in doc["targets"]:
        assert f"{target['name']} " in listed and target["description"] in listed, target["name"]
