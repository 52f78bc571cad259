"""MultiHeadAttention on the command line: its own flags, refused where they cannot apply, and the
commands end to end (dispatch, recipe, estimate from flags, from ORT's positional shapes, targets)."""

from __future__ import annotations

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from attnws.spec.target import load_target, target_from_dict
from attnws.spec.command_line import TARGETS_DIR

from .helpers import attnws

ONE = ["--batch", "2", "--seq", "128", "--heads", "12", "--head-size", "64"]


@pytest.mark.parametrize("argv, says", [
    (["dispatch", "--op", "pa", *ONE, "--kv-seq", "4"], "--kv-seq: only MultiHeadAttention (--op mha) has it"),
    (["dispatch", "--op", "pmha", *ONE, "--mask", "2d_key_padding"], "--mask: only MultiHeadAttention"),
    (["dispatch", "--op", "mha", *ONE, "--tokens", "4"], "--tokens: only PackedAttention (--op pa), "
                                                           "PackedMultiHeadAttention (--op pmha) and PagedAttention "
                                                           "(--op paged) have it"),
    (["dispatch", "--op", "pmha", *ONE, "--format", "cross"], "--format cross: PackedMultiHeadAttention takes"),
    (["dispatch", "--op", "mha", *ONE, "--format", "packed"], "--format packed: MultiHeadAttention takes"),
    (["dispatch", "--op", "mha", *ONE, "--format", "packed_kv", "--v-head-size", "32"],
     "the packed_kv format has one head size"),
    (["dispatch", "--op", "mha", *ONE, "--kv-seq", "1..8"], "takes one shape, not a range"),
    (["dispatch", "--op", "mha", *ONE, "--format", "packed_qkv", "--kv-seq", "64"],
     "--kv-seq 64 with --seq 128: packed QKV [B, S, N, 3, H] has one sequence length"),
    (["recipe", "--op", "mha", *ONE, "--format", "packed_qkv", "--kv-seq", "64", "--backend", "unfused"],
     "--kv-seq 64 with --seq 128"),
])
def test_mha_flags_that_cannot_apply_are_usage_errors(argv, says):
    run = attnws(*argv)
    assert run.code == EXIT_USAGE and says in run.err, run.err


def test_dispatch_explains_each_skipped_backend_and_shows_the_recipe():
    run = attnws("dispatch", "--op", "mha", *ONE, "--kv-seq", "64", "--mask", "1d_key_seq_len", "--json")
    doc = run.json()
    assert run.code == EXIT_OK and doc["backends"] == ["unfused"]
    reasons = {s["backend"]: s["reason"] for s in doc["skipped"]}
    assert list(reasons) == ["flash", "cudnn", "trt_cross", "trt", "mea"]
    assert "S = 128, L = 64" in reasons["trt"] and "key padding mask" in reasons["flash"]
    # qkv = 2 * 2 * 12 * ((128 + 64) * 64 + 64 * 64) = 786,432; each score region 2 * 2 * 12 * 128 * 64.
    assert doc["views"]["scores"] == [786_432, 393_216] and doc["attention_workspace_bytes"] == 786_432 + 2 * 393_216


def test_dispatch_runs_the_masked_d32_shape_on_trt():
    run = attnws("dispatch", "--op", "mha", "--batch", "1", "--seq", "100", "--heads", "4", "--head-size", "32",
                 "--mask", "1d_key_seq_len", "--json")
    assert run.code == EXIT_OK and run.json()["backends"] == ["trt"]


def test_dispatch_reports_a_runtime_failure():
    run = attnws("dispatch", "--op", "mha", "--batch", "1", "--seq", "1", "--kv-seq", "1025", "--heads", "4",
                 "--head-size", "32", "--mask", "1d_key_seq_len", "--unidirectional", "--json")
    assert run.code == EXIT_REJECTED and run.json()["status"] == "runtime_failure"
    assert "ComputeSoftmaxWithMask1D does not support causal" in run.json()["message"]


def test_estimate_from_positional_shapes_reads_the_cache_and_refuses_the_shared_buffer():
    shapes = '[[2,1,768],[2,1,768],[2,1,768],null,null,null,[2,12,100,64],[2,12,100,64]]'
    ok = attnws("estimate", "--op", "mha", "--heads", "12", "--with-present", "--input-shapes", shapes, "--json")
    assert ok.code == EXIT_OK and ok.json()["problem"]["past_sequence_length"] == 100
    missing_present = attnws("estimate", "--op", "mha", "--heads", "12", "--input-shapes", shapes, "--json")
    assert missing_present.code == EXIT_REJECTED and "present" in missing_present.json()["message"]
    shared = shapes[:-1] + ',[1]]'
    refused = attnws("estimate", "--op", "mha", "--heads", "12", "--with-present", "--input-shapes", shared, "--json")
    assert refused.code == EXIT_REJECTED and refused.json()["status"] == "unsupported"
    assert "past_sequence_length" in refused.json()["message"]


def test_estimate_text_names_every_route_and_what_the_bound_leaves_out():
    run = attnws("estimate", "--op", "mha", "--batch", "4", "--seq", "256", "--heads", "8", "--head-size", "64")
    assert run.code == EXIT_OK
    for route in ("flash", "cudnn", "trt_cross", "trt", "mea", "unfused"):
        assert f"\n  {route} " in run.out
    assert "softmax LSE" in run.out and "present key/value outputs are not workspace" in run.out


@pytest.mark.parametrize("path", sorted(TARGETS_DIR.glob("mha-*.json")), ids=lambda p: p.stem)
def test_committed_mha_targets_round_trip(path):
    target = load_target(path)
    assert target_from_dict(target.as_dict()) == target
