"""Issue 24, the command line's part: help a person can read, flags-defined targets named after
their flags, exit codes that say what happened, whose bound an estimate is, exact byte differences,
no flag silently ignored or last-one-wins, one integer parser, escaped control characters, and a
forced backend refused on a shape it does not implement."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from attnws.spec import command_line as command
from attnws.cli import build_parser
from attnws.spec.printable import printable
from attnws.spec.command_line import EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE

from .helpers import attnws

TINY = ["--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8"]
MHA = ["--op", "mha", "--batch", "1", "--seq", "4", "--heads", "1", "--head-size", "8"]
TINY_RECORD = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8}
FORGED = "x\n\x1b[31mPROVED safe_bound"


# 1. Help a person can read.

@pytest.mark.parametrize("name, absent", [
    ("targets", ("--batch", "--sm", "--env", "--max-seq")),
    ("ort-failures", ("--op", "--batch", "--sm", "--target")),
], ids=["targets --help", "ort-failures --help"])
def test_a_command_without_problem_flags_lists_only_its_own(name, absent):
    run = attnws(name, "--help")
    assert run.code == EXIT_OK and len(run.out.splitlines()) <= 25, run.out
    assert not any(flag in run.out for flag in absent), run.out


@pytest.mark.parametrize("name", ["recipe", "dispatch", "estimate", "targets", "ort-failures", "prove",
                                  "counterexamples", "validate", "model", "plot"])
def test_exit_codes_appear_once_in_the_top_level_help_and_each_command_points_there(name):
    help_text = attnws(name, "--help").out
    assert "130  interrupted" not in help_text and "4    a bug in attnws" not in help_text
    assert "exit codes" in help_text and "`attnws --help`" in help_text
    top = attnws("--help").out
    assert top.count("130  interrupted") == 1 and "validate: no shape ran" in top


@pytest.mark.parametrize("name, groups", [
    ("dispatch", ("problem:", "device and options:", "output:")),
    ("estimate", ("target:", "problem:", "device and options:", "estimate:", "output:")),
    ("prove", ("target:", "problem:", "device and options:", "solver:", "ledger:", "output:")),
    ("validate", ("shapes:", "problem:", "device and options:", "limits:", "output:")),
    ("ort-failures", ("sweep:", "output:")),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_commands_help_groups_its_flags(name, groups):
    help_text = attnws(name, "--help").out
    assert all(f"\n{group}\n" in help_text for group in groups), help_text
    usage = help_text.split("\n\n", 1)[0]
    assert len(usage.splitlines()) <= 4, usage  # [PROBLEM] and [CONFIG] instead of thirty flags


@pytest.mark.parametrize("name", ["estimate", "prove", "counterexamples"])
def test_a_target_is_written_name_or_file_everywhere(name):
    help_text = attnws(name, "--help").out
    assert "--target NAME|FILE" in help_text and "--target TARGET" not in help_text


# 2. A flags-defined problem is named after its flags.

def test_a_flags_target_is_named_after_its_flags():
    ns = build_parser().parse_args(["estimate", "--op", "pmha", "--batch", "8", "--seq", "512", "--heads", "12",
                                    "--head-size", "64"])
    assert command.target_from_args(ns).name == "pmha fp16 sm80 B<=8 S<=512 N=12 H=64"
    ns = build_parser().parse_args(["estimate", *MHA, "--past", "3", "--mask", "2d_key_padding", "--dtype", "fp32",
                                    "--sm", "90"])
    assert command.target_from_args(ns).name == "mha fp32 sm90 B=1 S<=4 P<=3 N=1 H=8 mask=2d_key_padding past"


@pytest.mark.parametrize("argv, says", [
    (["estimate", *TINY], "estimate for PackedMultiHeadAttention, fp16, sm80: B = 1, S <= 4"),
    (["prove", *TINY, "--theorem", "safe_bound"], "PROVED: pmha fp16 sm80 B=1 S<=4 N=1 H=8"),
    (["counterexamples", *TINY, "--kind", "nonmonotonic"], "counterexamples in pmha fp16 sm80 B=1 S<=4 N=1 H=8"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_custom_never_names_a_flags_target(argv, says):
    run = attnws(*argv)
    assert run.code == EXIT_OK and says in run.out and "custom" not in run.out, run.out
    document = attnws(*argv, "--json").out
    assert "custom" not in document


# 3. Exit codes that say what happened.

def test_validate_exits_3_when_no_shape_ran():
    run = attnws("validate", *TINY, "--max-memory-bytes", "1")
    assert run.code == EXIT_UNKNOWN, run.out
    assert "\nno shape ran: 1 result(s)" in run.out and "passed:" not in run.out


@pytest.mark.parametrize("document", ['{"shapes": []}', "[]"], ids=["object", "list"])
def test_validate_shapes_without_shapes_is_no_shape_ran(document):
    run = attnws("validate", "--shapes", "-", stdin=document)
    assert run.code == EXIT_UNKNOWN and "no shape ran: the shapes document holds no shapes" in run.out
    summary = attnws("validate", "--shapes", "-", "--json", stdin=document).lines()[-1]
    assert summary["record"] == "summary" and summary["ran"] is False and summary["total"] == 0


@pytest.mark.parametrize("argv", [
    ["estimate", *MHA, "--past", "3", "--json"],
    ["dispatch", *MHA, "--past", "3", "--json"],
], ids=["estimate --op mha --past 3", "dispatch --op mha --past 3"])
def test_past_implies_with_past(argv):
    run = attnws(*argv)
    assert run.code == EXIT_OK, run.err
    problem = run.json()["problem"]
    assert problem["has_past"] and problem["has_present"] and problem["past_sequence_length"] == 3


@pytest.mark.parametrize("name, says", [
    ("bert-base", "did you mean one of bert-base-pa-fp16-sm75, bert-base-pa-fp16-sm80-runner-unknown, "
                  "bert-base-pa-fp32-sm86, bert-base-pmha-fp16-sm80, bert-base-pmha-fp32-sm80?"),
    ("bert-base-pmha-fp16-sm8.json", "did you mean 'bert-base-pmha-fp16-sm80'?"),
    ("nowhere/bert-base-pmha-fp16-sm800.json", "did you mean 'bert-base-pmha-fp16-sm80'?"),
    ("mha-decoder-past-fp32-sm8O", "did you mean 'mha-decoder-past-fp32-sm80'?"),
], ids=lambda v: f"--target {v}" if "did you" not in v else None)
@pytest.mark.parametrize("name_of_command", ["estimate", "prove", "counterexamples"])
def test_a_misspelled_target_gets_did_you_mean_on_every_path(name_of_command, name, says):
    run = attnws(name_of_command, "--target", name)
    assert run.code == EXIT_USAGE and says in run.err, run.err


# 4. Whose bound it is, and exact differences.

def test_a_multiheadattention_estimate_says_the_bound_is_attnwss():
    run = attnws("estimate", *MHA)
    assert run.code == EXIT_OK
    assert "(attnws's bound, read at every dimension's maximum as ORT's estimators read them)" in run.out
    assert "every route attnws's bound keeps" in run.out
    assert "ORT reads every dimension" not in run.out and "route ORT keeps" not in run.out


MIB36 = 36 * 2**20


def test_validate_pair_line_gives_the_exact_difference():
    from attnws.kernels.commands import pair_line

    line = pair_line({"pair": "p", "smaller_allocates_more": True, "members": [
        {"allocated_bytes": MIB36 + 11_264, "dimensions": {"seq": 255}, "backend": "unfused"},
        {"allocated_bytes": MIB36, "dimensions": {"seq": 256}, "backend": "mea"}]})
    assert "(36.0 MiB)" in line and line.endswith("the smaller shape allocates more (11,264 B more)")


def test_counterexample_lines_give_the_exact_difference():
    from attnws.solver.commands import _finding_lines

    smaller = SimpleNamespace(dims={"seq": 255}, runtime_bytes=MIB36 + 11_264, backends=("unfused",), minimal=True)
    larger = SimpleNamespace(dims={"seq": 256}, runtime_bytes=MIB36, backends=("mea",))
    [pair] = _finding_lines("nonmonotonic", [SimpleNamespace(gates=("g",), differ=("seq",), smaller=smaller,
                                                             larger=larger, minimal=True)], [], None, [])
    [naive] = _finding_lines("naive-cascade", [], [smaller], MIB36, [])
    assert pair.endswith("(11,264 B more)") and naive.endswith("(11,264 B more)") and "(36.0 MiB)" in naive


def test_validate_oversized_gives_the_exact_difference():
    from attnws.kernels.allocation_checks import Oversize
    from attnws.kernels.commands import format_report
    from attnws.kernels.report import ValidationReport
    from attnws.spec.hints import Geometry
    from attnws.spec.options import RuntimeConfig
    from attnws.spec.problem import Op
    from attnws.spec.shapes_file import shape_record

    shape = shape_record(Geometry(Op.PMHA, 2, batch=1, seq=4, heads=1, head_size=8), RuntimeConfig())
    report = ValidationReport(shape, "simulator", "unfused", (("attention", MIB36 + 11_264),),
                              oversized=(Oversize("attention", MIB36 + 11_264, MIB36 - 256, 256),))
    assert "plus documented slack 256 B (11,264 B more)" in format_report(report)


# 5. Flags silently ignored or last-one-wins.

@pytest.mark.parametrize("argv, says", [
    (["prove", "--check-ledger", "--target", "bert-base-pmha-fp16-sm80"], "--target cannot be combined with it"),
    (["prove", "--check-ledger", "--theorem", "safe_bound"], "--theorem cannot be combined with it"),
    (["prove", "--check-ledger", *TINY], "--batch --seq --heads --head-size --op cannot be combined with it"),
    (["prove", "--check-ledger", "--sm", "90"], "--sm cannot be combined with it"),
    (["prove", "--write-ledger", "--target", "bert-base-pmha-fp16-sm80"], "--write-ledger proves every"),
    (["prove", "--second-opinion-rlimit", "0"], "--second-opinion-rlimit limits the second solver"),
    (["prove", "--second-opinion-rlimit", "5000"], "add --second-opinion cvc5"),
    (["prove", "--second-opinion", "cvc5", "--second-opinion-rlimit", "0"],
     "--second-opinion-rlimit 0: must be in 1..4,294,967,295"),
    (["estimate", *TINY, "--seq", "8"], "argument --seq: given twice ('4', then '8')"),
    (["estimate", "--op", "pmha", *TINY], "argument --op: given twice"),
    (["plot", "--sweep", "seq", "--out", "a.png", "--out", "b.png"], "argument --out: given twice"),
    (["validate", *TINY, "--max-sim-seconds", "5", "--max-sim-seconds", "6"], "argument --max-sim-seconds: given twice"),
    (["ort-failures", "--markdown", "--json"], "argument --json: not allowed with argument --markdown"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_an_ignored_or_overridden_flag_is_a_usage_error(argv, says):
    run = attnws(*argv)
    assert run.code == EXIT_USAGE and says in run.err and run.out == "", run.err


def test_repeatable_flags_stay_repeatable():
    run = attnws("estimate", "--env", "ORT_DISABLE_FLASH_ATTENTION=1", "--env", "ORT_DISABLE_FUSED_ATTENTION=1")
    assert run.code == EXIT_OK, run.err
    assert attnws("prove", *TINY, "--theorem", "safe_bound", "--theorem", "containment").code == EXIT_OK


@pytest.mark.parametrize("document, says", [
    ({"shapes": [TINY_RECORD], "sm": 90}, 'unknown key "sm"'),
    ({"shapes": [TINY_RECORD], "shapez": []}, 'unknown key "shapez" (did you mean "shapes"?)'),
], ids=["sm next to shapes", "shapez next to shapes"])
def test_an_unknown_top_level_key_of_a_shapes_document_is_named(document, says):
    run = attnws("validate", "--shapes", "-", stdin=json.dumps(document))
    assert run.code == EXIT_USAGE and says in run.err, run.err


def test_counterexamples_documents_pass_the_top_level_check():
    document = attnws("counterexamples", *TINY, "--kind", "nonmonotonic", "--json").out
    assert attnws("validate", "--shapes", "-", stdin=document).code == EXIT_UNKNOWN  # read; holds no shapes


# 6. Wrong values and exit codes: one integer parser, limits Z3 can take.

@pytest.mark.parametrize("argv, says", [
    (["prove", "--timeout-ms", "4294967297"], "--timeout-ms 4294967297: must be in 1..4,294,967,295"),
    (["prove", "--rlimit", "4294967296"], "--rlimit 4294967296: must be in 1..4,294,967,295"),
    (["prove", "--timeout-ms", "0"], "--timeout-ms 0: must be in"),
    (["model", "m.onnx", "--max-nodes", "-1"], "argument --max-nodes: '-1' is not a non-negative integer"),
    (["model", "m.onnx", "--max-bytes", "-1"], "argument --max-bytes: '-1' is not a non-negative integer"),
    (["estimate", "--sm", "٨٠"], "argument --sm: '٨٠' is not a non-negative integer"),
    (["estimate", "--sdpa-kernel", "1_6"], "argument --sdpa-kernel: '1_6' is not a non-negative integer"),
    (["estimate", "--sdpa-kernel", "+4"], "argument --sdpa-kernel: '+4'"),
    (["estimate", "--op", "pmha", "--batch", "2", "--seq", "٨", "--heads", "1", "--head-size", "8"], "--seq '٨'"),
    (["estimate", "--op", "pmha", "--batch", " 2", "--seq", "8", "--heads", "1", "--head-size", "8"], "--batch ' 2'"),
    (["estimate", "--op", "pa", "--heads", "1", "--batch", "1", "--seq", "4", "--qkv-hidden-sizes", "٨,8,8"],
     "--qkv-hidden-sizes '٨,8,8'"),
    (["prove", "--rlimit", "１０"], "argument --rlimit"),
    (["counterexamples", "--limit", "0"], "--limit 0: must be at least 1"),
    (["counterexamples", "--max-elements", "1_000"], "argument --max-elements"),
    (["ort-failures", "--max-seq", " 9"], "argument --max-seq"),
    (["validate", "--shapes", "-", "--max-sim-seconds", "1e3"], "argument --max-sim-seconds: '1e3'"),
    (["validate", "--shapes", "-", "--max-memory-bytes", "1_000"], "argument --max-memory-bytes"),
    (["prove", "--second-opinion", "cvc5", "--second-opinion-rlimit", "٥"], "argument --second-opinion-rlimit"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_integer_flags_are_ascii_digits_in_range(argv, says):
    run = attnws(*argv, stdin="[]")
    assert run.code == EXIT_USAGE and says in run.err, (run.code, run.err)


def test_every_integer_flag_is_read_by_the_one_parser():
    parser = build_parser()
    for sub in [parser, *parser._subparsers._group_actions[0].choices.values()]:
        assert sub._registry_get("type", int, None) is command.integer
        assert sub._registry_get("type", float, None) is command.number


# 7. Plot --at on a dimension the target does not declare.

def test_plot_at_past_without_a_past_range_names_at(tmp_path):
    run = attnws("plot", *MHA, "--sweep", "seq", "--at", "past=3", "--out", str(tmp_path / "p.png"))
    assert run.code == EXIT_USAGE and "--at past=3" in run.err, run.err


# 8. Control characters escaped in text, JSON untouched.

@pytest.fixture
def forged_target(tmp_path):
    path = tmp_path / "forged.json"
    path.write_text(json.dumps({"name": FORGED, "op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8}))
    return str(path)


@pytest.mark.parametrize("argv", [["estimate"], ["prove", "--theorem", "safe_bound"],
                                  ["counterexamples", "--kind", "nonmonotonic"]],
                         ids=["estimate --target FORGED", "prove --target FORGED", "counterexamples --target FORGED"])
def test_a_target_name_cannot_forge_a_line(argv, forged_target):
    run = attnws(*argv, "--target", forged_target)
    assert run.code == EXIT_OK, run.err
    assert "\x1b" not in run.out and "x\\n\\x1b[31mPROVED safe_bound" in run.out
    assert not any(line.startswith(("PROVED safe_bound", "\\x1b")) for line in run.out.splitlines())


def test_json_keeps_the_name_as_given(forged_target):
    assert attnws("prove", "--target", forged_target, "--theorem", "safe_bound", "--json").json()["target"] == FORGED


def test_a_shape_label_and_an_error_message_cannot_forge_a_line():
    record = {**TINY_RECORD, "label": "a\nok   forged\x1b[2J"}
    run = attnws("validate", "--shapes", "-", stdin=json.dumps([record]))
    assert "\x1b" not in run.out and "\nok   forged" not in run.out and "[a\\nok   forged\\x1b[2J]" in run.out
    run = attnws("estimate", "--target", "x\x1b[2Jy\rz")
    assert run.code == EXIT_USAGE and "\x1b" not in run.err and "\r" not in run.err


def test_printable_escapes_every_control_character_without_quotes():
    assert printable(FORGED) == "x\\n\\x1b[31mPROVED safe_bound"
    assert printable("a\nb\x1b\u2028\t", keep_newlines=True) == "a\nb\\x1b\\u2028\\t"
    assert printable("µs é ✓") == "µs é ✓"


# 9. A forced backend on a shape it does not implement.

@pytest.mark.parametrize("argv, says", [
    ([*TINY, "--dtype", "fp32", "--backend", "trt"], "needs fp16"),
    ([*TINY, "--attn-bias", "--backend", "trt"], "attention bias present"),
    ([*MHA, "--unidirectional", "--backend", "trt"], "unidirectional (causal) attention"),
    ([*MHA, "--mask", "2d_key_padding", "--backend", "flash"], "key padding mask present"),
    ([*MHA, "--with-past", "--past", "3", "--backend", "trt"], "past or present key/value present"),
    ([*MHA, "--with-past", "--past", "3", "--backend", "trt_cross"], "past or present key/value present"),
], ids=lambda v: "validate " + " ".join(v) if isinstance(v, list) else None)
def test_validate_refuses_a_backend_that_does_not_implement_the_shape(argv, says):
    run = attnws("validate", *argv)
    assert run.code == EXIT_USAGE and says in run.err and "ORT never sends it there" in run.err, run.err
    assert run.out == ""


@pytest.mark.parametrize("argv", [
    [*TINY, "--backend", "flash"],  # below the packed-QKV threshold: a preference, not a limit of the kernel
    ["--op", "pmha", "--batch", "1", "--seq", "64", "--heads", "1", "--head-size", "64", "--sdpa-kernel", "16",
     "--backend", "trt"],  # disabled by the kernel options
], ids=["validate flash below its threshold", "validate trt disabled by sdpa_kernel"])
def test_validate_forces_a_backend_past_the_gates_that_only_express_preference(argv):
    run = attnws("validate", *argv)
    assert run.code == EXIT_OK and "\npassed: 1 result(s)" in run.out, run.out + run.err


def test_every_preference_gate_is_a_gate_the_cascades_have():
    """A renamed gate would silently turn a preference into a refusal: the names must exist."""
    from attnws.kernels.commands import PREFERENCE_GATES
    from attnws.spec.dispatch import cascade_gates
    from attnws.spec.domain import CONCRETE
    from attnws.spec.estimate import runtime_problem
    from attnws.spec.hints import Geometry
    from attnws.spec.options import RuntimeConfig
    from attnws.spec.problem import Op

    names = {gate.name for op, size in ((Op.PMHA, 4), (Op.MHA, 4), (Op.PA, 2))
             for _, gates in cascade_gates(CONCRETE, runtime_problem(Geometry(op, size, batch=1, seq=4, heads=1,
                                                                                head_size=8)),
                                           RuntimeConfig(), runner_valid=True) for gate in gates}
    assert set(PREFERENCE_GATES) <= names, set(PREFERENCE_GATES) - names


def test_a_build_flag_applies_on_top_of_a_target():
    """--no-mea-build stores False: it was taken for "not given" next to --target."""
    doc = attnws("estimate", "--target", "vit-b16-pmha-fp32-sm80", "--no-mea-build", "--json").json()
    mea = next(r for r in doc["routes"] if r["backend"] == "mea")
    assert not mea["reachable"] and "not compiled in" in mea["reason"]
