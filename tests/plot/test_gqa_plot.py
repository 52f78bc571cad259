"""Pictures of GroupQueryAttention: its sweeps (T, S, B) hold the model's fixed dimensions and keep
S <= T, every point is the spec's `estimate_exact` at its shape, the drops of the runtime (Flash's
split-KV count falling, issue #32453's T 13,824 -> 13,825 on 108 SMs) are marked exactly where the
bytes fall, cuDNN's points have no bytes and are never drawn as 0 B, and `--compare` overlays
devices. `plot --help` offers each sweep, held dimension, pattern dimension and compare key with
the operators that take it, and plot takes each of them there."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import lru_cache

import matplotlib.pyplot as plt
import pytest

from attnws.plot.render import draw_comparison, draw_series
from attnws.plot.series import (
    COMPARE_KEYS, HELD, SWEEPS, Point, Series, by_operators, compare_keys_of, compare_series, compute_series,
    held_of, parse_at, parse_compare, pattern_dims_of, sweeps_of,
)
from attnws.spec.aggregate import root_layout
from attnws.spec.command_line import load_target_arg
from attnws.spec.dispatch import dispatch
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.estimate import estimate_exact, runtime_problem
from attnws.spec.families import family_backends
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Op
from attnws.spec.recipe import recipe
from attnws.spec.target import DEFAULT_TARGET, DimRange, Pattern, Target
from tests.cli.helpers import attnws

LLAMA = "llama-3-8b-fp16-sm80"  # B <= 4, S <= 8192, T <= 8192, P = 8192, N = 32, Nk = 8, H = 128
LLAMA_H100 = "llama-3-8b-fp16-sm90"  # the same node on sm90: cuDNN takes the prompts, which no recipe sizes
ISSUE = ["--op", "gqa", "--batch", "1", "--seq", "1", "--heads", "2", "--kv-heads", "2", "--head-size", "64",
         "--past", "16384", "--sm", "80", "--sm-count", "108", "--env", "ORT_ENABLE_XQA=0",
         "--env", "ORT_DISABLE_FLASH_DECODE=1"]  # issue #32453: Flash split-KV, 54 -> 28 splits at T 13,825


def issue_target(total_seq: DimRange, sm_count: int = 108) -> Target:
    """Issue #32453's node: B = S = 1, N = Nk = 2, H = 64, P = 16384, XQA and Flash's fast decode off."""
    env = {"ORT_ENABLE_XQA": "0", "ORT_DISABLE_FLASH_DECODE": "1"}
    one = DimRange(1, 1)
    return Target(op=Op.GQA, element_size=2, batch=one, seq=one, heads=DimRange(2, 2), head_size=DimRange(64, 64),
                  kv_heads=DimRange(2, 2), total_seq=total_seq, past=DimRange(16384, 16384),
                  config=RuntimeConfig.make(sm=80, sm_count=sm_count, env=env), env=tuple(sorted(env.items())),
                  name="issue-32453")


@lru_cache(maxsize=None)
def target(name: str) -> Target:
    return load_target_arg(name)


@lru_cache(maxsize=None)
def series(name: str, sweep: str, at: tuple[str, ...] = ()) -> Series:
    """The line without proofs, at most about 300 points (sampling keeps both sides of every change)."""
    t = target(name)
    return compute_series(t, sweep, parse_at(list(at), sweep, t), proofs=False, max_points=300)


def small_decoder(sm: int = 80) -> Target:
    """A small GroupQueryAttention node: B <= 2, S = 1, T <= 512 over a 512-token cache, N = 8, Nk = 2,
    H = 128 (XQA's group size and head size)."""
    return Target(op=Op.GQA, element_size=2, batch=DimRange(1, 2), seq=DimRange(1, 1), heads=DimRange(8, 8),
                  head_size=DimRange(128, 128), kv_heads=DimRange(2, 2), total_seq=DimRange(1, 512),
                  past=DimRange(512, 512), max_total_seq=512, config=RuntimeConfig.make(sm=sm), name="small-decoder")


@lru_cache(maxsize=None)
def issue_series(lo: int, hi: int, sm_count: int = 108) -> Series:
    return compute_series(issue_target(DimRange(lo, hi), sm_count), "total-seq", proofs=False)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def shape_of(t: Target, sweep: str, held: dict[str, int], x: int) -> dict[str, int]:
    """The shape of one swept value, stated here: the fixed dimensions at their value, the others at
    --at or their maximum, S = min(its maximum, T) on a T sweep that does not hold S (S <= T)."""
    dims = {d: held.get(d, getattr(t, d).hi) for d in ("batch", "seq", "heads", "head_size", "kv_heads", "past",
                                                       "total_seq")}
    dims[SWEEPS[sweep]] = x
    if sweep == "total-seq" and "seq" not in held:
        dims["seq"] = min(t.seq.hi, x)
    elif sweep != "seq" and "seq" not in held:
        dims["seq"] = min(t.seq.hi, dims["total_seq"])
    return dims


LINES = [  # (target, sweep, --at): prompts along T (S = T), decode along T (XQA from T = 2), chunks along S, B
    (LLAMA, "total-seq", ()), (LLAMA, "total-seq", ("seq=1",)), (LLAMA, "seq", ("batch=1", "total-seq=600")),
    (LLAMA, "batch", ("total-seq=300",)), (LLAMA_H100, "total-seq", ("seq=1",)),
    ("qwen2.5-1.5b-fp16-sm80", "total-seq", ("seq=1", "batch=2")),
    ("mistral-7b-windowed-fp16-sm80", "total-seq", ("seq=1",)),
]


@pytest.mark.parametrize("name, sweep, at", LINES, ids=lambda v: str(v))
def test_every_gqa_point_is_estimate_exact_at_its_shape(name, sweep, at):
    """The runtime, the dispatched backends and the route's words (Flash's split count) at every
    drawn x are `estimate_exact`'s at the shape stated here; each recipe is the spec's recipe (on
    every 7th point: the recipes cost more)."""
    t, s = target(name), series(name, sweep, at)
    held = parse_at(list(at), sweep, t)
    assert s.op == "gqa" and len(s.points) > 1
    for index, p in enumerate(s.points):
        g = t.geometry(**shape_of(t, sweep, held, p.x))
        assert t.contains(g), (p.x, g)
        exact = estimate_exact(g, t.config)
        if exact.ok:
            assert p.runtime == exact.total_workspace_bytes and p.missing == ""
            assert p.dispatched == tuple(b.value for b in exact.backends)
            assert p.route == "; ".join(r.route_text() for r in exact.routes if r.route_text())
        else:
            assert p.runtime is None and p.missing
        if index % 7:
            continue
        try:
            problem = runtime_problem(g)
        except WorkspaceError:
            assert all(v is None for v in p.recipes.values())
            continue
        for backend in family_backends(t.op):
            try:
                r = recipe(problem, backend, config=t.config)
                expected = root_layout(r.projection_bytes, r.attention_workspace_bytes)[1]
            except WorkspaceError:
                expected = None
            assert p.recipes[backend.value] == expected, (backend, p.x)


def test_a_t_sweep_holds_s_at_most_t_and_says_so():
    """The prompts line: S follows T up to its maximum; a held S starts the T sweep at S."""
    s = series(LLAMA, "total-seq")
    assert s.x[0] == 1 and s.x[-1] == 8192 and "seq" not in s.held
    assert "S = min(8192, T)" in s.configuration and "P = 8192" in s.configuration and "108 SMs" in s.configuration
    held = series(LLAMA, "total-seq", ("seq=100",))
    assert held.x[0] == 100 and held.held["seq"] == 100
    assert series(LLAMA, "seq", ("batch=1", "total-seq=600")).x[-1] == 600


def test_a_windowed_cache_takes_any_s_but_its_t_sweep_still_draws_the_prompts():
    """Mistral's windowed cache: ORT takes S > T, yet along T S follows T (the prompts, S = T) up to
    the window; beyond it, S = 4096 new tokens over a past, which ORT refuses for B = 4 (grey, why)."""
    s = series("mistral-7b-windowed-fp16-sm80", "total-seq")
    assert s.x[0] == 1 and s.x[-1] == 32768 and "S = min(4096, T)" in s.configuration
    assert all(p.runtime is not None for p in s.points if p.x <= 4096)
    assert s.no_bytes() == [{"x": [4097, 32768], "dispatched": [],
                             "why": "batch_size must be 1 when sequence_length > 1 and past context is given."}]
    held = parse_at(["seq=4096", "batch=1"], "total-seq", target("mistral-7b-windowed-fp16-sm80"))
    assert compute_series(target("mistral-7b-windowed-fp16-sm80"), "total-seq", held, proofs=False,
                          max_points=50).x[0] == 1  # a held S is not clipped to T where the cache is windowed


def test_the_issue_pair_is_marked_as_the_one_drop_where_54_splits_become_28():
    """Issue #32453 on 108 SMs: T 13,824 -> 13,825 drops from 54 to 28 splits; over the whole
    1..16384 (sampled: beyond every-integer evaluation) the drop and its two sides are kept."""
    for s in (issue_series(13000, 14000), issue_series(1, 16384)):
        assert s.drops() == [(13824, 13825)]
        at = {p.x: p for p in s.points}
        assert (at[13824].route, at[13825].route) == ("54 splits", "28 splits")
        assert at[13824].runtime > at[13825].runtime
        assert s.as_dict()["drops"] == [[13824, 13825]]
        fig, ax = plt.subplots()
        draw_series(ax, s)
        marks = [line for line in ax.get_lines() if line.get_gid() == "drops"]
        assert [list(line.get_xdata()) for line in marks] == [[13825]]
        assert any(t.get_text() == "T 13824 \u2192 13825: 54 \u2192 28 splits" for t in ax.texts)
        plt.close(fig)
    other = issue_series(13000, 14000, sm_count=132)  # the SM count moves the drops: none at 13,825 on 132 SMs
    assert (13824, 13825) not in other.drops()


def planted(runtime: list[int | None], routes: list[str] | None = None) -> Series:
    """A series whose runtime is given, one Flash point per x = 1, 2, ..."""
    routes = routes or [""] * len(runtime)
    points = tuple(Point(x, y, ("flash",) if y is not None else (), {"flash": y}, route)
                   for x, (y, route) in enumerate(zip(runtime, routes), start=1))
    return Series(target="planted", configuration="planted", sweep="total-seq", held={}, points=points,
                  estimate_bytes=None, backends=family_backends(Op.GQA), op="gqa", drawn=("flash",))


def drop_marks(s: Series) -> tuple[list[list[float]], list[str]]:
    """Draw the series; return the x of every drop marker and the legend's labels."""
    fig, ax = plt.subplots()
    draw_series(ax, s)
    marks = [list(line.get_xdata()) for line in ax.get_lines() if line.get_gid() == "drops"]
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    plt.close(fig)
    return marks, labels


def test_drop_markers_fire_exactly_where_the_bytes_fall():
    """A planted line with drops at x 3 -> 4 and 6 -> 7 (a gap without bytes between them is no
    drop) gets triangles at 4 and 7 only; a line that never falls gets none, and no legend entry."""
    with_drops = planted([10, 20, 30, 15, None, 15, 5, 40], ["1 split", "2 splits", "3 splits", "2 splits", "",
                                                              "4 splits", "1 split", "9 splits"])
    assert with_drops.drops() == [(3, 4), (6, 7)]
    marks, labels = drop_marks(with_drops)
    assert marks == [[4, 7]]
    assert "runtime drop: more T, fewer bytes (2 on this line)" in labels
    close = planted([40, 30, 20, 10, 5])  # four drops side by side: their labels are moved apart
    fig, ax = plt.subplots(figsize=(12.0, 6.75), dpi=100)
    draw_series(ax, close)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts if t.get_text().startswith("T ")]
    assert len(boxes) == 4 and not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(fig)
    flat = planted([10, 10, 20, None, 20, 30])
    assert flat.drops() == []
    marks, labels = drop_marks(flat)
    assert marks == [] and not any("runtime drop" in label for label in labels)


def test_cudnn_points_have_no_bytes_and_are_never_drawn_at_0_bytes():
    """On sm90 the first prompt (T = 1, S = 1) takes cuDNN, which no recipe sizes: the point has
    no runtime (null, not 0), names cuDNN and why, is shaded, not drawn on the runtime line; ORT's
    estimate is unavailable and says why."""
    s = series(LLAMA_H100, "total-seq", ("seq=1",))
    first = s.points[0]
    assert (first.x, first.runtime, first.dispatched) == (1, None, ("cudnn",))
    assert "no graph-free recipe" in first.missing
    assert all(p.runtime is not None and p.dispatched == ("xqa",) for p in s.points[1:])
    doc = s.as_dict()
    assert doc["series"]["runtime_bytes"][0] is None and doc["series"]["dispatched"][0] == ["cudnn"]
    assert doc["no_bytes"] == [{"x": [1, 1], "dispatched": ["cudnn"], "why": first.missing}]
    assert doc["route_changes"] == [{"x": [1, 2], "from": ["cudnn"], "to": ["xqa"]}]
    assert s.estimate_bytes is None and doc["series"]["ort_estimate_unavailable"] == (
        "A reachable cuDNN GQA route has no graph-free workspace oracle.")
    fig, ax = plt.subplots()
    draw_series(ax, s)
    runtime = [line for line in ax.get_lines() if line.get_color() == "black" and line.get_linewidth() == 2.6]
    assert len(runtime) == 1 and math.isnan(runtime[0].get_ydata()[0]) and runtime[0].get_xdata()[0] == 1
    in_bytes = [line for line in ax.get_lines() if line.get_gid() not in ("route-changes", "no-bytes")]
    drawn_at_1 = [y for line in in_bytes for x, y in zip(line.get_xdata(), line.get_ydata()) if x == 1]
    assert 0 not in drawn_at_1  # nothing puts the cuDNN point at 0 B
    marks = [line for line in ax.get_lines() if line.get_gid() == "no-bytes"]  # one point of 8192: a line there
    assert [list(line.get_xdata()) for line in marks] == [[1, 1]]
    assert any(t.get_text() == "cuDNN SDPA: no bytes" for t in ax.texts)
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    assert any(label.startswith("no bytes, not 0 B (T = 1): dispatch picks cuDNN SDPA") for label in labels)
    assert any(label.startswith("ORT's AOT estimate: unavailable (A reachable cuDNN") for label in labels)


def span_extent(span) -> tuple[float, float]:
    """The x extent of an axvspan (a Rectangle from matplotlib 3.9, a Polygon before)."""
    if hasattr(span, "get_width"):
        return span.get_x(), span.get_x() + span.get_width()
    xs = [x for x, _ in span.get_xy()]
    return min(xs), max(xs)


def test_a_line_that_only_cudnn_runs_draws_no_runtime_at_all():
    """The prompts of sm90: every point is cuDNN's, so the runtime line is all gaps, not 0 B."""
    s = series(LLAMA_H100, "total-seq")
    assert all(p.runtime is None and p.dispatched == ("cudnn",) for p in s.points)
    assert s.as_dict()["no_bytes"] == [{"x": [1, 8192], "dispatched": ["cudnn"], "why": s.points[0].missing}]
    fig, ax = plt.subplots()
    draw_series(ax, s)
    runtime = [line for line in ax.get_lines() if line.get_color() == "black" and line.get_linewidth() == 2.6]
    assert all(math.isnan(y) for y in runtime[0].get_ydata())
    spans = [patch for patch in ax.patches if patch.get_gid() == "no-bytes"]
    assert len(spans) == 1 and spans[0].get_hatch() and span_extent(spans[0]) == (0.5, 8192.5)


def test_compare_sm_overlays_each_device_as_if_plotted_alone():
    """--compare sm=80,90 on a GQA target: each configuration is the line under --sm, at that sm's
    own SM count (108, 132); on sm90 the first prompt is cuDNN's (no bytes), the estimate unavailable."""
    key, variants = parse_compare("sm=80,90", small_decoder())
    assert [(label, v.config.device.sm, v.config.device.sm_count) for label, v in variants] == [
        ("sm80", 80, 108), ("sm90", 90, 132)]
    c = compare_series(key, variants, "total-seq", proofs=False)
    assert c.series[1].as_dict() == compute_series(small_decoder(90), "total-seq", proofs=False).as_dict()
    assert c.series[0].as_dict() == compute_series(small_decoder(80), "total-seq", proofs=False).as_dict()
    sm80, sm90 = c.series
    assert sm80.points[0].dispatched == ("flash",) and sm80.points[0].runtime is not None
    assert sm90.points[0].runtime is None and sm90.estimate_bytes is None and sm80.estimate_bytes is not None
    fig, ax = plt.subplots()
    draw_comparison(ax, c)
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    assert "sm80: runtime workspace" in labels and "sm90: runtime workspace" in labels
    assert any(label.startswith("sm90: no bytes, not 0 B (T = 1)") for label in labels)
    assert any(label.startswith("sm90: ORT's AOT estimate unavailable") for label in labels)
    assert [line.get_gid() for line in ax.get_lines() if line.get_gid() == "no-bytes"] == ["no-bytes"]


def test_compare_sm_count_moves_the_split_kv_drop():
    key, variants = parse_compare("sm_count=108,132", issue_target(DimRange(13000, 14000)))
    assert [label for label, _ in variants] == ["108 SMs", "132 SMs"]
    c = compare_series(key, variants, "total-seq", proofs=False)
    assert c.series[0].drops() == [(13824, 13825)] and c.series[1].drops() != c.series[0].drops()


@pytest.mark.parametrize("text, says", [
    ("trt_build=on,off", "GroupQueryAttention has no trt or trt_cross route"),
    ("trt_runner=auto,unknown", "GroupQueryAttention has no trt or trt_cross route"),
    ("sm_count=0,108", "is not a multiprocessor count"),
])
def test_a_comparison_that_draws_one_line_or_no_device_is_refused(text, says):
    with pytest.raises(UsageError, match=says):
        parse_compare(text, target(LLAMA))


BAD = {
    "sweep-fixed-head-size": (["--sweep", "head-size"], "head_size is fixed by the model (H = 128)"),
    "sweep-fixed-past": (["--sweep", "past"], "past is fixed by the model (P = 8192)"),
    "sweep-tokens": (["--sweep", "tokens"], "GroupQueryAttention has no such dimension"),
    "at-fixed-heads": (["--sweep", "seq", "--at", "heads=16"], "outside the target's range 32"),
    "at-s-over-t": (["--sweep", "batch", "--at", "seq=600", "--at", "total-seq=500"], "S <= T"),
    "at-t-below-s": (["--sweep", "seq", "--at", "total-seq=0"], "outside the target's range 1..8192"),
    "compare-trt": (["--sweep", "batch", "--compare", "trt_build=on,off"], "no trt or trt_cross route"),
    "compare-sm-and-sm-count": (["--sweep", "batch", "--compare", "sm=80,90", "--sm-count", "100"],
                                "each compared sm runs at its own default SM count"),
}


@pytest.mark.parametrize("argv, words", BAD.values(), ids=BAD.keys())
def test_bad_gqa_lines_are_usage_errors(argv, words):
    run = attnws("plot", "--target", LLAMA, *argv, "--json")
    assert run.code == 2, (run.code, run.err)
    assert words in run.err and "Traceback" not in run.err


def test_the_done_command_draws_a_png_and_its_json_keeps_the_schema(tmp_path):
    """`attnws plot --target llama-3-8b-fp16-sm80 --sweep total-seq` draws; its document has every
    key a packed family's has, no other."""
    out = tmp_path / "x.png"
    doc = attnws("plot", "--target", LLAMA, "--sweep", "total-seq", "--out", str(out), "--json").json()
    assert out.stat().st_size > 10_000 and doc["out"] == str(out)
    packed = attnws("plot", "--sweep", "seq", "--json").json()
    assert set(doc) - {"out"} == set(packed) and set(doc["series"]) == set(packed["series"])
    assert doc["series"]["tight_method"] == "proven maximum" and doc["series"]["tight_bound_bytes"] == 272_630_016
    assert [p["name"] for p in doc["patterns"]] == ["decode", "prefill"]
    assert doc["pair_search"]["status"] in ("none", "found")


def help_entry(flag: str) -> str:
    """The help text of one flag of `attnws plot --help`, without white space (argparse wraps it)."""
    text = attnws("plot", "--help").out
    body = text.split(f"\n  {flag} ", 1)[1]
    return "".join(re.split(r"\n  --|\n\n", body)[0].split())


def squeezed(text: str) -> str:
    return "".join(text.split())


SAMPLES = {Op.PA: "bert-base-pa-fp16-sm80-runner-unknown", Op.PMHA: "bert-base-pmha-fp32-sm80",
           Op.MHA: "mha-decoder-past-fp32-sm80", Op.GQA: LLAMA, Op.PAGED: "llama-3-8b-paged-bs256-sm80"}


@pytest.mark.parametrize("op", list(Op), ids=lambda op: op.value)
def test_help_offers_each_sweep_only_where_plot_then_takes_it(op):
    """--sweep's help names each value with the operators that take it; each of them draws a line
    of that operator's target, each other value is a usage error."""
    assert squeezed(by_operators(sweeps_of)) in help_entry("--sweep")
    t = target(SAMPLES[op])
    if op is Op.MHA:  # the decoder declares S, B and P; its L follows S, so a kv-seq line needs a range of its own
        t = replace(t, kv_seq=DimRange(1, 64))
    for sweep in SWEEPS:
        if sweep in sweeps_of(op):
            assert compute_series(t, sweep, max_points=40, proofs=False).points
        else:
            with pytest.raises(UsageError):
                compute_series(t, sweep, proofs=False)


@pytest.mark.parametrize("op", list(Op), ids=lambda op: op.value)
def test_help_offers_each_held_pattern_and_compare_name_only_where_plot_takes_it(op):
    """--at, --pattern and --compare name their values with the operators that take them; plot takes
    each there (a held dimension at its maximum, a pattern over the whole range, a key's two
    configurations) and refuses the others."""
    assert squeezed(by_operators(held_of)) in help_entry("--at")
    assert squeezed(by_operators(pattern_dims_of)) in help_entry("--pattern")
    assert squeezed(by_operators(compare_keys_of)) in help_entry("--compare")
    t = target(SAMPLES[op])
    for name in HELD:
        dim, sweep = HELD[name], "seq" if name == "batch" else "batch"
        if name in held_of(op) and getattr(t, dim, None) is not None:
            parse_at([f"{name}={getattr(t, dim).hi}"], sweep, t)
        elif name not in held_of(op):
            with pytest.raises(UsageError, match="has no such dimension"):
                parse_at([f"{name}=1"], sweep, t)
    for dim in pattern_dims_of(op):
        if getattr(t, dim, None) is not None:
            lo, hi = getattr(t, dim).lo, getattr(t, dim).hi
            replace(t, patterns=(Pattern.parse(f"p:{dim}={lo}..{hi}"),))
    examples = {"sm": "80,90", "sm_count": "40,108", "sdpa_kernel": "0,16", "env": "ORT_DISABLE_FLASH_ATTENTION=0,"
                "ORT_DISABLE_FLASH_ATTENTION=1", "flash_build": "on,off", "mea_build": "on,off", "trt_build": "on,off",
                "trt_runner": "auto,unknown"}
    assert set(examples) == set(COMPARE_KEYS)
    for key, values in examples.items():
        if key in compare_keys_of(op):
            assert len(parse_compare(f"{key}={values}", t)[1]) == 2
        else:
            with pytest.raises(UsageError, match="route"):
                parse_compare(f"{key}={values}", t)


def test_the_packed_default_target_is_unchanged_by_the_new_sweeps():
    """The default target's line still holds its tokens at B*S and names no GQA relation."""
    s = compute_series(DEFAULT_TARGET, "seq", proofs=False)
    assert "S = min" not in s.configuration and s.no_bytes() == [] and s.as_dict()["series"]["route_text"][0] == ""


def test_dispatch_names_cudnn_where_the_plot_says_no_bytes():
    """The route a no-bytes point names is the one `dispatch` picks at that shape."""
    t = target(LLAMA_H100)
    g = t.geometry(**shape_of(t, "total-seq", {"seq": 1}, 1))
    assert [b.value for b in dispatch(runtime_problem(g), t.config).backends] == ["cudnn"]
