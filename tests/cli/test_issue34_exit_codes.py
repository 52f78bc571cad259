"""Issue 34, items 2, 3, 5 and 6: one exit code per kind of error, in every command.

A problem ORT rejects is exit 1 whichever command meets it, quoted as ORT's check (as `dispatch`
quotes it), with no internal name; a file the command line names that cannot be read is a usage
error (exit 2), a model file that is read but is not a valid model exit 1 ("bad model");
`--window -1`, ORT's default, means no window; a `--pattern` that misses a model node's S says so
in `prove`'s words; `--max-total-seq` has one domain everywhere (0..INT32_MAX), is refused where
nothing reads it, and when it is missing the message names the flag (and, with a window, what
`--sliding-window-cache` would change)."""

from __future__ import annotations

import json

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from attnws.spec.limits import INT32_MAX

from .helpers import attnws

NODE = ("--op", "gqa", "--head-size", "64", "--batch", "1", "--seq", "1", "--total-seq", "64")
GOOD = (*NODE, "--heads", "4", "--kv-heads", "2")
BOUND = ("--max-total-seq", "64")
COMMANDS = {
    "estimate": ("estimate",), "dispatch": ("dispatch",), "recipe": ("recipe", "--backend", "flash"),
    "prove": ("prove", "--theorem", "safe_bound"), "counterexamples": ("counterexamples", "--kind", "nonmonotonic"),
    "plot": ("plot", "--sweep", "seq"), "validate": ("validate",),
}
# The commands that read a box (a target), which take the session bound beside the problem.
BOX_COMMANDS = ("estimate", "prove", "counterexamples", "plot")


def rejected_words(run) -> str:
    """The words after "rejected (STATUS): " (or validate's "STATUS: ") of a rejected run."""
    text = run.out + run.err
    for marker in ("rejected (invalid_argument): ", ": invalid_argument: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    raise AssertionError(f"not rejected as invalid_argument: {text}")


# -- item 2: a problem ORT rejects is exit 1 everywhere, quoted as ORT's check ---------------------

ORT_REJECTS = {
    "kv-heads-not-dividing-heads": ("--heads", "4", "--kv-heads", "3"),
    "kv-heads-0": ("--heads", "4", "--kv-heads", "0"),
    "heads-0": ("--heads", "0", "--kv-heads", "2"),
    "kv-heads-above-heads": ("--heads", "2", "--kv-heads", "4"),
    "heads-int32-max": ("--heads", str(INT32_MAX), "--kv-heads", "1"),
    "window-0": ("--heads", "4", "--kv-heads", "2", "--window", "0"),
}


@pytest.mark.parametrize("node", ORT_REJECTS.values(), ids=ORT_REJECTS.keys())
@pytest.mark.parametrize("command", COMMANDS, ids=COMMANDS.keys())
def test_a_problem_ort_rejects_is_exit_1_in_every_command_with_ort_s_check(command, node, tmp_path):
    argv = [*COMMANDS[command], *NODE, *node]
    if command == "plot":
        argv += ["--out", str(tmp_path / "line.svg")]
    run = attnws(*argv)
    check = rejected_words(attnws("dispatch", *NODE, *node))  # ORT's check, as dispatch quotes it
    assert run.code == EXIT_REJECTED, (run.out, run.err)
    assert check in run.out + run.err
    assert "usage error" not in run.err and "custom" not in run.out + run.err


def test_the_issue_s_estimate_line_is_exit_1_as_dispatch_is():
    issue = ("--op", "gqa", "--heads", "4", "--kv-heads", "3", "--head-size", "64", "--batch", "1", "--seq", "1",
             "--total-seq", "64")
    estimate, dispatch = attnws("estimate", *issue, *BOUND), attnws("dispatch", *issue)
    assert estimate.code == dispatch.code == EXIT_REJECTED
    assert estimate.out.startswith("rejected (invalid_argument): the node at its maxima fails ORT's check: "
                                   "GroupQueryAttention constructor: ")
    assert rejected_words(dispatch) in estimate.out and not estimate.err


def test_a_rejected_box_is_a_json_document_too():
    run = attnws("estimate", *NODE, *ORT_REJECTS["kv-heads-0"], *BOUND, "--json")
    assert run.code == EXIT_REJECTED and run.json()["status"] == "invalid_argument"
    assert "kv_num_heads > 0" in run.json()["message"]


def test_a_target_file_whose_node_ort_rejects_is_exit_1_and_a_malformed_one_exit_2(tmp_path):
    node = {"op": "gqa", "heads": 4, "kv_heads": 3, "head_size": 64, "past": 64, "batch": 1, "seq": 1,
            "total_seq": 64, "max_total_seq": 64}
    rejected, malformed = tmp_path / "rejected.json", tmp_path / "malformed.json"
    rejected.write_text(json.dumps(node))
    malformed.write_text(json.dumps({**node, "kv_heads": 2, "max_total_seq": INT32_MAX + 1}))
    for command in ("estimate", "prove"):
        run = attnws(command, "--target", str(rejected))
        assert run.code == EXIT_REJECTED and "num_heads % kv_num_heads == 0 was false" in run.out
        run = attnws(command, "--target", str(malformed))
        assert run.code == EXIT_USAGE and "field max_total_seq = 2147483648 is outside [0, 2147483647]" in run.err


PACKED_REJECTS = {
    "pmha-heads-0": ("--op", "pmha", "--batch", "2", "--seq", "8", "--heads", "0", "--head-size", "8"),
    "mha-heads-0": ("--op", "mha", "--batch", "2", "--seq", "8", "--heads", "0", "--head-size", "8"),
    "pa-qkv-hidden-sizes-not-multiples": ("--op", "pa", "--batch", "2", "--seq", "8", "--heads", "3",
                                          "--qkv-hidden-sizes", "8,8,8"),
}


@pytest.mark.parametrize("problem", PACKED_REJECTS.values(), ids=PACKED_REJECTS.keys())
@pytest.mark.parametrize("command", COMMANDS, ids=COMMANDS.keys())
def test_every_family_s_rejected_attributes_are_exit_1_never_a_usage_error_or_a_bug(command, problem, tmp_path):
    """num_heads 0 was an internal error in the solver's commands (a modulo by zero), PA's
    qkv_hidden_sizes a usage error in the box commands while dispatch said ORT's check."""
    argv = [*COMMANDS[command], *problem] + (["--out", str(tmp_path / "line.svg")] if command == "plot" else [])
    run = attnws(*argv)
    assert run.code == EXIT_REJECTED, (run.out, run.err)
    assert "invalid_argument" in run.out and "usage error" not in run.err and "internal error" not in run.err


# -- item 2: one rule for files the command line names ---------------------------------------------

def test_a_file_the_command_line_names_that_cannot_be_read_is_a_usage_error(tmp_path):
    missing = str(tmp_path / "missing.onnx")
    for argv in (("model", missing), ("model", str(tmp_path)), ("estimate", "--target", str(tmp_path / "t.json")),
                 ("validate", "--shapes", str(tmp_path / "s.json"))):
        run = attnws(*argv)
        assert run.code == EXIT_USAGE and run.err.startswith(f"attnws {argv[0]}: usage error: "), (argv, run.err)
    assert "cannot read model" in attnws("model", missing).err and "no such file" in attnws("model", missing).err
    assert "is a directory, not a regular file" in attnws("model", str(tmp_path)).err


def test_a_model_file_that_is_read_but_is_not_a_model_is_exit_1_bad_model(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"not a model")
    for run in (attnws("model", str(path)), attnws("model", "-", stdin="not a model")):
        assert run.code == EXIT_REJECTED and run.out.startswith("rejected (bad_model): ")


def test_the_help_states_the_rule():
    text = attnws("--help").out
    assert "a file the command line names that cannot be read" in text
    assert "a model file that was read is not a valid model (bad model)" in text
    assert "ORT rejects the problem (its check quoted, the same in every command)" in text


# -- item 3: --window -1, the documented default, means no window -----------------------------------

@pytest.mark.parametrize("command", ["estimate", "dispatch"])
def test_window_minus_one_is_no_window(command):
    bound = BOUND if command == "estimate" else ()
    default = attnws(command, *GOOD, *bound, "--json")
    for spelling in (("--window", "-1"), ("--window=-1",)):
        run = attnws(command, *GOOD, *bound, *spelling, "--json")
        assert run.code == EXIT_OK, run.err
        assert run.json() == default.json() and run.json()["problem"]["local_window_size"] == -1


@pytest.mark.parametrize("window, code", [("-2", EXIT_USAGE), ("x", EXIT_USAGE), ("0", EXIT_REJECTED)])
def test_any_other_window_below_one_is_refused(window, code):
    run = attnws("estimate", *GOOD, *BOUND, "--window", window)
    assert run.code == code
    if code == EXIT_USAGE:
        assert "expected -1 (no window, the default) or a window W" in run.err


# -- item 5: a model pattern that misses a node's S says so, in prove's words ----------------------

def test_a_pattern_missing_a_node_s_static_sequence_says_so_as_prove_does(tmp_path):
    from tests.model.test_gqa_nodes import decoder

    model = decoder(layers=1)
    for value in [*model.graph.input, *model.graph.output]:
        if value.name in ("hidden_states", "logits"):
            value.type.tensor_type.shape.dim[1].dim_value = 1  # a static S = 1
    path = tmp_path / "decode.onnx"
    path.write_bytes(model.SerializeToString())
    run = attnws("model", str(path), "--dim", "batch_size=2", "--dim", "past_sequence_length=32",
                 "--max-total-seq", "32", "--pattern", "x:seq=2..3", "--json")
    assert run.code == EXIT_OK, run.err
    [checks] = run.json()["checks"].values()
    pattern = checks["patterns"]["x"]
    assert not pattern["applies"] and pattern["reserve_bytes"] == checks["tight"]["tight_total_bytes"]
    assert pattern["reason"] == "seq 2..3 is not inside the node's 1..1: the pattern misses the node's S"
    prove = attnws("prove", *GOOD, *BOUND, "--pattern", "x:seq=2..3")
    assert prove.code == EXIT_USAGE and "pattern x: seq 2..3 is not inside the target's 1..1" in prove.err
    text = attnws("model", str(path), "--dim", "batch_size=2", "--dim", "past_sequence_length=32",
                  "--max-total-seq", "32", "--pattern", "x:seq=2..3").out
    assert "    x  does not apply: seq 2..3 is not inside the node's 1..1: the pattern misses the node's S; " in text
    assert "range 2..1" not in text


# -- item 6: --max-total-seq, one domain, refused where nothing reads it, named when missing ---------

@pytest.mark.parametrize("value", [str(INT32_MAX + 1), str(2**64)])
@pytest.mark.parametrize("command", [*BOX_COMMANDS, "validate", "model"])
def test_max_total_seq_has_one_domain_in_every_command(command, value, tmp_path):
    if command == "model":
        from tests.model.test_gqa_nodes import COMMITTED
        argv = ["model", str(COMMITTED), "--dim", "batch_size=1", "--dim", "sequence_length=1",
                "--dim", "past_sequence_length=8"]
    else:
        argv = [*COMMANDS[command], *GOOD] + (["--out", str(tmp_path / "line.svg")] if command == "plot" else [])
    run = attnws(*argv, "--max-total-seq", value)
    assert run.code == EXIT_USAGE, (run.out, run.err)
    assert f"--max-total-seq {value}: must be in 0..2,147,483,647 (ORT's session option " \
           "ep.cuda.gqa_workspace_max_total_sequence_length is an int64, but the CUDA kernel's total sequence " \
           "length T is an int32" in run.err


def test_the_largest_session_bound_is_accepted():
    assert attnws("estimate", *GOOD, "--max-total-seq", str(INT32_MAX)).code == EXIT_OK


@pytest.mark.parametrize("argv", [("dispatch",), ("recipe", "--backend", "flash"), ("estimate", "--exact")],
                         ids=["dispatch", "recipe", "estimate-exact"])
def test_a_command_on_one_shape_refuses_the_session_bound_it_never_reads(argv):
    """dispatch, recipe and estimate --exact print no AOT estimate: the option changes nothing."""
    assert "session bound" not in attnws(*argv, *GOOD).out and "estimate" not in attnws(*argv, *GOOD, "--json").out
    run = attnws(*argv, *GOOD, *BOUND)
    assert run.code == EXIT_USAGE
    assert run.err.startswith(f"attnws {argv[0]}: usage error: --max-total-seq: only ORT's AOT estimate reads it")


def test_validate_reads_the_session_bound_in_its_estimate():
    bounded, unset = attnws("validate", *GOOD, *BOUND), attnws("validate", *GOOD)
    assert bounded.code == unset.code == EXIT_OK
    assert "estimate 139,774 B" in bounded.out and "estimate 139,774 B" not in unset.out


def test_a_missing_session_bound_names_the_flag_to_pass():
    run = attnws("estimate", *GOOD)
    assert run.code == EXIT_REJECTED
    assert "ORT's estimator needs the session option ep.cuda.gqa_workspace_max_total_sequence_length (unset); " \
           "pass --max-total-seq N" in run.out
    assert "--sliding-window-cache" not in run.out


def test_with_a_window_it_also_says_what_a_windowed_cache_changes():
    run = attnws("estimate", *GOOD, "--window", "32")
    assert run.code == EXIT_REJECTED and "pass --max-total-seq N" in run.out
    assert "or, with the window of 32, --sliding-window-cache (a windowed cache holding the window's 32 rows, its " \
           "capacity --past 32), which needs no session bound" in run.out
    windowed = attnws("estimate", *GOOD, "--window", "32", "--sliding-window-cache")  # --past defaults to W
    assert windowed.code == EXIT_OK and "P = 32" in windowed.out


def test_the_plot_says_the_flag_too(tmp_path):
    run = attnws("plot", *GOOD, "--sweep", "total-seq", "--out", str(tmp_path / "line.svg"))
    assert run.code == EXIT_OK and "AOT estimate unavailable: " in run.out and "pass --max-total-seq N" in run.out

