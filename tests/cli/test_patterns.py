"""The reservation a user can trust through the command line: the tight policy's proven maximum,
and memory patterns from flags and from target files."""

from __future__ import annotations

import json

from attnws.spec.command_line import EXIT_OK, EXIT_USAGE

from .helpers import attnws


def test_the_tight_root_of_bert_base_fp32_is_its_proven_maximum():
    doc = attnws("estimate", "--target", "bert-base-pmha-fp32-sm80", "--policy", "tight", "--json").json()
    tight = doc["tight"]
    assert tight["tight_total_bytes"] == 549_918_720 and tight["method"] == "proven maximum"
    assert tight["witness"]["batch"] == 64 and tight["witness"]["seq"] == 255 and round(tight["ratio"], 2) == 3.48
    assert tight["ort_total_bytes"] == 1_912_602_624


def test_a_committed_decode_pattern_is_proven_far_below_the_bound():
    doc = attnws("estimate", "--target", "mha-decoder-kv-cache-fp32-sm80", "--json").json()
    patterns = {p["details"]["pattern"]: p for p in doc["tight"]["patterns"]}
    decode = patterns["decode"]
    assert decode["verdict"] == "PROVED" and decode["details"]["ratio"] >= 10
    assert decode["details"]["witness"]["seq"] == 1
    assert doc["tight"]["uncovered"]["status"] == "found"


def test_patterns_from_flags_reach_estimate_and_prove():
    flags = ["--target", "mha-decoder-past-fp32-sm80", "--pattern", "decode:seq=1", "--pattern", "all:seq=1..512"]
    estimate = attnws("estimate", *flags, "--json")
    assert estimate.code == EXIT_OK
    assert [p["details"]["pattern"] for p in estimate.json()["tight"]["patterns"]] == ["decode", "all"]
    assert estimate.json()["tight"]["uncovered"] == {"status": "none", "witness": None}
    prove = attnws("prove", *flags)
    assert prove.code == EXIT_OK and "pattern decode (seq 1..1): its largest workspace is" in prove.out


def test_a_pattern_in_a_target_file_is_read(tmp_path):
    target = {"op": "mha", "dtype": "fp32", "batch": "1..2", "seq": "1..300", "past": "0..100", "heads": "2..2",
              "head_size": "16..16", "patterns": {"decode": {"seq": 1}}}
    path = tmp_path / "decoder.json"
    path.write_text(json.dumps(target))
    doc = attnws("estimate", "--target", str(path), "--json").json()
    assert doc["tight"]["patterns"][0]["details"]["dims"] == {"seq": "1..1"}


def test_a_pattern_outside_the_target_is_a_usage_error():
    run = attnws("estimate", "--target", "mha-decoder-past-fp32-sm80", "--pattern", "big:seq=1..4096")
    assert run.code == EXIT_USAGE and "is not inside the target's 1..512" in run.err
    run = attnws("estimate", "--target", "bert-base-pmha-fp32-sm80", "--pattern", "decode:past=0")
    assert run.code == EXIT_USAGE and "past is not a range of the target" in run.err
