"""GroupQueryAttention through the shared commands (`attnws COMMAND --op gqa`, or `--target`
naming a GroupQueryAttention target) as a user runs them: ORT's estimate or why it declares none,
one shape's route and regions, the key-length drop #32453 reports found by the search, bad input
as one-line usage errors, and JSON for programs."""

from __future__ import annotations

import json

import pytest

from .helpers import REPR_MARKS, attnws

QWEN = ("--heads", "12", "--kv-heads", "2", "--head-size", "128")
PAIR = ("--heads", "2", "--kv-heads", "2", "--head-size", "64")


def test_estimate_is_ort_s_or_says_why_not():
    run = attnws("estimate", "--op", "gqa", "--batch", "1", *QWEN, "--seq", "4096", "--total-seq", "4096",
                 "--max-total-seq", "4096")
    assert run.code == 0 and "ORT's estimate: 1,635,778,816 B (1.5 GiB)" in run.out and "unfused:" in run.out
    unset = attnws("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "4096")
    assert unset.code == 1 and "ep.cuda.gqa_workspace_max_total_sequence_length (unset)" in unset.out
    on_h100 = attnws("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "4096",
                     "--max-total-seq", "4096", "--sm", "90", "--json")
    assert on_h100.code == 1 and on_h100.json()["status"] == "unavailable" and "cuDNN" in on_h100.json()["reason"]


def test_dispatch_names_the_route_its_splits_and_regions():
    run = attnws("dispatch", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13825", "--past",
                 "16384", "--env", "ORT_ENABLE_XQA=0", "--json")
    doc = run.json()
    assert run.code == 0 and doc["backend"] == "flash" and doc["fast_decode"] and doc["splits"] == 28
    last = max(doc["views"].values())
    assert doc["attention_workspace_bytes"] == last[0] + last[1] == 14848
    assert doc["skipped"][0] == {"backend": "xqa", "reason": "xqa: disabled by ORT_ENABLE_XQA=0"}
    text = attnws("dispatch", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13825", "--past",
                  "16384")
    assert text.code == 0 and "picks xqa\n" in text.out and not any(mark in text.out for mark in REPR_MARKS)
    flash = attnws("dispatch", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13825", "--past",
                   "16384", "--env", "ORT_ENABLE_XQA=0", "--env", "ORT_DISABLE_FLASH_DECODE=1")
    assert "picks flash (28 splits)" in flash.out and "softmax_lse_accumulator" in flash.out


def test_the_32453_drop_is_found_from_the_command_line():
    run = attnws("counterexamples", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13800..13900",
                 "--past", "16384", "--sm", "80", "--sm-count", "108", "--kind", "nonmonotonic", "--json")
    assert run.code == 0
    flash = next(s for s in run.json()["searches"] if s["route"] == "flash")
    assert [(d["total_seq"], d["splits"], d["next_splits"]) for d in flash["drops"]] == [(13824, 54, 28)]
    picked = next(s for s in run.json()["searches"] if s["route"] == "picked")
    assert picked["status"] == "none"  # XQA takes the decode step: its scratch follows the cache, not T


def test_prove_prints_each_maximum_beside_ort_s_estimate(tmp_path):
    """A small Qwen2.5-1.5B-shaped box (the committed target takes a minute; its run is in the note)."""
    box = {"name": "qwen-small", "op": "gqa", "heads": 12, "kv_heads": 2, "head_size": 128, "past": 64, "batch": "1..2",
           "seq": "1..2", "total_seq": "1..64", "rotary": True, "max_total_seq": 64,
           "patterns": {"decode": {"seq": "1..1"}}}
    path = tmp_path / "qwen-small.json"
    path.write_text(json.dumps(box))
    run = attnws("prove", "--op", "gqa", "--target", str(path), "--json")
    doc = run.json()
    assert run.code == 0 and doc["safe_bound"]["verdict"] == "PROVED" and doc["verdict"] == "PROVED"
    decode = next(m for m in doc["maxima"] if m["pattern"] == "decode")
    assert decode["witness"]["seq"] == 1 and decode["ratio"] == round(doc["ort_estimate_bytes"] / decode["bytes"], 2)
    from attnws.solver.gqa_commands import prove_text
    from attnws.spec.target import load_target
    lines = prove_text(load_target(path), {k: v for k, v in doc.items() if k not in ("schema_version", "ort_version")})
    line = next(x for x in lines if x.startswith("maximum of decode"))
    assert "(proven)" in line and "ORT's estimate is" in line and not any(m in line for m in REPR_MARKS)


@pytest.mark.parametrize("argv, says", [
    (("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "12"), "missing problem flags: --head-size"),
    (("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN), "missing problem flags: --total-seq"),
    (("estimate", "--op", "gqa", *QWEN, "--total-seq", "4096", "--target", "qwen2.5-1.5b-fp16-sm80"), "fixes the problem"),
    (("prove", "--op", "gqa", "--target", "no-such-model"), "no such file or committed target"),
    (("prove", "--op", "mha", "--target", "qwen2.5-1.5b-fp16-sm80"), "is GroupQueryAttention's (op gqa)"),
    (("dispatch", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "1..9"), "takes one shape"),
    (("estimate", "--op", "gqa", *QWEN, "--kv-head", "3"), "did you mean --kv-heads?"),
    (("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "12", "--kv-heads", "5", "--head-size",
      "128", "--total-seq", "64"), "num_heads % kv_num_heads == 0 was false"),
    (("estimate", "--op", "mha", "--batch", "1", "--seq", "1", "--heads", "2", "--head-size", "64", "--dtype", "bf16"),
     "only GroupQueryAttention runs bf16 here, not MultiHeadAttention"),
    (("estimate", "--op", "pmha", "--batch", "1", "--seq", "1", "--heads", "2", "--head-size", "64", "--kv-heads",
      "2"), "--kv-heads: only GroupQueryAttention (--op gqa) has it; not --op pmha"),
    (("counterexamples", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "64", "--kind",
      "runtime-failure"), "GroupQueryAttention's search is nonmonotonic"),
    (("plot", "--target", "qwen2.5-1.5b-fp16-sm80", "--sweep", "seq", "--json"), "plot does not take GroupQueryAttention"),
    (("estimate", "--target", "qwen2.5-1.5b-fp16-sm80", "--policy", "tight"), "are `attnws prove --op gqa`'s"),
    (("prove", "--target", "qwen2.5-1.5b-fp16-sm80", "--theorem", "safe_bound"), "--theorem does not apply"),
    (("recipe", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "64", "--backend", "trt"),
     "GroupQueryAttention has no trt route"),
])
def test_bad_input_is_one_line(argv, says):
    run = attnws(*argv)
    assert run.code in (1, 2) and says in run.err + run.out and "Traceback" not in run.err + run.out


def test_a_malformed_target_file_is_a_usage_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"op": "gqa", "heads": 12, "kv_heads": 2, "head_size": 128, "past": 64, "batch": 1,
                                "seq": 1, "total_seq": 64, "patterns": {"decode": {"past": 1}}}))
    run = attnws("estimate", "--target", str(path))
    assert run.code == 2 and "a GroupQueryAttention pattern narrows batch, seq or total_seq" in run.err


def test_a_second_opinion_gets_every_query_and_a_disagreement_fails(monkeypatch):
    """`--second-opinion` hands every decided query of `prove` to the second solver (cvc5 itself
    is exercised in tests/solver/test_second_opinion.py); a planted disagreement refutes."""
    from attnws.solver import gqa_commands
    from attnws.solver.gateway import Limits
    from attnws.solver.second_opinion import Opinion
    from attnws.spec.target import target_from_dict

    seen = []

    def planted(answers, limits, solver):
        seen.extend(answers)
        return Opinion(solver, len(answers), len(answers) - 1, disagreements=("gqa-safe-bound-tiny: planted",))

    monkeypatch.setattr(gqa_commands, "second_opinion", planted)
    box = target_from_dict({"name": "tiny", "op": "gqa", "heads": 4, "kv_heads": 2, "head_size": 64, "past": 64,
                            "batch": 1, "seq": 1, "total_seq": 64, "max_total_seq": 64})
    doc = gqa_commands.prove_box(box, Limits(rlimit=200_000_000, second_opinion="cvc5"))
    assert len(seen) == doc["second_opinion"]["queries"] >= 5
    assert {a.name.split("-tiny")[0] for a in seen} >= {"gqa-safe-bound", "gqa-kernel-contract", "gqa-maximum"}
    assert doc["verdict"] == "REFUTED"


def test_write_ledger_from_an_installed_package_says_why_first(monkeypatch):
    from attnws.solver import gqa_commands

    monkeypatch.setattr(gqa_commands, "in_source_checkout", lambda: False)
    monkeypatch.setattr(gqa_commands, "compute_gqa_ledger", lambda *a: pytest.fail("proved before refusing"))
    run = attnws("prove", "--op", "gqa", "--write-ledger")
    assert run.code == 2 and "source checkout" in run.err


def test_a_target_of_the_family_needs_no_op(tmp_path):
    """A committed GroupQueryAttention target's name, or a file of one, is the family's; the same
    line with `--op gqa` (either spelling) says the same."""
    by_name = attnws("estimate", "--target", "qwen2.5-1.5b-fp16-sm80", "--json")
    with_op = attnws("estimate", "--op=gqa", "--target", "qwen2.5-1.5b-fp16-sm80", "--json")
    assert by_name.code == with_op.code == 0 and by_name.json() == with_op.json()
    assert by_name.code == 0 and by_name.json()["op"] == "gqa" and by_name.json()["total_workspace_bytes"] > 0
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"op": "gqa", "heads": 4, "kv_heads": 2, "head_size": 64, "past": 64, "batch": 1,
                                "seq": 1, "total_seq": 64, "max_total_seq": 64}))
    assert "ORT's estimate:" in attnws("estimate", f"--target={path}").out
    run = attnws("estimate", "--target", str(path), "--json")
    assert run.code == 0 and run.json()["target"] == "node"


def test_recipe_and_targets_are_the_shared_commands():
    recipe = attnws("recipe", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13825", "--past",
                    "16384", "--backend", "flash", "--json")
    assert recipe.code == 0 and recipe.json()["backend"] == "flash" and recipe.json()["splits"] == 28
    listed = attnws("targets", "--json")
    gqa = {t["name"]: t for t in listed.json()["targets"] if t["op"] == "gqa"}
    assert listed.code == 0 and "qwen2.5-1.5b-fp16-sm80" in gqa and gqa["gemma-2-2b-bf16-sm80"]["dtype"] == "bf16"


def test_a_shape_no_route_runs_is_ort_s_error_not_a_crash():
    """bf16 on sm75 with smooth softmax: every backend of the cascade is passed over, and ORT fails."""
    argv = ("dispatch", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "16", "--dtype", "bf16",
            "--smooth-softmax", "--sm", "75")
    text, run = attnws(*argv), attnws(*argv, "--json")
    assert text.code == run.code == 1 and "Traceback" not in text.err + run.err
    assert "picks no backend" in text.out and "Unfused Group Query Attention not implemented yet." in text.out
    doc = run.json()
    assert (doc["status"], doc["failure_kind"], doc["backends"]) == ("runtime_failure", "no_route", [])
