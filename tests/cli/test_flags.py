"""Issue 10, "Input silently ignored or misread" and "Head counts read as ranges": a flag that
cannot apply is a usage error naming it and why; heads are exact, head sizes exact when bare."""

from __future__ import annotations

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_USAGE, KNOWN_SMS

from .helpers import attnws

ONE = ["--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8"]


@pytest.mark.parametrize("argv, says", [
    (["estimate", "--target", "bert-large-pmha-fp16-sm90", "--op", "mha"],
     "--op mha: --target bert-large-pmha-fp16-sm90 is PackedMultiHeadAttention's (op pmha)"),
    (["prove", "--target", "bert-large-pmha-fp16-sm90", "--batch", "4"], "--batch cannot be combined with it"),
    (["dispatch", "--op", "pmha", *ONE, "--env", "ORT_DISABLE_FUSED_ATENTION=1"],
     "did you mean 'ORT_DISABLE_FUSED_ATTENTION'?"),
    (["dispatch", "--op", "pmha", *ONE, "--env", "PATH=/usr/bin"], "not an environment variable ORT reads"),
    (["dispatch", "--op", "pmha", *ONE, "--env", "ORT_DISABLE_FLASH_ATTENTION=maybe"], "ORT 1.31.1 cannot parse it"),
    (["recipe", "--op", "pa", "--backend", "mea", *ONE, "--format", "separate"],
     "--format: only PackedMultiHeadAttention (--op pmha), MultiHeadAttention (--op mha), GroupQueryAttention "
     "(--op gqa) and PagedAttention (--op paged) have it; not --op pa"),
    (["recipe", "--op", "pa", "--backend", "mea", *ONE, "--qkv-bias"], "--qkv-bias: only PackedMultiHeadAttention"),
    (["estimate", "--op", "pmha", *ONE, "--qkv-hidden-sizes", "8,8,8"],
     "--qkv-hidden-sizes: only PackedAttention (--op pa) has it; not --op pmha"),
    (["estimate", "--op", "pmha", *ONE, "--input-hidden", "8"], "--input-hidden: only PackedAttention"),
    (["estimate", "--sdpa-kernel", "999"], "bit(s) 128 are not defined by ORT 1.31.1"),
    (["estimate", "--sdpa-kernel", "1024"], "bit(s) 1024 are not defined by ORT 1.31.1"),
    (["estimate", "--sdpa-kernel", "-1"], "non-negative"),
    (["estimate", "--sm", "999"], "--sm 999: not a compute capability attnws models"),
    (["estimate", "--sm", "87"], "known: 75, 80, 86, 89, 90, 120"),
    (["estimate", "--sm", "100"], "on sm70 and sm100 its kernels cannot launch"),
    (["dispatch", "--op", "pmha", "--batch", "1", "--seq", "1..512", "--heads", "12", "--head-size", "64"],
     "--seq 1..512: dispatch takes one shape, not a range"),
    (["recipe", "--op", "pmha", "--backend", "mea", "--batch", "1..2", "--seq", "4", "--heads", "1", "--head-size", "8"],
     "recipe takes one shape"),
    (["validate", "--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8..16"],
     "validate takes one shape"),
    (["estimate", "--exact", "--op", "pmha", "--batch", "1", "--seq", "1..4", "--heads", "1", "--head-size", "8"],
     "estimate --exact takes one shape"),
    (["estimate", "--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1..16", "--head-size", "8"],
     "num_heads is a node attribute"),
    (["estimate", "--op", "pmha", *ONE, "--v-head-size", "16"], "add --format separate"),
    (["estimate", "--op", "pmha", *ONE, "--attn-bias-broadcast-batch"], "needs --attn-bias"),
    (["estimate", "--op", "pmha", "--heads", "2", "--batch", "2", "--input-shapes", "[]"],
     "--batch cannot be combined with it"),
    (["estimate", "--exact", "--target", "bert-base-pmha-fp16-sm80"], "use one"),
    (["estimate", "--exact", "--op", "pmha", *ONE, "--policy", "tight"], "does not apply to --exact"),
    (["validate", "--shapes", "-", "--sm", "90"], "carries its own device and options"),
    (["estimate", "--target", "bert-large-pmha-fp16-sm9"],
     "did you mean one of bert-large-pmha-fp16-sm90, bert-large-pmha-fp16-sm90-no-flash-env?"),
    (["estimate", "--heads-size", "4"], "did you mean --head-size?"),
    (["estmate"], "did you mean 'estimate'?"),
    (["estimate", "--op", "pmh"], "did you mean 'pmha'?"),
    (["recipe", "--op", "pmha", "--backend", "flsh", *ONE], "did you mean 'flash'?"),
    (["estimate", "--tok", "4"], "unrecognized argument"),  # no abbreviations: --tok is not --tokens
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_flag_that_cannot_apply_is_a_usage_error(argv, says):
    run = attnws(*argv, stdin="[]")
    assert run.code == EXIT_USAGE, (run.code, run.out, run.err)
    assert says in run.err and "Traceback" not in run.err
    assert run.out == ""


def test_known_sms_are_those_the_wheel_carries_kernels_for():
    assert KNOWN_SMS == (75, 80, 86, 89, 90, 120)
    for sm in KNOWN_SMS:
        assert attnws("estimate", "--sm", str(sm)).code == EXIT_OK


def test_config_flags_apply_on_top_of_a_target_and_env_adds_to_its_own():
    run = attnws("estimate", "--target", "bert-large-pmha-fp16-sm90-no-flash-env", "--sm", "80", "--json")
    assert run.code == EXIT_OK
    doc = run.json()
    flash = next(r for r in doc["routes"] if r["backend"] == "flash")
    assert not flash["reachable"]  # the target's ORT_DISABLE_FLASH_ATTENTION=1 still applies on sm80


def test_recipe_for_a_backend_dispatch_never_picks_says_so():
    run = attnws("recipe", "--op", "pmha", "--backend", "flash", "--sm", "75", *ONE)
    assert run.code == EXIT_OK and "attention allocation" in run.out
    assert "note: dispatch can never pick Flash on sm75: Flash needs compute capability 8.0 or newer" in run.out
    doc = attnws("recipe", "--op", "pmha", "--backend", "trt", "--sm", "120", *ONE, "--json").json()
    assert doc["notes"] == ["dispatch can never pick TRT fused on sm120: ORT has no TRT fused kernel for it"]


def test_recipe_for_a_backend_dispatch_skips_for_this_shape_says_why():
    doc = attnws("recipe", "--op", "pmha", "--backend", "flash", "--sm", "80", "--batch", "1", "--seq", "512",
                 "--heads", "12", "--head-size", "64", "--json").json()
    assert doc["notes"] == ["ORT's dispatch picks trt for this shape, not flash "
                            "(flash: packed QKV needs S >= 513, S = 512)"]


def test_heads_and_bare_head_sizes_are_exact_so_the_readme_tight_example_saves_bytes():
    argv = ["estimate", "--op", "pmha", "--batch", "8", "--seq", "1..512", "--heads", "16", "--head-size", "64",
            "--sm", "80", "--policy", "tight", "--json"]
    tight = attnws(*argv).json()["tight"]
    assert tight["verdict"] == "PROVED" and tight["bytes_saved"] == 159_383_552
    text = attnws(*argv[:-1]).out
    assert ("tight policy: reserve 0 B, the proven maximum over every valid shape, needed at B=1 S=1 N=16 H=64 T=1 "
            "(trt); ORT's root 159,383,552 B (152.0 MiB)") in text


def test_a_head_size_range_is_written_lo_hi_and_leaves_orts_estimate_unchanged():
    exact = attnws("estimate", "--op", "pmha", "--batch", "8", "--seq", "512", "--heads", "16", "--head-size", "64",
                   "--json").json()
    ranged = attnws("estimate", "--op", "pmha", "--batch", "8", "--seq", "512", "--heads", "16", "--head-size",
                    "1..64", "--json").json()
    assert exact["total_workspace_bytes"] == ranged["total_workspace_bytes"] == 159_383_552
    tight = attnws("estimate", "--op", "pmha", "--batch", "8", "--seq", "512", "--heads", "16", "--head-size",
                   "1..64", "--policy", "tight", "--json").json()["tight"]
    # H = 63 (no TRT kernel, not a multiple of 8 for MEA) runs unfused: the largest shape needs
    # all but the 1..64 range's rounding of ORT's unfused route.
    assert tight["method"] == "proven maximum" and tight["witness"]["head_size"] == 63
    assert tight["tight_total_bytes"] == 158_990_336 and tight["bytes_saved"] == 393_216


def test_batch_seq_and_tokens_stay_maxima():
    from attnws.spec.command_line import parse_dim
    from attnws.spec.target import DimRange

    assert parse_dim("512", "seq") == DimRange(1, 512) and parse_dim("8", "batch") == DimRange(1, 8)
    assert parse_dim("4096", "tokens") == DimRange(1, 4096) and parse_dim("0", "batch") == DimRange(0, 0)
    assert parse_dim("64", "head_size") == DimRange(64, 64) and parse_dim("16", "heads") == DimRange(16, 16)
    assert parse_dim("8..64", "head_size") == DimRange(8, 64) and parse_dim("512..512", "seq") == DimRange(512, 512)


def test_model_takes_static_dimensions_as_exact_so_tight_saves_bytes(tmp_path):
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path / "enc.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=2)), str(path))
    run = attnws("model", str(path), "--dim", "batch=8", "--dim", "seq=512", "--dim", "token_count=4096",
                 "--dim", "batch_plus_1=9", "--policy", "tight", "--json")
    checks = run.json()["checks"]
    assert run.code == EXIT_OK
    assert {c["tight"]["bytes_saved"] for c in checks.values()} == {119_537_664}
