"""Issue 10, "Output a person must decode", "Committed targets" and the README: text without
Python reprs, bytes with units, identical nodes grouped, schema_version in every JSON document,
the committed targets shipped and listed, a complete --help, README examples that parse."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from attnws.cli import build_parser
from attnws.spec.command_line import EXIT_OK, JSON_SCHEMA_VERSION, PROOFS_DIR, TARGETS_DIR, committed_target_names

from .helpers import REPR_MARKS, attnws

ROOT = Path(__file__).resolve().parents[2]
ONE = ["--op", "pmha", "--batch", "2", "--seq", "4", "--heads", "2", "--head-size", "8"]
SHAPES = json.dumps([{"op": "pmha", "batch": 1, "seq": 4, "heads": 1, "head_size": 8}])


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path_factory.mktemp("model") / "enc.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=12, hidden=64, heads=4, ffn=64)), str(path))
    return str(path)


MODEL_DIMS = ["--dim", "batch=4", "--dim", "seq=8", "--dim", "token_count=24", "--dim", "batch_plus_1=5"]

TEXT_COMMANDS = {
    "estimate-default": ["estimate"],
    "estimate-target": ["estimate", "--target", "bert-base-pa-fp16-sm75"],
    "estimate-pa": ["estimate", "--op", "pa", "--batch", "8", "--seq", "128", "--heads", "12", "--head-size", "64"],
    "estimate-unavailable": ["estimate", "--target", "long-seq-pmha-fp32-sm80"],
    "estimate-hints": ["estimate", "--op", "pa", "--heads", "2", "--qkv-hidden-sizes", "8,8,8", "--input-shapes",
                       "[[6,6],[6,24],[24],[2,4],[3],null]"],
    "recipe": ["recipe", *ONE, "--backend", "unfused"],
    "recipe-pa": ["recipe", "--op", "pa", "--backend", "unfused", "--batch", "2", "--seq", "4", "--heads", "2",
                  "--head-size", "4", "--tokens", "6"],
    "dispatch": ["dispatch", "--op", "pmha", "--batch", "1", "--seq", "512", "--heads", "12", "--head-size", "64",
                 "--sm", "90"],
    "targets": ["targets"],
    "validate": ["validate", "--shapes", "-"],
}


@pytest.mark.parametrize("argv", TEXT_COMMANDS.values(), ids=TEXT_COMMANDS.keys())
def test_text_output_has_no_python_reprs(argv):
    run = attnws(*argv, stdin=SHAPES)
    assert run.code in (0, 1) and run.out
    assert not any(mark in run.out for mark in REPR_MARKS), run.out


def test_bytes_read_with_units():
    out = attnws("estimate").out
    assert "total workspace      478,150,656 B (456.0 MiB)" in out
    assert "level-2 requirement  one slot-0 workspace of 478,150,656 B (456.0 MiB), 256-byte aligned" in out


def test_identical_model_nodes_print_once(encoder):
    run = attnws("model", encoder, *MODEL_DIMS)
    assert run.code == EXIT_OK
    assert "12 attention node(s), 12 sized, 1 distinct" in run.out
    assert "attention_0, attention_1, ..., attention_11 (x12, identical) in graph main" in run.out
    assert run.out.count("level-2 requirement") == 1
    assert not any(mark in run.out for mark in REPR_MARKS), run.out


def test_model_proofs_print_once_per_target(encoder):
    run = attnws("model", encoder, *MODEL_DIMS, "--prove")
    assert run.code == EXIT_OK
    assert "main/attention_0, main/attention_1, ..., main/attention_11 (x12, one target)" in run.out
    assert run.out.count("PROVED   safe_bound") == 1
    assert not any(mark in run.out for mark in REPR_MARKS), run.out


JSON_COMMANDS = {
    **{k: v for k, v in TEXT_COMMANDS.items() if k != "validate"},
    "model": "model",
    "prove": ["prove", "--theorem", "safe_bound"],
    "counterexamples": ["counterexamples", "--op", "pmha", "--dtype", "fp32", "--batch", "1", "--seq", "300",
                        "--heads", "1", "--head-size", "8", "--kind", "nonmonotonic"],
    "rejected": ["recipe", "--op", "pa", "--backend", "flash", *ONE[2:]],
}


@pytest.mark.parametrize("name", JSON_COMMANDS)
def test_every_json_document_carries_the_schema_version(name, encoder):
    argv = ["model", encoder, *MODEL_DIMS] if name == "model" else JSON_COMMANDS[name]
    doc = attnws(*argv, "--json").json()
    assert next(iter(doc)) == "schema_version" and doc["schema_version"] == JSON_SCHEMA_VERSION


def test_validate_json_lines_each_carry_the_schema_version():
    lines = attnws("validate", "--shapes", "-", "--json", stdin=SHAPES).lines()
    assert [line["record"] for line in lines] == ["result", "summary"]
    assert all(line["schema_version"] == JSON_SCHEMA_VERSION for line in lines)


def test_the_schema_page_documents_every_command():
    page = (ROOT / "docs" / "json-schema.md").read_text()
    for command in ("recipe", "dispatch", "estimate", "targets", "validate", "model", "prove / counterexamples"):
        assert f"## {command}" in page
    for field in ("schema_version", "total_workspace_bytes", "requirements", "bytes_saved", "refused",
                  "simulator_seconds", "smaller_allocates_more", "peak_total_bytes", "notes"):
        assert field in page


def test_targets_lists_every_committed_target_with_its_description():
    doc = attnws("targets", "--json").json()
    assert [t["name"] for t in doc["targets"]] == committed_target_names()
    assert len(doc["targets"]) >= 19 and all(t["description"] for t in doc["targets"])
    text = attnws("targets").out
    assert "bert-large-pmha-fp16-sm90  " in text and "H100" in text


def test_targets_and_ledger_are_package_data():
    package = ROOT / "attnws"
    assert PROOFS_DIR == package / "proofs" and TARGETS_DIR == package / "proofs" / "targets"
    assert (PROOFS_DIR / "ledger.json").is_file() and len(list(TARGETS_DIR.glob("*.json"))) >= 19
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["attnws"]
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    gqa_targets = [t for t in TARGETS_DIR.glob("*.json") if '"op": "gqa"' in t.read_text()]
    assert len(gqa_targets) >= 7
    assert shipped == {*TARGETS_DIR.glob("*.json"), PROOFS_DIR / "ledger.json"}


def test_license_is_an_spdx_string():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT" and project["project"]["license-files"] == ["LICENSE"]
    assert any(r.startswith("setuptools>=7") and int(r.split(">=")[1]) >= 77
               for r in project["build-system"]["requires"])


def ignored_names(scratch: Path, names: list[str], folders: tuple[str, ...] = ()) -> list[str]:
    """Return the names this tree's .gitignore ignores, as git reads it, asked in a scratch
    repository that holds only that file and `folders` (a pattern ending in / matches only a folder
    that exists): the answer is the .gitignore's alone, the same in a checkout whatever it holds
    and in a source tarball, which has no .git. No user-wide or template ignore file is read."""
    subprocess.run(["git", "init", "-q", "--template=", str(scratch)], check=True, capture_output=True)
    shutil.copyfile(ROOT / ".gitignore", scratch / ".gitignore")
    for folder in folders:
        (scratch / folder).mkdir()
    asked = subprocess.run(["git", "-c", "core.excludesFile=/dev/null", "check-ignore", *names], cwd=scratch,
                           capture_output=True, text=True)
    assert asked.returncode in (0, 1), asked.stderr  # 1: none ignored
    return asked.stdout.split()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed: nothing reads .gitignore as git does")
@pytest.mark.skipif(not (ROOT / ".gitignore").is_file(), reason="this tree ships no .gitignore")
def test_generated_files_are_ignored_and_test_models_are_not(tmp_path):
    models = sorted((ROOT / "tests" / "data").rglob("*.onnx"))
    assert ROOT / "tests/data/genai/llama3-8b-fp16/model.onnx" in models
    generated = ["enc.onnx", "q.smt2", ".venv", "OUT"]
    names = generated + [str(m.relative_to(ROOT)) for m in models]
    assert ignored_names(tmp_path, names, folders=(".venv",)) == generated


def test_help_is_complete():
    top = attnws("--help")
    assert top.code == 0
    for words in ("exit codes", "130", "N is a maximum (1..N)", "LO..HI", "32 TRT flash",
                  "ORT_DISABLE_FUSED_ATTENTION", "--sm: one of 75, 80, 86, 89, 90, 120", "schema_version"):
        assert words in top.out, words
    prove = attnws("prove", "--help").out
    assert "default: 20000000" in prove.replace(",", "")
    for command in ("recipe", "dispatch", "estimate", "targets", "prove", "counterexamples", "validate", "model"):
        run = attnws(command, "--help")
        assert run.code == 0 and "exit codes" in run.out
        described = build_parser()._subparsers._group_actions[0].choices[command].description
        assert described and len(described) > 20, command


def test_python_dash_m_attnws_works():
    proc = subprocess.run([sys.executable, "-m", "attnws", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("attnws ")


def readme_commands(first: str = "attnws targets") -> list[list[str]]:
    """Return every attnws command line of the README's example block that starts with `first`
    (pipelines split)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(rf"```sh\n({re.escape(first)}.*?)```", text, re.S).group(1)
    out = []
    for line in block.splitlines():
        for part in line.split(" | "):
            words = shlex.split(part, comments=True)
            if words and words[0] == "attnws":
                out.append(words[1:])
    return out


def test_every_readme_example_parses():
    parser = build_parser()
    commands = readme_commands()
    assert len(commands) >= 9
    gqa = readme_commands("attnws prove --target qwen2.5-1.5b-fp16-sm80")
    assert len(gqa) == 5
    commands += gqa
    paged = [*readme_commands("attnws prove --target llama-3-8b-paged-bs16-sm80"),
             *readme_commands("attnws counterexamples --target llama-3-8b-paged-bs16-sm80"),
             *readme_commands("attnws dispatch --op paged"), *readme_commands("attnws validate --op paged")]
    assert len(paged) == 8 and all("paged" in " ".join(argv) for argv in paged)
    commands += paged
    for argv in commands:
        ns, extras = parser.parse_known_args(argv)
        assert not extras and ns.command, argv


def test_readme_quick_start_puts_the_venv_on_path_and_keeps_two_setup_commands():
    text = (ROOT / "README.md").read_text()
    quick = re.search(r"## Quick start\n.*?```sh\n(.*?)```", text, re.S).group(1)
    lines = [line for line in quick.splitlines() if line.strip()]
    assert len(lines) == 2
    assert ". .venv/bin/activate" in lines[0] and "attnws prove" in lines[0]
    assert "pytest -q" in lines[1]
    assert "pytest -q" in (ROOT / ".ci" / "run").read_text()
