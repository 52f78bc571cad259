"""In-process fuzz of the command line: hypothesis draws argument vectors (and target and shapes
documents passed by file) and runs `attnws.cli.main` on each. No exception may escape main, and
no vector may end in an internal error (exit 4, an attnws bug): only the documented exit codes.

At least 10,000 vectors run in CI (`VECTORS` per test, fixed seeds through the tests/conftest.py
profile). The solver's and the simulator's engines are replaced by stand-ins for the duration
(their argument handling still runs): a vector is about parsing, checks and messages, and must
take milliseconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnws import cli
from attnws.command import CommandResult, EXIT_INTERRUPTED, EXIT_OK, KNOWN_SMS
from attnws.spec.options import IGNORED_ENV, KNOWN_ENV

ALLOWED_EXITS = {0, 1, 2, 3, EXIT_INTERRUPTED}
VECTORS = {"soup": 3500, "mutated": 4500, "documents": 1500, "model": 600}
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
]

NUMBERS = st.one_of(st.integers(-3, 70).map(str), st.integers(-2**64, 2**64).map(str),
                    st.sampled_from(["0", "1", "4294967296", "2147483647", "2147483648", "1e3", "0x10", "nan",
                                     "inf", "-inf", " 7 ", "1_000", "٣"]))
RANGES = st.builds(lambda a, b, sep: f"{a}{sep}{b}", st.integers(-5, 600), st.integers(-5, 600),
                   st.sampled_from(["..", "...", ".", ",", ".. "]))
ENV = st.builds(lambda name, value: f"{name}={value}",
                st.sampled_from([*KNOWN_ENV, *IGNORED_ENV, "ORT_DISABLE_FUSED_ATENTION", "PATH", "", "=", "X"]),
                st.sampled_from(["0", "1", "true", "yes", "", "-3", "99999999999", "=1"]))
WORDS = st.sampled_from(["pa", "pmha", "mha", "cross", "packed_kv", "packed_qkv", "1d_key_seq_len",
                         "1d_key_seq_len_start", "2d_key_padding", "3d_attention", "trt_cross", "cudnn", "kv-seq",
                         "past", "fp16", "fp32", "bf16", "flash", "mea", "trt", "unfused", "flsh", "packed",
                         "separate", "auto", "unknown", "all", "nonmonotonic", "naive-cascade", "ort", "tight",
                         "8,8,8", "8,8", "a,b,c", "-1,8,8", "[]", "[[6,6]]", "{}", "null", "-", "/dev/zero",
                         "/nonexistent", "README.md", "/proc/nope", "bert-base-pmha-fp16-sm80",
                         "bert-large-pmha-fp16-sm9", "MODEL", "batch=4", "batch", "x:[1,2]", "x:[a]", "", " ",
                         *map(str, KNOWN_SMS)])
VALUES = st.one_of(NUMBERS, RANGES, ENV, WORDS, st.text(string.printable, max_size=12),
                   st.text(max_size=6))
MISSPELLED = st.builds(lambda flag, i, c: flag[:i] + c + flag[i + 1:], st.sampled_from(FLAGS), st.integers(2, 12),
                       st.sampled_from(["", "-", "_", "x", "s"]))
TOKENS = st.one_of(st.sampled_from(FLAGS), MISSPELLED, VALUES, st.builds(lambda f, v: f"{f}={v}",
                                                                          st.sampled_from(FLAGS), VALUES))


class _Engines:
    """Stand-ins for Z3 and the simulator: each keeps the real handler's argument handling."""

    def __init__(self, monkeypatch: Any, model_path: str) -> None:
        from attnws.command import target_from_args
        from attnws.solver import commands as solver

        def solver_handler(ns: Any, progress: Any) -> CommandResult:
            solver.limits_from_args(ns)
            if getattr(ns, "kind", None) is not None:
                if ns.limit < 1 or (ns.max_elements is not None and ns.max_elements < 1):
                    return CommandResult(2, "", {})
            if not (getattr(ns, "write_ledger", False) or getattr(ns, "check_ledger", False)):
                target_from_args(ns)
            return CommandResult(EXIT_OK, "stand-in", {})

        for name in ("prove", "counterexamples"):
            monkeypatch.setitem(SUBPARSERS.choices[name]._defaults, "handler", solver_handler)
        monkeypatch.setattr(solver, "tight_report", lambda target, progress=None, limits=None: {
            "ort_total_bytes": 1, "tight_total_bytes": 1, "bytes_saved": 0, "kept_routes": {}, "dropped_routes": [],
            "undecided_routes": [], "verdict": "PROVED"})
        monkeypatch.setattr("attnws.kernels.budget.RunLimits.refusal", lambda self, cost: "too large (fuzz stand-in)")
        monkeypatch.setattr("attnws.model.prove.check_nodes", lambda *args, **kwargs: [])
        self.model_path = model_path


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> str:
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path_factory.mktemp("fuzz") / "model.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=1, hidden=64, heads=4, ffn=64)), str(path))
    return str(path)


@pytest.fixture
def engines(monkeypatch, model_path):
    return _Engines(monkeypatch, model_path)


def run_vector(argv: list[str], model_path: str, stdin: str = "[]") -> int:
    """Run main on argv (MODEL replaced by the fuzz model); return the exit code."""
    import sys

    argv = [model_path if a == "MODEL" else a for a in argv]
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
        run_vector([command, *tokens], engines.model_path)

    vector()
    assert COUNTS["soup"] >= VECTORS["soup"]


@st.composite
def mutated(draw) -> list[str]:
    argv = list(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 1, 2]))):
        kind = draw(st.sampled_from(["replace", "drop", "insert", "duplicate", "swap-command"]))
        position = draw(st.integers(1, max(1, len(argv) - 1))) if len(argv) > 1 else 1
        if kind == "replace" and len(argv) > 1:
            argv[position] = draw(st.one_of(NUMBERS, RANGES, WORDS, ENV, st.integers(0, 600).map(str), VALUES))
        elif kind == "drop" and len(argv) > 1:
            del argv[position]
        elif kind == "insert":
            argv[position:position] = [draw(st.sampled_from(FLAGS)), draw(VALUES)]
        elif kind == "duplicate" and len(argv) > 1:
            argv.insert(position, argv[position])
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
        run_vector(argv, engines.model_path)

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
            run_vector(["validate", "--shapes", source], engines.model_path, stdin=text)
        else:
            run_vector([command, "--target", str(path)], engines.model_path)

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
        run_vector(["model", path, *[part for option in options for part in option]], engines.model_path)

    vector()
    assert COUNTS["model"] >= VECTORS["model"]


def test_at_least_ten_thousand_vectors_run():
    assert sum(VECTORS.values()) >= 10_000
