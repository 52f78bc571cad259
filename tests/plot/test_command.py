"""`attnws plot`: the picture's size, the committed README pictures are current, and bad flags
are usage errors (exit 2), never tracebacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from matplotlib import image

from tools.gallery import PICTURES, regenerate
from attnws.plot.render import DPI, HEIGHT_IN, WIDTH_IN, byte_label, render
from attnws.plot.series import compute_series
from attnws.spec.target import DEFAULT_TARGET
from tests.cli.helpers import attnws

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "regenerate with: python tools/gallery.py docs"


def test_the_png_has_the_expected_pixel_size(tmp_path):
    out = tmp_path / "seq.png"
    run = attnws("plot", "--target", "bert-base-pmha-fp32-sm80", "--sweep", "seq", "--out", str(out))
    assert run.code == 0, run.err
    assert f"wrote {out}" in run.out and "non-monotonic pair S 255 -> 256" in run.out
    assert "not drawn: trt (needs fp16, element size = 4)" in run.out
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


def test_the_committed_readme_pictures_are_current(tmp_path):
    """The documented command redraws every committed picture; its series equal the committed ones,
    and the README shows each picture and its command, writing to a scratch path, never into docs/."""
    written = regenerate(tmp_path)
    assert sorted(p.name for p in written) == sorted(f"{n}.{ext}" for n in PICTURES for ext in ("png", "json"))
    readme = (ROOT / "README.md").read_text()
    assert REGENERATE.split(": ")[1] in readme
    for name, argv in PICTURES.items():
        committed = ROOT / "docs" / f"{name}.json"
        assert (ROOT / "docs" / f"{name}.png").is_file() and committed.is_file(), REGENERATE
        fresh = json.loads((tmp_path / f"{name}.json").read_text())
        assert list(fresh)[:2] == ["schema_version", "ort_version"]
        assert fresh == json.loads(committed.read_text()), f"docs/{name}.json is out of date; {REGENERATE}"
        assert f"docs/{name}.png" in readme, "the README shows every committed picture"
        shown = " ".join(arg if " " not in arg else f"'{arg}'" for arg in argv)
        assert f"attnws {shown} --out /tmp/" in readme, f"the README gives the command of docs/{name}.png"
    assert "--out docs/" not in readme, "README examples write to a scratch path, not over the committed pictures"


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
    "at-not-a-number": (["--sweep", "seq", "--at", "batch=x", "--json"], "not a non-negative integer"),
    "at-other-digits": (["--sweep", "seq", "--at", "batch=\u0668", "--json"], "not a non-negative integer"),
    "at-hv-apart-from-h": (["--target", "mha-whisper-decoder-cross-fp16-sm75", "--sweep", "seq", "--at",
                            "v-head-size=1000", "--json"], "ties Hv = H: Hv = 64 on this line"),
    "at-hv-while-h-swept": (["--sweep", "head-size", "--at", "v-head-size=64", "--json"], "the sweep moves it"),
    "at-k-apart-from-nh": (["--op", "pa", "--batch", "2", "--seq", "64", "--heads", "4", "--head-size", "32",
                            "--sweep", "seq", "--at", "input-hidden=5", "--json"], "ties K = N*H: K = 128"),
    "at-l-apart-from-s": (["--op", "mha", "--batch", "2", "--seq", "64", "--heads", "4", "--head-size", "32",
                           "--sweep", "batch", "--at", "kv-seq=5", "--json"], "ties L = S: L = 64"),
    "at-past-without-range": (["--op", "mha", "--batch", "2", "--seq", "64", "--heads", "4", "--head-size", "32",
                               "--with-past", "--sweep", "seq", "--at", "past=3", "--json"], "ties P = 0"),
    "at-tokens-over-b-s": (["--sweep", "head-size", "--at", "tokens=16385", "--json"], "outside 1..B*S = 1..16384"),
    "sweep-past-without-range": (["--op", "mha", "--batch", "2", "--seq", "64", "--heads", "4", "--head-size", "32",
                                  "--with-past", "--sweep", "past", "--json"], "no past range, so P = 0"),
    "sweep-l-without-range": (["--op", "mha", "--batch", "2", "--seq", "64", "--heads", "4", "--head-size", "32",
                               "--sweep", "kv-seq", "--json"], "no kv_seq range, so L = S"),
    "compare-unknown-key": (["--sweep", "seq", "--compare", "colour=1,2", "--json"], "KEY one of sm, sm_count, sdpa_kernel"),
    "compare-one-value": (["--sweep", "seq", "--compare", "sm=80", "--json"], "two or more"),
    "compare-same-twice": (["--sweep", "seq", "--compare", "flash_build=on,true", "--json"], "the same configuration"),
    "compare-unknown-sm": (["--sweep", "seq", "--compare", "sm=80,91", "--json"], "--compare sm=91"),
    "compare-bad-env": (["--sweep", "seq", "--compare", "env=ORT_X=1,ORT_DISABLE_FLASH_ATTENTION=1", "--json"],
                        "--compare env=ORT_X=1"),
    "compare-and-its-flag": (["--sweep", "seq", "--compare", "sm=80,90", "--sm", "86", "--json"], "both set sm"),
    "compare-env-and-env": (["--sweep", "seq", "--compare", "env=ORT_DISABLE_FLASH_ATTENTION=0,"
                             "ORT_DISABLE_FLASH_ATTENTION=1", "--env", "ORT_DISABLE_FLASH_ATTENTION=1", "--json"],
                            "both set ORT_DISABLE_FLASH_ATTENTION"),
    "compare-twice": (["--sweep", "seq", "--compare", "sm=80,90", "--compare", "sm=86,89", "--json"], "given 2 times"),
    "compare-bad-bool": (["--sweep", "seq", "--compare", "mea-build=on,maybe", "--json"], "expected on or off"),
    "title-tab": (["--sweep", "seq", "--title", "a\tb", "--json"], "one line of printable text"),
    "title-empty": (["--sweep", "seq", "--title", " ", "--json"], "one line of printable text"),
    "title-too-long": (["--sweep", "seq", "--title", "x" * 121, "--json"], "1 to 120 characters"),
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
