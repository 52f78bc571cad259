"""`attnws plot`: the picture's size, the committed README pictures are current, and bad flags
are usage errors (exit 2), never tracebacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from matplotlib import image

from attnws.plot.render import DPI, HEIGHT_IN, WIDTH_IN, byte_label, render
from attnws.plot.series import compute_series
from attnws.spec.target import DEFAULT_TARGET
from tests.cli.helpers import attnws

ROOT = Path(__file__).resolve().parents[2]
# The README's pictures: (picture, the command that draws it and prints its series).
PICTURES = {
    "default-target-seq": ["plot", "--sweep", "seq"],
    "bert-base-pmha-fp32-sm80-seq": ["plot", "--target", "bert-base-pmha-fp32-sm80", "--sweep", "seq"],
}


def test_the_png_has_the_expected_pixel_size(tmp_path):
    out = tmp_path / "seq.png"
    run = attnws("plot", "--target", "bert-base-pmha-fp32-sm80", "--sweep", "seq", "--out", str(out))
    assert run.code == 0, run.err
    assert f"wrote {out}" in run.out and "non-monotonic pair S 255 -> 256" in run.out
    pixels = image.imread(out)
    assert pixels.shape[:2] == (round(HEIGHT_IN * DPI), round(WIDTH_IN * DPI))


def test_svg_renders_and_the_json_names_the_file(tmp_path):
    out = tmp_path / "batch.svg"
    doc = attnws("plot", "--sweep", "batch", "--at", "seq=128", "--out", str(out), "--json").json()
    assert next(iter(doc)) == "schema_version" and doc["out"] == str(out) and doc["held"]["seq"] == 128
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_a_sweep_where_no_shape_runs_still_renders(tmp_path):
    out = tmp_path / "none.png"
    run = attnws("plot", "--target", "pa-fp32-sm80-all-shapes-fail", "--sweep", "batch", "--out", str(out))
    assert run.code == 0, run.err
    assert image.imread(out).shape[:2] == (round(HEIGHT_IN * DPI), round(WIDTH_IN * DPI))


@pytest.mark.parametrize("name", PICTURES)
def test_the_committed_readme_pictures_are_current(name):
    argv = PICTURES[name]
    picture, data = ROOT / "docs" / f"{name}.png", ROOT / "docs" / f"{name}.json"
    regenerate = f"regenerate with: attnws {' '.join(argv)} --out docs/{name}.png --json > docs/{name}.json"
    assert picture.is_file() and data.is_file(), regenerate
    committed = json.loads(data.read_text())
    committed.pop("out", None)
    fresh = attnws(*argv, "--json").json()
    assert fresh == committed, f"docs/{name}.json is out of date; {regenerate}"
    assert f"docs/{name}.png" in (ROOT / "README.md").read_text(), "the README shows every committed picture"


def test_byte_labels():
    assert [byte_label(v) for v in (0, 16, 4096, 1.5 * 2**20, 2**31)] == ["0 B", "16 B", "4 KiB", "1.5 MiB", "2 GiB"]


def test_render_returns_its_seconds(tmp_path):
    s = compute_series(DEFAULT_TARGET, "seq", proofs=False)
    assert render(s, tmp_path / "x.png") > 0


BAD = {
    "unknown-sweep": (["--sweep", "heads", "--json"], "invalid choice"),
    "misspelled-sweep": (["--sweep", "sq", "--json"], "did you mean 'seq'"),
    "no-sweep": (["--json"], "--sweep"),
    "no-out-nor-json": (["--sweep", "seq"], "--out FILE.png|FILE.svg is required"),
    "jpg": (["--sweep", "seq", "--out", "x.jpg"], "must be a .png or .svg"),
    "no-extension": (["--sweep", "seq", "--out", "picture"], "must be a .png or .svg"),
    "missing-folder": (["--sweep", "seq", "--out", "/nonexistent-attnws/x.png"], "does not exist"),
    "unwritable-place": (["--sweep", "batch", "--out", "/proc/attnws.png"], "cannot write"),
    "out-is-a-folder": (["--sweep", "seq", "--out", "DIR.png"], "is a folder"),
    "at-the-swept-dimension": (["--sweep", "seq", "--at", "seq=3", "--json"], "the swept dimension"),
    "at-outside-the-range": (["--sweep", "seq", "--at", "batch=99", "--json"], "outside the target's range 1..32"),
    "at-not-a-number": (["--sweep", "seq", "--at", "batch=x", "--json"], "not an integer"),
    "at-unknown-name": (["--sweep", "seq", "--at", "colour=3", "--json"], "not a dimension"),
    "at-no-value": (["--sweep", "seq", "--at", "batch", "--json"], "expected NAME=VALUE"),
    "at-twice": (["--sweep", "seq", "--at", "batch=2", "--at", "batch=3", "--json"], "given twice"),
    "problem-flags-beside-target": (["--target", "bert-base-pmha-fp32-sm80", "--seq", "8", "--sweep", "seq", "--json"],
                                    "fixes the problem"),
}


@pytest.mark.parametrize("argv, words", BAD.values(), ids=BAD.keys())
def test_bad_flags_are_usage_errors(argv, words, tmp_path):
    (tmp_path / "DIR.png").mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run = attnws("plot", *argv)
    finally:
        os.chdir(cwd)
    assert run.code == 2, (run.code, run.err)
    assert words in run.err and "Traceback" not in run.err + run.out


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_is_a_usage_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    run = attnws("plot", "--sweep", "seq", "--out", str(folder / "x.png"))
    assert run.code == 2 and "cannot write" in run.err
