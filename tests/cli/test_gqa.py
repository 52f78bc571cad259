"""GroupQueryAttention through the shared commands (`attnws COMMAND --op gqa`, or `--target`
naming a GroupQueryAttention target) as a user runs them: ORT's estimate or why it declares none,
one shape's route and regions, the key-length drop #32453 reports found by the search, the one
engine's theorems, bad input as one-line usage errors, and JSON for programs."""

from __future__ import annotations

import json

import pytest

from .helpers import REPR_MARKS, attnws

QWEN = ("--heads", "12", "--kv-heads", "2", "--head-size", "128")
PAIR = ("--heads", "2", "--kv-heads", "2", "--head-size", "64")


def test_estimate_is_ort_s_or_says_why_not():
    run = attnws("estimate", "--op", "gqa", "--batch", "1", *QWEN, "--seq", "4096", "--total-seq", "4096",
                 "--max-total-seq", "4096")
    assert run.code == 0 and "total workspace      1,635,778,816 B (1.5 GiB)" in run.out
    assert "flash_fast_decode  yes" in run.out and "xqa                no" in run.out
    unset = attnws("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "4096")
    assert unset.code == 1 and "ep.cuda.gqa_workspace_max_total_sequence_length (unset)" in unset.out
    on_h100 = attnws("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *QWEN, "--total-seq", "4096",
                     "--max-total-seq", "4096", "--sm", "90", "--json")
    doc = on_h100.json()
    assert on_h100.code == 1 and doc["status"] == "unavailable" and "cuDNN" in doc["message"]
    reachable = {r["backend"] for r in doc["routes"] if r["reachable"]}
    assert "cudnn" in reachable  # the route ORT cannot size, named


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
    flash_only = ("--env", "ORT_ENABLE_XQA=0", "--env", "ORT_DISABLE_FLASH_DECODE=1")
    argv = ("counterexamples", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13800..13900",
            "--past", "16384", "--sm", "80", "--sm-count", "108", "--kind", "nonmonotonic")
    run = attnws(*argv, *flash_only, "--json")
    assert run.code == 0 and run.json()["searches"][0]["status"] == "found"
    pair = [s for s in run.json()["shapes"] if s["label"] == "nonmonotonic"]
    assert [(s["role"], s["total_seq"]) for s in pair] == [("smaller", 13824), ("larger", 13825)]
    assert "T=13824" in attnws(*argv, *flash_only).out
    xqa = attnws(*argv, "--json")  # XQA takes the decode step: its scratch follows the cache, not T
    assert xqa.code == 0 and xqa.json()["searches"][0]["status"] == "none"


def test_prove_runs_the_one_engine_s_theorems(tmp_path):
    """A small Qwen2.5-1.5B-shaped box: every theorem the other families have, in the same record,
    each decided; each pattern's maximum beside ORT's estimate."""
    box = {"name": "qwen-small", "op": "gqa", "heads": 12, "kv_heads": 2, "head_size": 128, "past": 64, "batch": "1..2",
           "seq": "1..2", "total_seq": "1..64", "rotary": True, "max_total_seq": 64,
           "patterns": {"decode": {"seq": "1..1"}}}
    path = tmp_path / "qwen-small.json"
    path.write_text(json.dumps(box))
    run = attnws("prove", "--target", str(path), "--json")
    doc = run.json()
    shared = attnws("prove", "--target", "mha-decoder-kv-cache-fp16-sm90", "--json").json()
    assert [r["theorem"] for r in doc["results"]] == [r["theorem"] for r in shared["results"]][:-2] + ["pattern_maximum"]
    verdicts = {r["theorem"]: r["verdict"] for r in doc["results"]}
    assert "UNKNOWN" not in verdicts.values() and verdicts["safe_bound"] == "PROVED"
    decode = doc["results"][-1]["details"]
    assert decode["witness"]["seq"] == 1 and decode["ratio"] == round(decode["estimate_bytes"] / decode["max_runtime_bytes"], 6)
    text = attnws("prove", "--target", str(path)).out
    line = next(x for x in text.splitlines() if "pattern decode" in x)
    assert "ORT's estimate over the whole target" in line and not any(m in line for m in REPR_MARKS)


def test_theorem_flags_and_the_tight_policy_apply_to_the_family(tmp_path):
    node = ("--op", "gqa", "--batch", "1..2", "--seq", "1..2", *PAIR, "--total-seq", "1..64", "--past", "64",
            "--max-total-seq", "64")
    one = attnws("prove", *node, "--theorem", "safe_bound", "--smt2-dir", str(tmp_path / "q"), "--json")
    assert one.code == 0 and [r["theorem"] for r in one.json()["results"]] == ["safe_bound"]
    assert list((tmp_path / "q").glob("*.smt2"))
    tight = attnws("estimate", *node, "--policy", "tight", "--json")
    assert tight.code == 0 and tight.json()["tight"]["method"] == "proven maximum"
    exact = attnws("estimate", "--op", "gqa", "--batch", "1", "--seq", "1", *PAIR, "--total-seq", "13825", "--past",
                   "16384", "--env", "ORT_ENABLE_XQA=0", "--exact", "--json")
    assert exact.code == 0 and exact.json()["classification"] == "exact" and exact.json()["total_workspace_bytes"] == 14848


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
     "only GroupQueryAttention and PagedAttention run bf16 here, not MultiHeadAttention"),
    (("estimate", "--op", "pmha", "--batch", "1", "--seq", "1", "--heads", "2", "--head-size", "64", "--kv-heads",
      "2"), "--kv-heads: only GroupQueryAttention (--op gqa) and PagedAttention (--op paged) have it; not --op pmha"),
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
    """`--second-opinion` hands every decided query of a GroupQueryAttention theorem to the second
    solver, as for every family (cvc5 itself: tests/solver/test_second_opinion.py); a planted
    disagreement refutes."""
    from attnws.solver import results
    from attnws.solver.gateway import Limits
    from attnws.solver.second_opinion import Opinion
    from attnws.solver.theorems import prove_target
    from attnws.spec.target import target_from_dict

    seen = []

    def planted(answers, limits, solver):
        seen.extend(answers)
        return Opinion(solver, len(answers), len(answers) - 1, disagreements=("planted",))

    monkeypatch.setattr(results, "second_opinion", planted)
    box = target_from_dict({"name": "tiny", "op": "gqa", "heads": 4, "kv_heads": 2, "head_size": 64, "past": 64,
                            "batch": 1, "seq": 1, "total_seq": 64, "max_total_seq": 64})
    [result] = prove_target(box, Limits(second_opinion="cvc5"), ["safe_bound"])
    assert seen and all(a.name.startswith("tiny/safe_bound") for a in seen)
    assert result.verdict.value == "PROVED" and result.failing_verdict.value == "REFUTED"


def test_a_target_of_the_family_needs_no_op(tmp_path):
    """A GroupQueryAttention target file is the family's; the same line with `--op gqa` (either
    spelling) says the same, and another operator's --op is refused by name."""
    path = tmp_path / "node.json"
    path.write_text(json.dumps({"op": "gqa", "heads": 4, "kv_heads": 2, "head_size": 64, "past": 64, "batch": 1,
                                "seq": 1, "total_seq": 64, "max_total_seq": 64}))
    by_file = attnws("estimate", "--target", str(path), "--json")
    with_op = attnws("estimate", "--op=gqa", f"--target={path}", "--json")
    assert by_file.code == with_op.code == 0 and by_file.json() == with_op.json()
    assert by_file.json()["op"] == "gqa" and by_file.json()["total_workspace_bytes"] > 0
    assert "estimate for node: GroupQueryAttention" in attnws("estimate", f"--target={path}").out


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


def test_a_maximum_that_leaves_shapes_out_says_so_in_words():
    """On an H100 cuDNN takes the prompts and no recipe sizes it: the proven maximum covers the
    shapes on routes with a recipe, and the text says which shapes it leaves out, with one."""
    text = attnws("prove", "--target", "llama-3-8b-fp16-sm90", "--theorem", "tightness").out
    assert "the largest workspace any valid shape on a route with a recipe needs is 369,024 B" in text
    assert "left out: the shapes that take cudnn, such as B=1 S=1 P=8192 T=1 N=32 Nk=8 H=128" in text
