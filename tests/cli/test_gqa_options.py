"""GroupQueryAttention's node options as a user runs them: a head sink that is a constant
initializer (ORT prepacks it to float32 at session creation: no scratch) or a graph input (XQA
converts it into its workspace at every run: align256(4 N) bytes more, in ORT's estimate too), and
the one `options:` line every GroupQueryAttention text result carries, each option on or off."""

from __future__ import annotations

import json

import pytest

from attnws.spec.gqa.problem import HEAD_SINK_KINDS, HeadSinkStorage

from .helpers import attnws

# The issue's decode step: XQA on sm89 with rotary, 64 heads over 4 KV heads, a 4,160-row cache.
DECODE = ("--op", "gqa", "--batch", "3..3", "--seq", "1..1", "--heads", "64", "--kv-heads", "4", "--head-size", "64",
          "--total-seq", "64..64", "--past", "4160", "--sm", "89", "--rotary")
# The same node as a box, for ORT's estimate (which needs the session option).
DECODE_BOX = ("--op", "gqa", "--batch", "3", "--seq", "1", "--heads", "64", "--kv-heads", "4", "--head-size", "64",
              "--total-seq", "64", "--past", "4160", "--sm", "89", "--rotary", "--max-total-seq", "4160")
# The issue's Llama-3-8B-like box on an A100, without and with rotary.
LLAMA = ("--op", "gqa", "--heads", "32", "--kv-heads", "8", "--head-size", "128", "--batch", "4", "--seq", "8192",
         "--total-seq", "8192", "--max-total-seq", "8192", "--sm", "80")
SMALL = ("--op", "gqa", "--batch", "1..1", "--seq", "1..1", "--heads", "2", "--kv-heads", "2", "--head-size", "64",
         "--total-seq", "13..13", "--past", "64", "--sm", "80")
ALL_OFF = ("options: rotary off, packed QKV off, window none, softcap off, smooth softmax off, head sink none, "
           "KV cache unquantized, QK-norm off, cache shared past/present (capacity 64)")


def options_of(text: str) -> str:
    """Return the one options line of a text result (stripped)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("options: ")]
    assert len(lines) == 1, text
    return lines[0]


@pytest.mark.parametrize("kind, xqa_bytes", [((), 136_832), (("initializer",), 136_832), (("input",), 137_088)],
                         ids=["--head-sink", "--head-sink initializer", "--head-sink input"])
def test_xqa_scratch_follows_the_head_sink_s_kind(kind, xqa_bytes):
    run = attnws("dispatch", *DECODE, "--head-sink", *kind, "--json")
    doc = run.json()
    assert run.code == 0 and doc["backend"] == "xqa" and doc["backend_bytes"] == xqa_bytes
    converted = kind == ("input",)
    assert ("head_sink" in doc["views"]) == converted and doc["problem"]["head_sink_is_input"] == converted
    if converted:
        assert doc["views"]["head_sink"][1] == 256  # align256(4 N), after the rotary Q and K


def test_a_planted_input_sized_as_prepacked_fails_the_number_test(monkeypatch):
    """A graph input's sink sized as a prepacked one (the issue's bug) loses the conversion's 256 B."""
    monkeypatch.setitem(HEAD_SINK_KINDS, "input", HeadSinkStorage.PREPACKED_FP32)
    with pytest.raises(AssertionError):
        test_xqa_scratch_follows_the_head_sink_s_kind(("input",), 137_088)


def test_a_bare_head_sink_is_an_initializer():
    for command in (("dispatch", *DECODE), ("recipe", "--backend", "xqa", *DECODE), ("estimate", *DECODE_BOX)):
        bare, initializer = attnws(*command, "--head-sink"), attnws(*command, "--head-sink", "initializer")
        assert bare.code == initializer.code == 0 and bare.out == initializer.out
        assert attnws(*command, "--head-sink", "--json").json() == attnws(*command, "--head-sink", "initializer",
                                                                           "--json").json()


def test_ort_s_estimate_prepacks_an_initializer_and_sizes_an_input_s_conversion():
    docs = {kind: attnws("estimate", *DECODE_BOX, "--head-sink", kind, "--json").json()
            for kind in ("initializer", "input")}
    xqa = {kind: next(r["sized_bytes"] for r in doc["routes"] if r["backend"] == "xqa") for kind, doc in docs.items()}
    assert xqa["input"] - xqa["initializer"] == 256
    assert (docs["initializer"]["persistent_prepack_bytes"], docs["initializer"]["initialization_scratch_bytes"]) \
        == (256, 128)  # N * 4 float32 kept, N * 2 fp16 read once
    assert (docs["input"]["persistent_prepack_bytes"], docs["input"]["initialization_scratch_bytes"]) == (0, 0)
    text = attnws("estimate", *DECODE_BOX, "--head-sink")
    assert "head-sink prepack" in text.out and "256 B persistent, 128 B at session creation" in text.out


@pytest.mark.parametrize("value, says", [
    ("constant", "invalid choice 'constant' (choose from initializer, input)"),
    ("inputs", "did you mean 'input'?"),
])
def test_an_unknown_head_sink_kind_is_a_usage_error(value, says):
    run = attnws("dispatch", *DECODE, "--head-sink", value)
    assert run.code == 2 and run.out == "" and says in run.err and len(run.err.strip().splitlines()) <= 2


def test_the_head_sink_kind_is_said_in_the_problem_line():
    assert "rotary, head sink input, fp16" in attnws("dispatch", *DECODE, "--head-sink", "input").out
    assert "rotary, head sink, fp16" in attnws("dispatch", *DECODE, "--head-sink").out


@pytest.mark.parametrize("command", [("dispatch",), ("recipe", "--backend", "xqa"), ("estimate", "--exact")])
def test_every_gqa_text_result_names_its_options(command):
    run = attnws(*command, *SMALL)
    assert run.code == 0 and run.out.splitlines()[1] == f"  {ALL_OFF}"


def test_the_estimate_of_a_box_names_its_options_under_the_title():
    run = attnws("estimate", *SMALL, "--max-total-seq", "64")
    assert run.code == 0 and run.out.splitlines()[1] == f"  {ALL_OFF}"


def test_a_rejected_shape_still_names_its_options():
    run = attnws("dispatch", *SMALL[:12], "--total-seq", "300..300", "--past", "64", "--cache-layout", "shared")
    assert run.code == 1 and run.out.startswith("rejected (invalid_argument)") and options_of(run.out) == ALL_OFF


def test_a_shape_without_a_layout_takes_the_one_t_and_p_imply_and_says_it():
    """T > P: past and present cannot share one buffer, so the shape is read with a separate present."""
    run = attnws("dispatch", *SMALL[:12], "--total-seq", "300..300", "--past", "64")
    assert run.code == 1 and "past_sequence_length + kv_sequence_length for a dynamic cache" in run.out
    assert options_of(run.out) == ALL_OFF.replace("shared past/present (capacity 64)",
                                                  "separate past and present (present max(T, P) rows)")


@pytest.mark.parametrize("rotary", [False, True], ids=["no rotary", "--rotary"])
def test_the_issue_s_two_boxes_say_rotary_on_or_off(rotary):
    flags = ("--rotary",) if rotary else ()
    for command in (("estimate", *LLAMA), ("dispatch", *LLAMA[:8], "--batch", "4..4", "--seq", "8192..8192",
                                          "--total-seq", "8192..8192", "--sm", "80")):
        run = attnws(*command, *flags)
        line = options_of(run.out)
        assert run.code == 0 and line.startswith(f"options: rotary {'on' if rotary else 'off'}, packed QKV off")
        assert line.endswith("cache shared past/present (capacity 8,192)")


def test_every_option_on_is_said():
    run = attnws("recipe", "--backend", "xqa", "--op", "gqa", "--batch", "1..1", "--seq", "1..1", "--heads", "8",
                 "--kv-heads", "2", "--head-size", "64", "--total-seq", "30..30", "--past", "32", "--window", "32",
                 "--sliding-window-cache", "--softcap", "30", "--smooth-softmax", "--head-sink", "input", "--kv-quant",
                 "int8", "--rotary", "--packed-qkv", "--sm", "89")
    assert run.code == 0 and options_of(run.out) == (
        "options: rotary on, packed QKV on, window 32, softcap 30, smooth softmax on, head sink input (converted into "
        "the workspace at every run), KV cache int8 (per-tensor scales), QK-norm off, cache windowed, shared "
        "past/present (capacity 32, the window)")


def test_other_operators_have_no_options_line():
    run = attnws("dispatch", "--op", "pmha", "--batch", "1", "--seq", "128", "--heads", "12", "--head-size", "64")
    assert run.code == 0 and "options:" not in run.out


@pytest.mark.parametrize("command", [("prove", "--theorem", "composition"), ("counterexamples", "--kind", "naive-cascade")],
                         ids=["prove", "counterexamples"])
def test_the_solver_commands_say_the_options_too(command):
    text = attnws(*command, "--target", "phi-3-mini-fp16-sm89").out
    assert options_of(text).startswith("options: rotary on, packed QKV off, window none,")


def test_the_growing_cache_command_of_issue_33_runs_with_a_backend_and_bytes():
    """T = P + S with P = 6: past and present cannot share one buffer of 6 rows, so present is its
    own tensor (ORT's CPU engine runs it: tests/ort/test_ort_cpu_layouts.py); XQA needs the shared
    buffer, Flash takes it."""
    run = attnws("dispatch", "--op", "gqa", "--batch", "1..1", "--seq", "1..1", "--heads", "8", "--kv-heads", "2",
                 "--head-size", "64", "--total-seq", "7..7", "--past", "6", "--json")
    doc = json.loads(run.out)
    assert run.code == 0 and doc["backend"] == "flash" and doc["problem"]["kv_share_buffer"] is False
    assert doc["total_workspace_bytes"] == 288 and doc["splits"] == 1 and doc["fast_decode"] is False
    assert {"backend": "xqa", "reason": "xqa: past and present do not share one buffer"} in doc["skipped"]
    shared = attnws("dispatch", "--op", "gqa", "--batch", "1..1", "--seq", "1..1", "--heads", "8", "--kv-heads", "2",
                    "--head-size", "64", "--total-seq", "7..7", "--past", "6", "--cache-layout", "shared")
    assert shared.code == 1 and "cannot share the past buffer" in shared.out
