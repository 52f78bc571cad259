"""Memory patterns in `attnws plot` (issue 20): each pattern's proven maximum is drawn over the part
of the line inside its box, every runtime there at most that maximum; a pattern the line does not
meet is named "not on this line"; an undecided maximum draws nothing; the tight line is the proven
maximum (or the route-dropping bound, said so); and the labels written on the picture never overlap."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import matplotlib.pyplot as plt
import pytest

from attnws.spec.command_line import load_target_arg
from attnws.plot.render import PATTERN_COLORS, draw_series
from attnws.plot.series import Series, compute_series
from attnws.spec.target import DEFAULT_TARGET, Pattern, Target
from tests.cli.helpers import attnws

DECODER = "mha-decoder-past-fp32-sm80"  # B <= 8, S <= 512, P <= 1536: unfused below S = 256, MEA from 256
PATTERN_FLAGS = ["--pattern", "decode:seq=1", "--pattern", "prefill:past=0"]
DECODE_MAX, PREFILL_MAX, TARGET_MAX = 1_254_400, 68_740_096, 369_550_336  # B=8 S=1 P=1536; B=8 S=255 P=0; S=255 P=1536
LINES = {  # (sweep, --at): (decode's x_range, prefill's x_range)
    ("seq", ()): ([1, 1], None),
    ("seq", ("past=0",)): ([1, 1], [1, 512]),
    ("past", ()): (None, [0, 0]),
    ("past", ("seq=1",)): ([0, 1536], [0, 0]),
    ("past", ("seq=300", "batch=2")): (None, [0, 0]),
}


@lru_cache(maxsize=None)
def plotted(sweep: str, at: tuple[str, ...]) -> dict:
    argv = ["plot", "--target", DECODER, *PATTERN_FLAGS, "--sweep", sweep, "--json"]
    for value in at:
        argv += ["--at", value]
    run = attnws(*argv)
    assert run.code == 0, run.err
    return run.json()


def decoder() -> Target:
    return replace(load_target_arg(DECODER), patterns=(Pattern.parse("decode:seq=1"), Pattern.parse("prefill:past=0")))


@lru_cache(maxsize=None)
def series(sweep: str, at: tuple[tuple[str, int], ...] = ()) -> Series:
    return compute_series(decoder(), sweep, dict(at))


def shape(doc: dict, x: int) -> dict:
    """The shape of one plotted value, stated here: L = S, P = 0 unless held or swept."""
    dims = {**doc["held"], {"seq": "seq", "past": "past"}[doc["sweep"]]: x}
    return {"batch": dims["batch"], "seq": dims["seq"], "past": dims.get("past", 0)}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("sweep, at", LINES, ids=[f"{s}-{'-'.join(a) or 'max'}" for s, a in LINES])
def test_every_runtime_inside_a_pattern_is_at_most_its_proven_maximum(sweep, at):
    """The regression of issue 20 on the committed decoder target, decode (S = 1) and prefill
    (P = 0) given by --pattern: each pattern's proven maximum, its range on the line, and no
    plotted runtime in its box above it."""
    doc = plotted(sweep, at)
    patterns = {p["name"]: p for p in doc["patterns"]}
    assert list(patterns) == ["decode", "prefill"]
    assert patterns["decode"]["dims"] == {"seq": "1..1"} and patterns["prefill"]["dims"] == {"past": "0..0"}
    for name, maximum, ratio in (("decode", DECODE_MAX, 672.078367), ("prefill", PREFILL_MAX, 12.264386)):
        assert patterns[name]["verdict"] == "PROVED" and patterns[name]["max_runtime_bytes"] == maximum
        assert patterns[name]["ratio"] == ratio == round(doc["series"]["ort_estimate_bytes"] / maximum, 6)
    assert [patterns["decode"]["x_range"], patterns["prefill"]["x_range"]] == list(LINES[sweep, at])
    boxes = {"decode": lambda d: d["seq"] == 1, "prefill": lambda d: d["past"] == 0}
    met = 0
    for x, runtime in zip(doc["x"], doc["series"]["runtime_bytes"]):
        d = shape(doc, x)
        for name, inside in boxes.items():
            x_range = patterns[name]["x_range"]
            assert inside(d) == (x_range is not None and x_range[0] <= x <= x_range[1]), (name, x)
            if inside(d):
                met += 1
                assert runtime is not None and runtime <= patterns[name]["max_runtime_bytes"], (name, x, runtime)
    assert met == sum(0 if r is None else r[1] - r[0] + 1 for r in LINES[sweep, at])
    series_doc = doc["series"]
    assert series_doc["tight_method"] == "proven maximum" and series_doc["tight_bound_verdict"] == "PROVED"
    assert series_doc["tight_bound_bytes"] == series_doc["proven_max_bytes"] == TARGET_MAX
    assert series_doc["tight_witness"]["seq"] == 255 and series_doc["tight_witness"]["past"] == 1536


def test_the_pattern_whose_box_holds_the_line_reaches_the_runtime_there():
    """Along P at S = 1 the decode maximum is the runtime at the largest past (its witness)."""
    doc = plotted("past", ("seq=1",))
    assert doc["series"]["runtime_bytes"][-1] == DECODE_MAX and doc["x"][-1] == 1536


def test_the_text_names_each_pattern_its_maximum_and_where_the_line_meets_it(tmp_path):
    out = tmp_path / "prefill.svg"
    run = attnws("plot", "--target", DECODER, *PATTERN_FLAGS, "--sweep", "seq", "--at", "past=0", "--out", str(out))
    assert run.code == 0, run.err
    assert out.is_file()
    assert "tight policy = proven maximum 369,550,336 B (352.4 MiB) (PROVED), needed at B=8 S=255 N=12 H=64 " \
           "P=1536 (unfused)" in run.out
    assert "memory pattern decode (S = 1): proven max 1,254,400 B (1.2 MiB), 672.1x below attnws's estimate, " \
           "needed at B=8 S=1 N=12 H=64 P=1536 (unfused); on this line at S = 1\n" in run.out
    assert "memory pattern prefill (P = 0): proven max 68,740,096 B (65.6 MiB), 12.3x below attnws's estimate, " \
           "needed at B=8 S=255 N=12 H=64 P=0 (unfused); on this line at S = 1..512\n" in run.out
    assert not [line for line in run.out.splitlines() if line.startswith("  proven maximum")]  # the tight policy
    off = attnws("plot", "--target", DECODER, *PATTERN_FLAGS, "--sweep", "seq", "--at", "past=7", "--out",
                 str(tmp_path / "off.png"))
    assert off.code == 0 and "memory pattern prefill (P = 0): proven max 68,740,096 B" in off.out
    assert "; not on this line\n" in off.out


def drawn(s: Series) -> tuple[list[str], list[str], object, object]:
    fig, ax = plt.subplots(figsize=(12.0, 6.75), dpi=100)
    draw_series(ax, s)
    fig.subplots_adjust(left=0.09, right=0.69, top=0.86, bottom=0.1)
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    return labels, [t.get_text() for t in ax.texts], ax, fig


def overlaps(ax: object, fig: object) -> list[tuple[str, str]]:
    """Return each pair of texts written on the axes (and the title) whose boxes intersect, and
    each pattern name outside the axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in [*ax.texts, ax.title] if t.get_text()]
    out = [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]
    frame = ax.get_window_extent(renderer)
    out += [(t.get_text(), "outside the axes") for t in ax.texts if t.get_text() in ("decode", "prefill")
            and not (frame.x0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).y0 >= frame.y0)]
    return out


@pytest.mark.parametrize("sweep, at", [("seq", ()), ("seq", (("past", 0),)), ("past", ()), ("past", (("seq", 1),))])
def test_the_picture_draws_each_pattern_over_its_range_and_names_the_others(sweep, at):
    s = series(sweep, at)
    labels, texts, ax, fig = drawn(s)
    assert "tight policy = proven maximum over target: 352.4 MiB" in labels
    for line, color in zip(s.patterns, PATTERN_COLORS):
        segments = [l for l in ax.get_lines() if l.get_color() == color]
        if line.x_range is None:
            assert not segments and line.name not in texts
            assert any(label.startswith(f"{line.name} (") and label.endswith("not on this line") for label in labels)
            continue
        lo, hi = line.x_range
        assert segments and all(list(l.get_xdata())[0] == lo and list(l.get_xdata())[-1] == hi for l in segments)
        assert all(set(l.get_ydata()) == {line.max_bytes} for l in segments)
        over = f"drawn over {'S' if sweep == 'seq' else 'P'} = {lo if lo == hi else f'{lo}..{hi}'}"
        ratio = {"decode": "1.2 MiB, 672.1x", "prefill": "65.6 MiB, 12.3x"}[line.name]
        assert f"{line.name} ({line.box}): proven max {ratio} below attnws's estimate; {over}" in labels
        assert line.name in texts
    assert overlaps(ax, fig) == []


def test_the_committed_pattern_picture_keeps_its_labels_apart():
    """docs/mha-decoder-kv-cache-fp32-sm80-prefill-seq.png: the target file's own patterns."""
    s = compute_series(load_target_arg("mha-decoder-kv-cache-fp32-sm80"), "seq", {"past": 0})
    assert [(p.name, p.x_range) for p in s.patterns] == [("prefill", (1, 2048)), ("decode", (1, 1))]
    _, texts, ax, fig = drawn(s)
    assert {"prefill", "decode", "S 255 \u2192 256"} <= set(texts)
    assert overlaps(ax, fig) == []


def test_a_pattern_at_0_bytes_and_patterns_sharing_a_start_keep_their_labels_apart():
    """On the default target every runtime is 0 B: a pattern there is named above the band, not
    below the axis, and two patterns starting at one place are stacked."""
    t = replace(DEFAULT_TARGET, patterns=(Pattern.parse("small:batch=1..4"), Pattern.parse("short:seq=1..64"),
                                          Pattern.parse("shorter:seq=1..16")))
    s = compute_series(t, "seq", {"batch": 2})
    assert [p.x_range for p in s.patterns] == [(1, 512), (1, 64), (1, 16)] and {p.max_bytes for p in s.patterns} == {0}
    _, texts, ax, fig = drawn(s)
    assert "runtime on TRT fused = tight policy = proven maximum = small max = short max = shorter max: 0 B" in texts
    assert overlaps(ax, fig) == []


def test_an_undecided_pattern_draws_nothing_and_says_so(monkeypatch):
    from attnws.solver import tight
    from attnws.solver.gateway import Verdict

    real = tight.pattern_maximum

    def undecided(target, pattern, limits=None, whole=None):
        result = real(target, pattern, limits, whole)
        if pattern.name != "decode":
            return result
        return replace(result, verdict=Verdict.UNKNOWN, details={"pattern": "decode"},
                       reason="the maximum search was not decided (raise --rlimit or --timeout-ms)")

    monkeypatch.setattr(tight, "pattern_maximum", undecided)
    s = compute_series(decoder(), "seq", {"past": 0})
    decode = s.patterns[0]
    assert decode.verdict == "UNKNOWN" and decode.max_bytes is None and decode.x_range == (1, 1)
    assert s.as_dict()["patterns"][0]["max_runtime_bytes"] is None
    labels, texts, ax, _ = drawn(s)
    assert "decode" not in texts and not [l for l in ax.get_lines() if l.get_color() == PATTERN_COLORS[0]]
    assert "decode (S = 1): maximum undecided: the maximum search was not decided (raise --rlimit or --timeout-ms); " \
           "not drawn" in labels
    from attnws.plot.commands import pattern_text

    assert "decode (S = 1): maximum undecided: the maximum search was not decided (raise --rlimit or --timeout-ms), " \
           "not drawn; on this line at S = 1" == pattern_text(s, decode)


def test_a_route_dropping_tight_policy_is_labelled_so_beside_the_proven_maximum(monkeypatch):
    """When the maximum is undecided the tight policy is the route-dropping bound: its line says
    so, and the proven maximum (asked of the tightness theorem) keeps its own line."""
    from attnws.solver import tight

    real = tight.tight_policy

    def fallback(target, limits=None, ctx=None):
        policy = real(target, limits, ctx)
        return replace(policy, method=tight.ROUTE_DROPPING, tight_total_bytes=policy.ort_total_bytes, witness=None)

    monkeypatch.setattr(tight, "tight_policy", fallback)
    s = compute_series(load_target_arg("bert-base-pmha-fp32-sm80"), "seq", proofs=True)
    assert s.tight_method == "route-dropping bound" and s.tight_bytes == 1_912_602_624 and not s.tight_is_maximum
    assert s.max_bytes == 549_918_720 and s.max_verdict == "PROVED"
    doc = s.as_dict()["series"]
    assert doc["tight_method"] == "route-dropping bound" and doc["tight_witness"] is None
    labels, texts, ax, _ = drawn(s)
    assert "tight policy = route-dropping bound (proved safe; the maximum undecided): 1.8 GiB" in labels
    assert "proven max over target: 524.4 MiB" in labels
    assert "ORT's AOT estimate = tight policy = route-dropping bound: 1.8 GiB" in texts
    from attnws.plot.commands import summary

    lines = summary(s)
    assert "  tight policy = route-dropping bound 1,912,602,624 B (1.8 GiB) (PROVED; the maximum undecided)" in lines
    assert "  proven maximum 549,918,720 B (524.4 MiB) (PROVED)" in lines


def test_a_target_files_patterns_are_drawn_without_flags(tmp_path):
    doc = attnws("plot", "--target", "mha-decoder-kv-cache-fp32-sm80", "--sweep", "past", "--at", "seq=1",
                 "--json").json()
    assert [(p["name"], p["x_range"]) for p in doc["patterns"]] == [("prefill", [0, 0]), ("decode", [0, 4095])]
    decode = doc["patterns"][1]
    assert all(y <= decode["max_runtime_bytes"] for y in doc["series"]["runtime_bytes"])
    added = attnws("plot", "--target", "mha-decoder-kv-cache-fp32-sm80", "--pattern", "small:batch=1", "--sweep",
                   "past", "--at", "seq=1", "--json").json()
    assert [p["name"] for p in added["patterns"]] == ["prefill", "decode", "small"]
    assert added["patterns"][2]["x_range"] is None  # B = 4 on this line


def test_a_compared_line_draws_each_configurations_patterns():
    from attnws.plot.render import draw_comparison
    from attnws.plot.series import compare_series, parse_compare

    key, variants = parse_compare("sm=80,90", load_target_arg("mha-decoder-kv-cache-fp16-sm90"))
    c = compare_series(key, variants, "seq", {"past": 0})
    assert all([p.name for p in s.patterns] == ["prefill", "decode"] for s in c.series)
    fig, ax = plt.subplots()
    draw_comparison(ax, c, None)
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    assert any(label.startswith("sm80: prefill (P = 0): proven max 48 MiB") for label in labels)
    assert any(label.startswith("sm90: decode (S = 1): proven max 24 KiB") for label in labels)
    texts = [t.get_text() for t in ax.texts]
    assert "sm80 decode max = sm90 decode max: 24 KiB" in texts
    assert c.as_dict()["configurations"][1]["patterns"][0]["name"] == "prefill"


BAD = {
    "outside-the-target": (["--pattern", "decode:seq=600"], "pattern decode: seq 1..600 is not inside the target's"),
    "no-such-range": (["--pattern", "cross:kv_seq=4"], "kv_seq is not a range of the target"),
    "not-a-pattern-dim": (["--pattern", "wide:heads=4"], "'heads' is not a dimension a pattern sets"),
    "no-ranges": (["--pattern", "decode"], "expected NAME:DIM=RANGE"),
    "twice": (["--pattern", "decode:seq=1", "--pattern", "decode:seq=2"], "is given twice"),
}


@pytest.mark.parametrize("argv, words", BAD.values(), ids=BAD.keys())
def test_bad_patterns_are_usage_errors(argv, words):
    run = attnws("plot", "--target", DECODER, *argv, "--sweep", "seq", "--json")
    assert run.code == 2, (run.code, run.err)
    assert words in run.err and "Traceback" not in run.err + run.out
