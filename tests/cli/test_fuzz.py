"""In-process fuzz of the command line: hypothesis draws argument vectors (and target and shapes
documents passed by file) and runs `attnws.cli.main` on each. No exception may escape main, and
no vector may end in an internal error (exit 4, an attnws bug): only the documented exit codes.

At least 10,000 vectors run in CI (`VECTORS` per test, fixed seeds through the tests/conftest.py
profile). The solver's and the simulator's engines, ORT's failure sweep and the plot's drawing are
replaced by stand-ins for the duration (their argument handling still runs): a vector is about
parsing, checks and messages, and must take milliseconds. No output may hold a control character
other than the line feed (the CLI escapes them).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnws import cli
from attnws.spec.command_line import CommandResult, EXIT_INTERRUPTED, EXIT_OK, KNOWN_SMS
from attnws.spec.options import IGNORED_ENV, KNOWN_ENV

ALLOWED_EXITS = {0, 1, 2, 3, EXIT_INTERRUPTED}
VECTORS = {"soup": 3000, "mutated": 4000, "documents": 1500, "model": 600, "mha-plot": 1500}
COUNTS: dict[str, int] = {}

PARSER, SUBPARSERS = cli._parser_and_commands()
COMMANDS = list(SUBPARSERS.choices)
FLAGS = sorted({opt for sub in SUBPARSERS.choices.values() for opt in sub._option_string_actions})

# Valid command lines, one or more per command, that the mutated strategy starts from.
SHAPE = ["--batch", "2", "--seq", "8", "--heads", "2", "--head-size", "8"]
VALID = [
    ["estimate"],
    ["estimate", "--op", "pmha", *SHAPE, "--sm", "80"],
    ["estimate", "--op", "pa", *SHAPE, "--qkv-hidden-sizes", "16,16,16", "--dtype", "fp32"],
    ["estimate", "--target", "bert-base-pmha-fp16-sm80", "--env", "ORT_DISABLE_FLASH_ATTENTION=1"],
    ["estimate", "--op", "pmha", *SHAPE, "--policy", "tight"],
    ["estimate", "--exact", "--op", "pmha", *SHAPE, "--format", "separate", "--v-head-size", "16"],
    ["estimate", "--op", "pa", "--heads", "2", "--qkv-hidden-sizes", "8,8,8", "--input-shapes",
     "[[6,6],[6,24],[24],[2,4],[3],null]"],
    ["recipe", "--op", "pmha", "--backend", "unfused", *SHAPE, "--tokens", "9"],
    ["recipe", "--op", "pa", "--backend", "mea", *SHAPE, "--attn-bias", "--attn-bias-broadcast-heads"],
    ["dispatch", "--op", "pmha", *SHAPE, "--sdpa-kernel", "3", "--trt-runner", "unknown"],
    ["targets"],
    ["prove", "--target", "bert-base-pmha-fp16-sm80", "--theorem", "safe_bound"],
    ["prove", "--op", "pmha", *SHAPE, "--rlimit", "1000"],
    ["prove", "--check-ledger"],
    ["counterexamples", "--op", "pmha", *SHAPE, "--kind", "nonmonotonic", "--limit", "2", "--max-elements", "1000"],
    ["validate", "--op", "pmha", *SHAPE],
    ["validate", "--op", "pa", *SHAPE, "--backend", "unfused", "--max-sim-seconds", "5"],
    ["dispatch", "--op", "mha", *SHAPE, "--kv-seq", "5", "--mask", "1d_key_seq_len", "--qkv-bias"],
    ["estimate", "--op", "mha", *SHAPE, "--with-past", "--past", "16", "--unidirectional", "--dtype", "fp32"],
    ["recipe", "--op", "mha", "--backend", "trt_cross", *SHAPE, "--kv-seq", "4", "--format", "packed_kv"],
    ["estimate", "--op", "mha", "--heads", "2", "--with-present", "--input-shapes",
     "[[2,1,16],[2,1,16],[2,1,16],null,null,null,[2,2,3,8],[2,2,3,8]]"],
    ["validate", "--op", "mha", *SHAPE, "--kv-seq", "3", "--mask", "2d_key_padding"],
    ["model", "MODEL", "--dim", "batch=4", "--dim", "seq=8", "--dim", "token_count=24", "--dim", "batch_plus_1=5"],
    ["model", "MODEL", "--max-shape-override", "hidden_states:[24,64]", "--prove"],
    ["dispatch", "--op", "mha", *SHAPE, "--kv-seq", "4", "--past", "3", "--with-present", "--format", "cross"],
    ["estimate", "--op", "mha", *SHAPE, "--past", "5", "--unidirectional", "--mask", "3d_attention"],
    ["validate", "--op", "mha", *SHAPE, "--with-past", "--past", "3", "--backend", "trt"],
    ["validate", "--op", "pmha", *SHAPE, "--dtype", "fp32", "--backend", "trt"],
    ["recipe", "--op", "mha", "--backend", "cudnn", *SHAPE, "--format", "packed_qkv", "--mask", "1d_key_seq_len_start"],
    ["estimate", "--op", "pmha", *SHAPE, "--sdpa-kernel", "0", "--env", "ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32=-1"],
    ["prove", "--op", "mha", *SHAPE, "--past", "2", "--second-opinion-rlimit", "5", "--timeout-ms", "4294967295"],
    ["prove", "--check-ledger", "--rlimit", "1000"],
    ["ort-failures", "--max-seq", "16"],
    ["ort-failures", "--markdown"],
    ["plot", "--op", "mha", *SHAPE, "--past", "4", "--sweep", "past", "--at", "seq=2", "--out", "OUT"],
    ["plot", "--op", "pmha", *SHAPE, "--sweep", "seq", "--at", "batch=1", "--out", "OUT"],
    ["plot", "--op", "mha", *SHAPE, "--sweep", "kv-seq", "--at", "past=3", "--json"],
]

# Integers as people and other scripts write them: every integer flag takes ASCII digits only.
UNICODE_DIGITS = ["٣", "٨٠", "８", "१२", "৮", "߈", "𝟠"]
NUMBERS = st.one_of(st.integers(-3, 70).map(str), st.integers(-2**64, 2**64).map(str),
                    st.sampled_from(["0", "1", "4294967295", "4294967296", "4294967297", "2147483647", "2147483648",
                                     "18446744073709551616", "1e3", "0x10", "nan", "inf", "-inf", " 7 ", "1_000",
                                     "1_6", "+7", "-0", "00", "1.5", "0.0", *UNICODE_DIGITS]))
# --sdpa-kernel: each defined bit, the removed 128, the undefined 1024, int32's edge, ORT's parse edges.
SDPA_VALUES = st.sampled_from(["0", "1", "2", "3", "4", "8", "16", "32", "64", "127", "128", "256", "512", "1023", "1024",
                               "2147483647", "2147483648", "4294967295", "-1", "1_6", "+4", " 4", "0x4", "٨", "4.0", ""])
# Values as ORT 1.31.1 parses an environment variable: exact booleans, decimal int32, empty (unset).
ENV_VALUES = st.sampled_from(["0", "1", "false", "true", "False", "True", "TRUE", "yes", "", " 1", "1 ", "+1", "-1",
                              "01", "-0", "2147483647", "2147483648", "-2147483648", "-2147483649", "0x10", "1e3",
                              "٣", "1_0", "=1", "\x1b[31m"])
RANGES = st.builds(lambda a, b, sep: f"{a}{sep}{b}", st.integers(-5, 600), st.integers(-5, 600),
                   st.sampled_from(["..", "...", ".", ",", ".. "]))
ENV = st.builds(lambda name, value: f"{name}={value}",
                st.sampled_from([*KNOWN_ENV, *IGNORED_ENV, "ORT_DISABLE_FUSED_ATENTION", "PATH", "", "=", "X"]),
                ENV_VALUES)
WORDS = st.sampled_from(["pa", "pmha", "mha", "cross", "packed_kv", "packed_qkv", "1d_key_seq_len",
                         "1d_key_seq_len_start", "2d_key_padding", "3d_attention", "trt_cross", "cudnn", "kv-seq",
                         "past", "fp16", "fp32", "bf16", "flash", "mea", "trt", "unfused", "flsh", "packed",
                         "separate", "auto", "unknown", "all", "nonmonotonic", "naive-cascade", "ort", "tight",
                         "8,8,8", "8,8", "a,b,c", "-1,8,8", "[]", "[[6,6]]", "{}", "null", "-", "/dev/zero",
                         "/nonexistent", "README.md", "/proc/nope", "bert-base-pmha-fp16-sm80",
                         "bert-large-pmha-fp16-sm9", "bert-base", "MODEL", "batch=4", "batch", "x:[1,2]", "x:[a]",
                         "", " ", "seq", "tokens", "head-size", "past=3", "seq=4", "kv-seq=2", "heads=2", "OUT",
                         "x.pdf", "/nonexistent/x.png", "x\n\x1b[31mPROVED safe_bound", *map(str, KNOWN_SMS)])
VALUES = st.one_of(NUMBERS, RANGES, ENV, WORDS, st.text(string.printable, max_size=12),
                   st.text(max_size=6))
MISSPELLED = st.builds(lambda flag, i, c: flag[:i] + c + flag[i + 1:], st.sampled_from(FLAGS), st.integers(2, 12),
                       st.sampled_from(["", "-", "_", "x", "s"]))
TOKENS = st.one_of(st.sampled_from(FLAGS), MISSPELLED, VALUES, st.builds(lambda f, v: f"{f}={v}",
                                                                          st.sampled_from(FLAGS), VALUES))


class _Engines:
    """Stand-ins for Z3 and the simulator: each keeps the real handler's argument handling."""

    def __init__(self, monkeypatch: Any, model_path: str, out_folder: Path) -> None:
        from attnws.spec.command_line import target_from_args
        from attnws.solver import commands as solver

        def solver_handler(ns: Any, progress: Any) -> CommandResult:
            if getattr(ns, "kind", None) is not None:
                solver.check_search_flags(ns)
            solver.limits_from_args(ns)
            if not solver.ledger_mode(ns):
                target_from_args(ns)
            return CommandResult(EXIT_OK, "stand-in", {})

        for name in ("prove", "counterexamples"):
            monkeypatch.setitem(SUBPARSERS.choices[name]._defaults, "handler", solver_handler)
        monkeypatch.setattr("attnws.solver.tight.tight_report", lambda target, progress=None, limits=None: {
            "ort_total_bytes": 1, "tight_total_bytes": 1, "bytes_saved": 0, "kept_routes": {}, "dropped_routes": [],
            "undecided_routes": [], "verdict": "PROVED"})
        monkeypatch.setattr("attnws.kernels.budget.RunLimits.refusal", lambda self, cost: "too large (fuzz stand-in)")
        monkeypatch.setattr("attnws.model.prove.check_nodes", lambda *args, **kwargs: [])
        monkeypatch.setattr("attnws.spec.commands.failure_table", lambda max_seq: [])
        from attnws.plot import commands as plot, render

        monkeypatch.setattr(plot, "compute_series", functools.partial(plot.compute_series, proofs=False))
        monkeypatch.setattr(plot, "compare_series", functools.partial(plot.compare_series, proofs=False))
        monkeypatch.setattr(render, "render", lambda *args, **kwargs: 0.0)
        monkeypatch.setattr(render, "render_comparison", lambda *args, **kwargs: 0.0)
        self.model_path = model_path
        self.out_path = str(out_folder / "fuzz.png")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path_factory.mktemp("fuzz") / "model.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=1, hidden=64, heads=4, ffn=64)), str(path))
    return str(path)


@pytest.fixture
def engines(monkeypatch, model_path, tmp_path_factory):
    return _Engines(monkeypatch, model_path, tmp_path_factory.mktemp("plots"))


# What a terminal acts on: every C0 / C1 control but the line feed, and the line separators.
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def run_vector(argv: list[str], engines: "_Engines", stdin: str = "[]") -> int:
    """Run main on argv (MODEL replaced by the fuzz model, OUT by a picture path in a temporary
    folder); return the exit code."""
    import sys

    argv = [{"MODEL": engines.model_path, "OUT": engines.out_path}.get(a, a) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8", "replace")))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(argv)
            except SystemExit as exit_:
                code = exit_.code
    finally:
        sys.stdin = saved
    assert code in ALLOWED_EXITS, (argv, code, err.getvalue()[-2000:])
    assert "Traceback" not in out.getvalue() + err.getvalue(), argv
    assert not RAW_CONTROL.search(out.getvalue() + err.getvalue()), (argv, out.getvalue()[-500:], err.getvalue())
    return code


def counted(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


def test_flag_soup(engines):
    """Any command, then any sequence of flags, misspellings and values."""
    COUNTS.pop("soup", None)

    @settings(max_examples=VECTORS["soup"])
    @given(st.one_of(st.sampled_from(COMMANDS), WORDS), st.lists(TOKENS, max_size=10))
    def vector(command, tokens):
        counted("soup")
        run_vector([command, *tokens], engines)

    vector()
    assert COUNTS["soup"] >= VECTORS["soup"]


@st.composite
def mutated(draw) -> list[str]:
    argv = list(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2]))):
        kind = draw(st.sampled_from(["replace", "drop", "insert", "duplicate", "repeat-flag", "swap-command"]))
        position = draw(st.integers(1, max(1, len(argv) - 1))) if len(argv) > 1 else 1
        if kind == "replace" and len(argv) > 1:
            argv[position] = draw(st.one_of(NUMBERS, RANGES, WORDS, ENV, st.integers(0, 600).map(str), VALUES))
        elif kind == "drop" and len(argv) > 1:
            del argv[position]
        elif kind == "insert":
            argv[position:position] = [draw(st.sampled_from(FLAGS)), draw(VALUES)]
        elif kind == "duplicate" and len(argv) > 1:
            argv.insert(position, argv[position])
        elif kind == "repeat-flag" and any(a.startswith("--") for a in argv):
            argv += [draw(st.sampled_from([a for a in argv if a.startswith("--")])), draw(VALUES)]
        elif kind == "swap-command":
            argv[0] = draw(st.sampled_from(COMMANDS))
    return argv


def test_mutated_valid_command_lines(engines):
    """A valid command line as is, or with one or two values replaced, flags dropped, inserted or doubled."""
    COUNTS.pop("mutated", None)

    @settings(max_examples=VECTORS["mutated"])
    @given(mutated())
    def vector(argv):
        counted("mutated")
        run_vector(argv, engines)

    vector()
    assert COUNTS["mutated"] >= VECTORS["mutated"]


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False), st.text(max_size=8),
              st.sampled_from(["pmha", "pa", "fp16", "fp32", "1..8", "12..12", "packed", "separate", "auto"])),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=6), children, max_size=4)),
    max_leaves=12)
TARGET_KEYS = ["name", "description", "op", "dtype", "batch", "seq", "heads", "head_size", "v_head_size", "tokens",
               "input_hidden", "qkv_hidden_sizes", "format", "qkv_bias", "attn_bias", "sm", "sdpa_kernel", "env",
               "flash_build", "mea_build", "trt_runner", "expect_unavailable_estimate"]
RECORD = {"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8}


@st.composite
def document(draw) -> Any:
    base = dict(draw(st.sampled_from([{**RECORD, "name": "fuzz"}, RECORD, {}])))
    for key in draw(st.lists(st.sampled_from(TARGET_KEYS + ["schema_version", "shapes", "atn_bias"]), max_size=4)):
        base[key] = draw(JSON_VALUES)
    return draw(st.sampled_from([base, [base], {"shapes": [base]}, {"shapes": base}, draw(JSON_VALUES)]))


def test_target_and_shapes_documents(engines, tmp_path_factory):
    """Target files and shapes documents of any JSON (and some text that is not JSON)."""
    COUNTS.pop("documents", None)
    folder = tmp_path_factory.mktemp("documents")

    @settings(max_examples=VECTORS["documents"])
    @given(document(), st.sampled_from(["estimate", "prove", "counterexamples", "validate"]),
           st.sampled_from(["json", "text", "bytes"]))
    def vector(doc, command, encoding):
        counted("documents")
        text = json.dumps(doc) if encoding == "json" else str(doc) if encoding == "text" else json.dumps(doc)[:-1]
        path = Path(folder) / "doc.json"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        if command == "validate":
            source = "-" if len(text) % 2 else str(path)
            run_vector(["validate", "--shapes", source], engines, stdin=text)
        else:
            run_vector([command, "--target", str(path)], engines)

    vector()
    assert COUNTS["documents"] >= VECTORS["documents"]


def test_model_command_lines(engines):
    """`attnws model` with any bounds, overrides and options on a small encoder, or on no model."""
    COUNTS.pop("model", None)
    dims = st.builds(lambda n, v: f"{n}={v}", st.sampled_from(["batch", "seq", "token_count", "batch_plus_1",
                                                               "batch", "seq", "token_count", "x", ""]),
                     st.one_of(st.integers(0, 600).map(str), NUMBERS, WORDS))
    valid = st.just([("--dim", "batch=4"), ("--dim", "seq=8"), ("--dim", "token_count=24"), ("--dim", "batch_plus_1=5")])
    flags = st.lists(st.one_of(st.tuples(st.just("--dim"), dims),
                               st.tuples(st.just("--max-shape-override"), st.one_of(WORDS, st.text(max_size=20))),
                               st.tuples(st.sampled_from(["--max-bytes", "--sm", "--sdpa-kernel", "--policy", "--env"]),
                                         VALUES),
                               st.tuples(st.sampled_from(["--prove", "--json"]))), max_size=6)
    flags = st.one_of(flags, st.builds(lambda a, b: a[:len(a) - 1] + b, valid, flags), st.builds(list.__add__, valid, flags))

    @settings(max_examples=VECTORS["model"])
    @given(st.sampled_from(["MODEL", "MODEL", "/dev/zero", "/nonexistent.onnx", "README.md"]), flags)
    def vector(path, options):
        counted("model")
        run_vector(["model", path, *[part for option in options for part in option]], engines)

    vector()
    assert COUNTS["model"] >= VECTORS["model"]


MHA_FLAGS = st.one_of(
    st.tuples(st.sampled_from(["--kv-seq", "--past"]), st.integers(0, 12).map(str)),
    st.tuples(st.sampled_from(["--with-past", "--with-present", "--unidirectional", "--qkv-bias", "--attn-bias"])),
    st.tuples(st.just("--mask"), st.sampled_from(["none", "1d_key_seq_len", "1d_key_seq_len_start", "2d_key_padding",
                                                  "3d_attention"])),
    st.tuples(st.just("--format"), st.sampled_from(["separate", "cross", "packed_kv", "packed_qkv"])),
    st.tuples(st.just("--env"), st.builds(lambda name, value: f"{name}={value}", st.sampled_from(KNOWN_ENV),
                                          ENV_VALUES)),
    st.tuples(st.just("--sdpa-kernel"), st.sampled_from(["0", "1", "2", "4", "8", "16", "64", "255", "512"])),
    st.tuples(st.sampled_from(["--sm"]), st.sampled_from(list(map(str, KNOWN_SMS)))),
    st.tuples(st.just("--dtype"), st.sampled_from(["fp16", "fp32"])),
)
# One flag at an edge: a dimension as people or other scripts write it, an sdpa_kernel ORT does
# not define, a device without kernels, a format or mask of the other operator, a repeated flag.
EDGE_FLAGS = st.one_of(
    st.tuples(st.sampled_from(["--kv-seq", "--past", "--seq", "--batch", "--heads", "--head-size", "--v-head-size"]),
              st.one_of(NUMBERS, RANGES)),
    st.tuples(st.just("--sdpa-kernel"), SDPA_VALUES),
    st.tuples(st.just("--sm"), st.sampled_from(["70", "100", "0", "-80", "80.0", *UNICODE_DIGITS])),
    st.tuples(st.just("--mask"), st.sampled_from(["2d", "", "1D_KEY_SEQ_LEN"])),
    st.tuples(st.just("--format"), st.sampled_from(["packed", "kv", ""])),
    st.tuples(st.just("--env"), ENV),
)
PLOT_FLAGS = st.one_of(
    st.tuples(st.just("--at"), st.builds(lambda n, v: f"{n}={v}", st.sampled_from(
        ["past", "seq", "batch", "kv-seq", "heads", "head-size", "v-head-size", "tokens", "x", ""]),
        st.one_of(st.integers(0, 12).map(str), NUMBERS))),
    st.tuples(st.just("--out"), st.sampled_from(["OUT", "x.pdf", "/nonexistent/x.png", "."])),
    st.tuples(st.just("--sweep"), st.sampled_from(["seq", "x"])),
)


@st.composite
def mha_command_line(draw) -> list[str]:
    """A MultiHeadAttention command line of a command taking a problem, with its flags, ORT's
    environment and sdpa_kernel values, now and then one flag at an edge or one given twice; plot
    with --sweep, --at and --out (or --json)."""
    command = draw(st.sampled_from(["estimate", "dispatch", "recipe", "validate", "prove", "counterexamples",
                                    "plot", "plot"]))
    argv = [command, "--op", draw(st.sampled_from(["mha", "mha", "mha", "pmha"])), "--batch", "1", "--seq", "4",
            "--heads", "2", "--head-size", "8"]
    for option in draw(st.lists(MHA_FLAGS, max_size=4, unique_by=lambda option: option[0])):
        argv += option
    if command in ("recipe", "validate") and (command == "recipe" or draw(st.booleans())):
        argv += ["--backend", draw(st.sampled_from(["trt", "trt_cross", "flash", "mea", "unfused", "cudnn"]))]
    if command == "plot":
        argv += ["--sweep", draw(st.sampled_from(["seq", "seq", "batch", "kv-seq", "past", "head-size"]))]
        argv += draw(st.sampled_from([["--out", "OUT"], ["--json"]]))
        for option in draw(st.lists(PLOT_FLAGS, max_size=2)):
            argv += option
    edge = draw(st.sampled_from(["none", "none", "edge", "repeat"]))
    if edge == "edge":
        argv += draw(EDGE_FLAGS)
    elif edge == "repeat":
        argv += [draw(st.sampled_from(["--seq", "--op", "--sm", "--kv-seq", "--past", "--env", "--format"])),
                 draw(st.sampled_from(["4", "8", "mha", "80", "ORT_DISABLE_FLASH_ATTENTION=1", "separate"]))]
    return argv


def test_mha_and_plot_command_lines(engines):
    """MultiHeadAttention's flags on every command taking a problem, and plot --at with --out."""
    COUNTS.pop("mha-plot", None)

    @settings(max_examples=VECTORS["mha-plot"])
    @given(mha_command_line())
    def vector(argv):
        counted("mha-plot")
        run_vector(argv, engines)

    vector()
    assert COUNTS["mha-plot"] >= VECTORS["mha-plot"]


def test_at_least_ten_thousand_vectors_run():
    assert sum(VECTORS.values()) >= 10_000
