"""Drawing a `Series` (or a `Comparison` of several) with matplotlib (Agg backend: no display
needed), to PNG or SVG.

The y axis is bytes on a symmetric-log scale: logarithmic from 1 B up, linear below, so 0 B (a
route that allocates nothing) sits at the bottom of the axis instead of vanishing; ticks are the
1-2-5 steps of B / KiB / MiB / GiB (decades labelled, 2 and 5 as labelled minor ticks when the
range is wide). What could hide is made visible: recipes that coincide on the whole line are
drawn dashed over each other and say so in the legend; the horizontal lines (estimate, tight
policy, proven maximum: one line "tight policy = proven maximum" when they are the same, as they
are whenever the maximum is decided) are drawn over the runtime line with markers at staggered
places, and values they share (with each other, with a constant runtime or with a memory
pattern's maximum) are written beside them. Each memory pattern's proven maximum is a wide
translucent band under the runtime line over the part of the line inside the pattern's box,
capped at both ends and named below its left end (above it at 0 B, the axis' bottom); a pattern
the line does not meet, or whose maximum is not proved, is named in the legend instead. Each
legend entry has one marker at most; backends the line never runs are named in the legend, with
the spec's reason, instead of drawn.

Where the line changes, it says so: a dotted vertical line where dispatch switches route (named
at the top), a downward triangle on every drop of the runtime (more of the swept dimension, fewer
bytes: Flash's split-KV count falling among them, its split counts written beside the first
few), and a shaded span over the points without bytes: hatched where dispatch picks a route no
recipe sizes (GroupQueryAttention's cuDNN, never drawn as 0 B), grey where ORT rejects the shape;
each with its reason in the legend. An unavailable estimate is named in the legend with why.
"""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter  # noqa: E402

from .series import SYMBOLS, SWEEPS, Comparison, PatternLine, Point, Series  # noqa: E402

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 6.75, 100  # 1200 x 675 pixels
BACKEND_STYLE = {
    "trt": ("TRT fused", "tab:purple"), "flash": ("Flash", "tab:orange"),
    "mea": ("memory-efficient (MEA)", "tab:green"), "unfused": ("unfused (math)", "tab:brown"),
    "trt_cross": ("TRT fused cross attention", "tab:pink"), "cudnn": ("cuDNN SDPA", "tab:olive"),
    "xqa": ("XQA decode", "slateblue"), "xqa_spec_decode": ("XQA speculative decode", "darkcyan"),
    "paged_decode": ("paged decode (split-KV)", "tab:red"), "latent": ("latent (MLA)", "tab:cyan"),
}
# The swept dimension in words, for the x axis (a count: no unit).
DIM_WORDS = {"seq": "sequence length", "batch": "batch size", "tokens": "packed tokens", "head_size": "head size",
             "kv_seq": "key/value length", "past": "past length", "total_seq": "total sequence length (keys)",
             "kv_len": "longest key length"}
# One color per compared configuration (black stays the single picture's runtime).
COMPARE_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
# One color per memory pattern (none of a backend's, the runtime's or a reference line's).
PATTERN_COLORS = ("tab:gray", "magenta", "goldenrod", "teal", "navy", "lime")
PATTERN_WIDTH, PATTERN_ALPHA = 7.0, 0.4  # a pattern's band: wider than the runtime line, which shows through it
UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))
MAX_MAJOR = 12  # more 1-2-5 ticks than this: decades major, 2 and 5 minor
MAX_LABELLED = 24  # more than this: the minor ticks lose their labels
REFERENCE_POINTS = 31  # a horizontal line is drawn through this many points, markers on every third
LEGEND_WIDTH = 48  # characters per legend line
MAX_DOTS = 100  # dispatch dots along a run of one backend, about
MAX_DROP_LABELS = 6  # drops written beside their triangle (every drop is marked)
MAX_SWITCHES = 12  # route switches drawn as vertical lines; more are listed in the summary and JSON
MAX_REASON = 150  # characters of a reason quoted in the legend
NO_BYTES_WIDTH = 0.01  # a span without bytes is drawn at least this fraction of the swept range wide
MAX_NUDGES, NUDGE_POINTS = 8, 11  # a label moved down this many times at most, by this many points each
LABEL_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8}  # behind a label


def byte_label(n: float, _pos: object = None) -> str:
    """Return a tick label: 0 B, 16 B, 4 KiB, 1.5 MiB, 2 GiB."""
    if n <= 0:
        return "0 B"
    for size, unit in UNITS:
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


def byte_ticks(bottom: float, top: float) -> tuple[list[float], list[float], bool]:
    """Return (major, minor, minor_labelled): 0 and the 1-2-5 steps of B, KiB, MiB and GiB from
    `bottom` up to `top`; when there are more than MAX_MAJOR, the decades (1, 10, 100 of a unit)
    are major and 2 and 5 minor, labelled while there are at most MAX_LABELLED in all."""
    steps = []
    for size, decades in ((1, 3), (1 << 10, 3), (1 << 20, 3), (1 << 30, 6)):
        steps += [(m, m * 10 ** k * size) for k in range(decades) for m in (1, 2, 5)]
    inside = sorted((v, m) for m, v in steps if bottom <= v <= top)
    if len(inside) <= MAX_MAJOR:
        return [0.0] + [float(v) for v, _ in inside], [], False
    major = [0.0] + [float(v) for v, m in inside if m == 1]
    return major, [float(v) for v, m in inside if m != 1], len(inside) <= MAX_LABELLED


def linear_threshold(values: list[int]) -> int:
    """Return the largest power of two at most the smallest positive value (1 without one): the
    symmetric-log axis is logarithmic above it and linear (holding 0 B) below."""
    positive = [v for v in values if v > 0]
    return 1 << (min(positive).bit_length() - 1) if positive else 1


def byte_axis(ax: Any, values: list[int], bottom_margin: bool = True) -> int:
    """Put bytes on the y axis (symmetric log, 1-2-5 ticks); return the linear threshold."""
    top = max(values, default=1) or 1
    threshold = linear_threshold(values)
    ax.set_yscale("symlog", linthresh=threshold, linscale=0.3, base=2)
    ax.set_ylim(-threshold * 0.4 if bottom_margin else 0, top * 4)  # below 0 B, so a line at 0 B stays visible
    major, minor, labelled = byte_ticks(threshold, top * 4)
    ax.yaxis.set_major_locator(FixedLocator(major))
    ax.yaxis.set_minor_locator(FixedLocator(minor))
    ax.yaxis.set_major_formatter(FuncFormatter(byte_label))
    ax.yaxis.set_minor_formatter(FuncFormatter(byte_label) if labelled else NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7, labelcolor="dimgray")
    ax.grid(True, which="major", axis="y", alpha=0.3)
    ax.grid(True, which="minor", axis="y", alpha=0.12)
    return threshold


def wrap(text: str, width: int = LEGEND_WIDTH) -> str:
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False,
                                   break_long_words=False))


def literal(text: str) -> str:
    """Return text matplotlib prints literally (no mathtext: a '$' stays a dollar sign); every text
    from a user (a title, a target or node name) goes through it."""
    return text.replace("$", r"\$")


def render(series: Series, out: str | Path, title: str | None = None) -> float:
    """Draw the series into `out` (.png or .svg by its suffix); return the seconds it took."""
    return _save(out, lambda ax: draw_series(ax, series, title))


def render_comparison(comparison: Comparison, out: str | Path, title: str | None = None) -> float:
    """Draw the compared configurations into `out`; return the seconds it took."""
    return _save(out, lambda ax: draw_comparison(ax, comparison, title))


def _save(out: str | Path, draw: Any) -> float:
    start = time.perf_counter()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        fig.subplots_adjust(left=0.09, right=0.69, top=0.86, bottom=0.1)  # first: labels are kept apart in it
        draw(ax)
        fig.savefig(out, dpi=DPI, format=Path(out).suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return time.perf_counter() - start


class Legend:
    """Legend entries collected in drawing order, one handle (one marker at most) each."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.labels: list[str] = []

    def add(self, label: str, **style: Any) -> None:
        self.handles.append(Line2D([], [], **style))
        self.labels.append(wrap(label))

    def note(self, text: str) -> None:
        """An entry without a symbol (what is not drawn, and why)."""
        self.add(text, linestyle="none", marker="none")

    def add_patch(self, label: str, **style: Any) -> None:
        """An entry drawn as a filled box (a shaded span)."""
        self.handles.append(Patch(**style))
        self.labels.append(wrap(label))

    def draw(self, ax: Any, title: str | None = None) -> None:
        ax.legend(self.handles, self.labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                  numpoints=1, title=title, title_fontsize=8, alignment="left")


def _reference(ax: Any, x: list[int], value: int, slot: int, style: dict[str, Any]) -> None:
    """Draw a horizontal line across the swept range over everything else, its markers at every
    third point from `slot`, so lines at one height show each other's markers."""
    xs = [x[0] + (x[-1] - x[0]) * i / (REFERENCE_POINTS - 1) for i in range(REFERENCE_POINTS)] if x else []
    ax.plot(xs, [value] * len(xs), markevery=(slot % 3, 3), zorder=4, **style)


def _coincidences(ax: Any, x: list[int], named: list[tuple[str, int]]) -> None:
    """Write each value shared by two or more of the named horizontal lines beside them."""
    by_value: dict[int, list[str]] = {}
    for name, value in named:
        by_value.setdefault(value, []).append(name)
    for value, names in by_value.items():
        if len(names) > 1 and x:
            ax.annotate(f"{' = '.join(names)}: {byte_label(value)}", (x[-1], value), textcoords="offset points",
                        xytext=(-4, 6), ha="right", fontsize=8, color="dimgray", zorder=5)


def draw_series(ax: Any, s: Series, title: str | None = None) -> None:
    """Draw one series on the axes (see the module docstring)."""
    x = s.x
    legend = Legend()
    values: list[int] = []
    seen: dict[tuple[Any, ...], list[str]] = {}
    for backend in s.drawn:
        name, color = BACKEND_STYLE[backend]
        ys = tuple(p.recipes.get(backend) for p in s.points)
        same = seen.setdefault(ys, [])
        dashes: Any = "-" if not same else (5 * len(same), (5, 5 * len(same)))  # over the ones drawn before
        line = [float("nan") if y is None else y for y in ys]
        ax.plot(x, line, color=color, linewidth=1.1, alpha=0.85, linestyle=dashes, zorder=2)
        alone = [(p.x, y) for i, (p, y) in enumerate(zip(s.points, ys))  # no neighbour to draw a line to
                 if y is not None and (i == 0 or ys[i - 1] is None) and (i + 1 == len(ys) or ys[i + 1] is None)]
        if alone:
            ax.plot(*zip(*alone), linestyle="none", marker="_", markersize=12, markeredgewidth=2, color=color, zorder=2)
        picked = dispatch_dots(s, backend, ys)
        if picked:
            ax.plot(*zip(*picked), linestyle="none", marker="o", markersize=3, color=color, zorder=3.5)
        under = all(y == p.runtime for p, y in zip(s.points, ys) if y is not None)
        label = f"{name} recipe" + (f" (same as {', '.join(same)} on this whole line)" if same
                                    else " (the runtime wherever it has a recipe: under the black line)" if under
                                    else "")
        legend.add(label, color=color, linewidth=1.1, linestyle=dashes, marker="o" if picked else "none",
                   markersize=4)
        same.append(BACKEND_STYLE[backend][0])
        values += [y for y in ys if y is not None]
    runtime = [float("nan") if y is None else y for y in s.runtime]
    ax.step(x, runtime, where="post", color="black", linewidth=2.6, zorder=3)
    legend.add("runtime workspace ORT allocates", color="black", linewidth=2.6)
    known = [y for y in s.runtime if y is not None]
    values += known
    named = []
    if known and len(set(known)) == 1 and len(known) == len(runtime):  # a constant runtime, on one route or more
        routes = {p.dispatched for p in s.points}
        on = f" on {' / '.join(BACKEND_STYLE[b][0] for b in next(iter(routes)))}" if len(routes) == 1 else ""
        named.append((f"runtime{on}", known[0]))
    for slot, (value, text, short, color, style, width, marker) in enumerate(reference_lines(s)):
        if value is None:
            continue
        look = {"color": color, "linestyle": style, "linewidth": width, "marker": marker, "markersize": 5}
        _reference(ax, x, value, slot, look)
        legend.add(f"{text}: {byte_label(value)}", **look)
        named.append((short, value))
        values.append(value)
    if s.estimate_bytes is None and s.estimate_message:
        legend.note(f"{s.estimator} AOT estimate: unavailable ({clipped(s.estimate_message)})")
    values += draw_patterns(ax, s, legend, named=named)
    _coincidences(ax, x, named)
    symbol = SYMBOLS[SWEEPS[s.sweep]]
    draw_route_changes(ax, s, legend)
    written = draw_drops(ax, s, legend)
    draw_no_bytes(ax, s, legend)
    splits = {(a.x, b.x): drop_words(a, b) for a, b in s.drop_points() if a.dispatched == b.dispatched}
    for index, pair in enumerate(s.pairs):
        ax.plot(pair["x"], pair["runtime_bytes"], linestyle="none", marker="o", markersize=11, markerfacecolor="none",
                markeredgecolor="red", markeredgewidth=2, zorder=6)
        stacked = sum(1 for other in s.pairs[:index] if other["x"][1] == pair["x"][1])  # pairs ending at one point
        change = splits.get(tuple(pair["x"]))  # what changes on one route (the split count)
        left = pair["x"][1] > (x[0] + x[-1]) / 2  # written towards the middle, inside the axes
        written.insert(0, ax.annotate(
            f"{symbol} {pair['x'][0]} \u2192 {pair['x'][1]}" + (f": {change}" if change else ""),
            (pair["x"][1], pair["runtime_bytes"][1]), textcoords="offset points",
            xytext=(-8 if left else 8, 10 + 12 * stacked), ha="right" if left else "left", color="red", fontsize=9,
            zorder=6.5, bbox=LABEL_BOX))
    if s.pairs:
        legend.add("non-monotonic pair (solver): the smaller shape needs more", linestyle="none", marker="o",
                   markersize=9, markerfacecolor="none", markeredgecolor="red", markeredgewidth=2)
    if s.pair_search and s.pair_search.get("status") == "undecided":
        legend.note("the solver's pair search: undecided (its resource limit); the drops marked are the spec's at "
                    "every point")
    spanned = {b for run in s.no_bytes() for b in run["dispatched"]}  # named with their span already
    for reason, backends in _grouped(tuple(n for n in s.not_drawn if n[0] not in spanned)).items():
        legend.note(f"not drawn: {', '.join(BACKEND_STYLE[b][0] for b in backends)} ({clipped(reason)})")
    threshold = byte_axis(ax, values)
    ax.set_xlabel(x_label(s))
    ax.set_ylabel(f"workspace bytes (log; linear below {byte_label(threshold)}, 0 B at the bottom)")
    ax.set_title(literal(f"{title or s.target}\n{textwrap.fill(s.configuration, 110)}"), fontsize=10)
    legend.draw(ax, "thin line: a backend's recipe if it ran;\ndots: where dispatch picks it" if s.drawn else None)
    separate(ax, written)


def separate(ax: Any, labels: list[Any]) -> None:
    """Move each label down, a line at a time (at most MAX_NUDGES), until its box meets no label
    before it; call once the axes have their final limits."""
    if len(labels) < 2:
        return
    renderer = ax.figure.canvas.get_renderer()
    placed: list[Any] = []
    for label in labels:
        for _ in range(MAX_NUDGES):
            box = label.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                break
            x, y = label.xyann
            label.xyann = (x, y - NUDGE_POINTS)
        placed.append(label.get_window_extent(renderer))


def reference_lines(s: Series) -> list[tuple[int | None, str, str, str, str, float, str]]:
    """Return the horizontal lines over the whole sweep: (value, legend text, short name, color,
    style, width, marker). The tight policy and the proven maximum are one line when the tight
    policy is the proven maximum; otherwise the tight policy names its method (the route-dropping
    bound) and the proven maximum has its own line."""
    estimate = f"{s.estimator} AOT estimate"
    lines = [(s.estimate_bytes, estimate, estimate, "tab:red", "--", 2.4, "v")]
    scope = left_out_words(s)
    if s.tight_is_maximum:
        return lines + [(s.tight_bytes, f"tight policy = proven maximum over target{scope}",
                         "tight policy = proven maximum", "tab:blue", "-.", 2.0, "s")]
    if s.tight_bytes is not None:
        lines.append((s.tight_bytes, f"tight policy = {s.tight_method} (proved safe; the maximum undecided){scope}",
                      f"tight policy = {s.tight_method}", "tab:blue", "-.", 1.5, "s"))
    return lines + [(s.max_bytes, f"proven max over target{scope}", "proven max", "tab:cyan", ":", 2.0, "D")]


def left_out_words(s: Series) -> str:
    """Return what the proofs leave out, in words (" (over the shapes a recipe sizes: cuDNN SDPA
    left out)"), or '' when they leave nothing out."""
    if not s.left_out:
        return ""
    names = ", ".join(BACKEND_STYLE[b][0] for b in s.left_out)
    return f" (over the shapes a recipe sizes; {names} left out: no recipe)"


def clipped(text: str, limit: int = MAX_REASON) -> str:
    """Return a reason cut to `limit` characters (an ellipsis where cut)."""
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "\u2026"


def x_label(s: Series) -> str:
    """Return the x axis' label: the swept dimension in words, its symbol and its flag."""
    dim = SWEEPS[s.sweep]
    return f"{DIM_WORDS[dim]} {SYMBOLS[dim]} (--sweep {s.sweep}); the other dimensions held as in the title"


def route_words(dispatched: tuple[str, ...]) -> str:
    """Return the backends' names joined by " / "."""
    return " / ".join(BACKEND_STYLE[b][0] for b in dispatched)


_SPLITS = re.compile(r"(.*?)(\d+) splits?$")


def drop_words(a: Point, b: Point) -> str:
    """Return what changes across a drop: "54 \u2192 28 splits", or the routes "XQA decode \u2192 Flash"."""
    if a.dispatched == b.dispatched:
        left, right = _SPLITS.fullmatch(a.route), _SPLITS.fullmatch(b.route)
        if left and right and left.group(1) == right.group(1):
            return f"{left.group(1)}{left.group(2)} \u2192 {right.group(2)} splits"
        if a.route != b.route:
            return f"{a.route} \u2192 {b.route}"
        return ""
    return f"{route_words(a.dispatched)} \u2192 {route_words(b.dispatched)}"


def draw_drops(ax: Any, s: Series, legend: Legend, color: str = "red", prefix: str = "",
               annotate: bool = True) -> list[Any]:
    """Mark every drop of the runtime (a consecutive pair of points where more of the swept
    dimension needs fewer bytes) with a downward triangle on its lower point; write the first
    MAX_DROP_LABELS beside it (the pair and what changes) unless a solver pair names it already.
    Return the labels written."""
    drops = s.drop_points()
    written: list[Any] = []
    if not drops:
        return written
    ax.plot([b.x for _, b in drops], [b.runtime for _, b in drops], linestyle="none", marker="v", markersize=9,
            color=color, markeredgecolor="black", markeredgewidth=0.6, zorder=6.5, gid="drops")
    symbol = SYMBOLS[SWEEPS[s.sweep]]
    named = {tuple(pair["x"]) for pair in s.pairs}
    labelled = drops[:MAX_DROP_LABELS] if annotate else []
    middle = (s.x[0] + s.x[-1]) / 2
    for a, b in labelled:
        if (a.x, b.x) in named:
            continue
        change = drop_words(a, b)
        left = b.x > middle  # written towards the middle, inside the axes
        written.append(ax.annotate(f"{symbol} {a.x} \u2192 {b.x}" + (f": {change}" if change else ""), (b.x, b.runtime),
                                   textcoords="offset points", xytext=(-8 if left else 8, -14),
                                   ha="right" if left else "left", color=color, fontsize=8, zorder=6.5,
                                   bbox=LABEL_BOX))
    more = f"; the first {MAX_DROP_LABELS} written" if annotate and len(drops) > MAX_DROP_LABELS else ""
    legend.add(f"{prefix}runtime drop: more {symbol}, fewer bytes ({len(drops)} on this line{more})",
               linestyle="none", marker="v", markersize=8, color=color, markeredgecolor="black",
               markeredgewidth=0.6)
    return written


def draw_route_changes(ax: Any, s: Series, legend: Legend, color: str = "dimgray", prefix: str = "",
                       annotate: bool = True) -> None:
    """Draw a dotted vertical line where dispatch switches route (the first MAX_SWITCHES), the
    new route named at the top."""
    changes = s.route_changes()
    if not changes:
        return
    for _, b in changes[:MAX_SWITCHES]:
        ax.axvline(b.x, color=color, linestyle=":", linewidth=1.2, zorder=1.5, gid="route-changes")
        if annotate:
            ax.annotate(f"\u2192 {route_words(b.dispatched)}", (b.x, 1.0), xycoords=("data", "axes fraction"),
                        textcoords="offset points", xytext=(3, -4), rotation=90, ha="left", va="top", fontsize=7,
                        color=color, zorder=5, bbox=LABEL_BOX)
    more = f"; the first {MAX_SWITCHES} drawn" if len(changes) > MAX_SWITCHES else ""
    legend.add(f"{prefix}route switch: dispatch picks another backend from here ({len(changes)} on this line{more})",
               color=color, linestyle=":", linewidth=1.2)


def draw_no_bytes(ax: Any, s: Series, legend: Legend, color: str | None = None, prefix: str = "") -> None:
    """Shade each run of points without bytes: hatched where dispatch picks a route no recipe sizes
    (no bytes, not 0 B), grey where ORT rejects the shape or no route runs (a run too narrow to see
    as a span: a dashed vertical line); one legend entry per route and reason."""
    runs = s.no_bytes()
    if not runs:
        return
    least = (s.x[-1] - s.x[0]) * NO_BYTES_WIDTH
    symbol = SYMBOLS[SWEEPS[s.sweep]]
    reasons: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for run in runs:
        lo, hi = run["x"]
        unsized = tuple(run["dispatched"])
        look = no_bytes_look(unsized, color)
        if hi - lo + 1 >= least:
            ax.axvspan(lo - 0.5, hi + 0.5, zorder=1, gid="no-bytes", **look)
        else:  # too narrow to see as a span: a dashed line where it is, over no neighbour
            ax.axvline((lo + hi) / 2, color=look.get("edgecolor", look["facecolor"]), linestyle=(0, (3, 2)),
                       linewidth=2.5, alpha=0.8, zorder=1, gid="no-bytes")
        reasons.setdefault((unsized, run["why"]), []).append(f"{lo:,}" if lo == hi else f"{lo:,}..{hi:,}")
        if unsized:
            ax.annotate(f"{route_words(unsized)}: no bytes", ((lo + hi) / 2, 0.0), xycoords=("data", "axes fraction"),
                        textcoords="offset points", xytext=(3, 4), rotation=90, ha="left", va="bottom", fontsize=7,
                        color=look["edgecolor"], zorder=5, bbox=LABEL_BOX)
    for (unsized, why), where in reasons.items():
        at = f"{symbol} = {', '.join(where[:3])}" + (f" and {len(where) - 3} more runs" if len(where) > 3 else "")
        if unsized:
            text = f"{prefix}no bytes, not 0 B ({at}): dispatch picks {route_words(unsized)}, {clipped(why)}"
        else:
            text = f"{prefix}no bytes ({at}): ORT rejects the shape or no route runs: {clipped(why)}"
        legend.add_patch(text, **no_bytes_look(unsized, color))


def no_bytes_look(unsized: tuple[str, ...], color: str | None) -> dict[str, Any]:
    """Return the span style: hatched in the route's (or the configuration's) color for a route
    no recipe sizes, plain grey for rejected shapes."""
    if unsized:
        shade = color or BACKEND_STYLE[unsized[0]][1]
        return {"facecolor": "none", "edgecolor": shade, "hatch": "////", "alpha": 0.9, "linewidth": 0}
    return {"facecolor": color or "lightgray", "alpha": 0.25 if color else 0.5, "linewidth": 0}


def pattern_label(p: PatternLine, estimator: str) -> str:
    """Return "NAME (box): proven max X, R x below the estimate"."""
    ratio = f", {p.ratio:.1f}x below {estimator} estimate" if p.ratio else ""
    return f"{p.name} ({p.box}): proven max {byte_label(p.max_bytes)}{ratio}"


def draw_patterns(ax: Any, s: Series, legend: Legend, color: str | None = None, prefix: str = "",
                  annotate: bool = True, named: list[tuple[str, int]] | None = None) -> list[int]:
    """Draw each memory pattern's proven maximum as a wide translucent band under the runtime line
    over the part of the line inside its box, capped at both ends (a single swept value: a short bar
    there), its name below the left end (stacked where several start at one place); name in the
    legend a pattern the line does not meet or without a proven maximum. `color` draws every
    pattern in one color (a compared configuration's); `named` gets "NAME max" and each value, so
    a value shared with a horizontal line or a constant runtime is written beside them. Return the
    values drawn."""
    drawn: list[int] = []
    stacked: dict[tuple[int, int], int] = {}
    symbol = SYMBOLS[SWEEPS[s.sweep]]
    for index, p in enumerate(s.patterns):
        if p.max_bytes is None:
            legend.note(f"{prefix}{p.name} ({p.box}): {p.unproved}; not drawn")
            continue
        if p.x_range is None:
            legend.note(f"{prefix}{pattern_label(p, s.estimator)}; not on this line")
            continue
        shade = color or PATTERN_COLORS[index % len(PATTERN_COLORS)]
        (lo, hi), value = p.x_range, p.max_bytes
        band = {"color": shade, "linewidth": PATTERN_WIDTH, "alpha": PATTERN_ALPHA}
        ax.plot([lo, hi], [value, value], solid_capstyle="butt", zorder=2.5, **band)
        caps = {"color": shade, "linestyle": "none", "marker": "|", "markersize": 14, "markeredgewidth": 2.2}
        ax.plot([lo, hi], [value, value], zorder=4.5, **caps)
        if lo == hi:
            ax.plot([lo], [value], color=shade, marker="_", markersize=18, markeredgewidth=3, zorder=4.5)
        over = f"{symbol} = {lo}" if lo == hi else f"{symbol} = {lo}..{hi}"
        legend.add(f"{prefix}{pattern_label(p, s.estimator)}; drawn over {over}", marker="|", markersize=10,
                   markeredgewidth=2, markeredgecolor=shade, **band)
        if annotate:  # below the band (above it at 0 B, the axis' bottom), stacked away from the band
            count = stacked.get((lo, value), 0)
            stacked[(lo, value)] = count + 1
            up = value == 0
            rise = (6 + 11 * count) * (1 if up else -1)
            ax.annotate(p.name, (lo, value), textcoords="offset points", xytext=(4, rise),
                        ha="left", va="bottom" if up else "top", fontsize=8, color=shade, fontweight="bold", zorder=5,
                        bbox=LABEL_BOX)
        if named is not None:
            named.append((f"{prefix.rstrip(': ')} {p.name} max".lstrip(), value))
        drawn.append(value)
    return drawn


def dispatch_dots(s: Series, backend: str, ys: tuple[int | None, ...]) -> list[tuple[int, int]]:
    """Return the (x, recipe) points where dispatch picks the backend, thinned to about MAX_DOTS
    along a long run so the runtime line shows between them; each run's ends are kept."""
    chosen = {i for i, (p, y) in enumerate(zip(s.points, ys)) if y is not None and backend in p.dispatched}
    step = max(1, len(s.points) // MAX_DOTS)
    return [(s.points[i].x, ys[i]) for i in sorted(chosen)
            if i % step == 0 or i - 1 not in chosen or i + 1 not in chosen]


def _grouped(not_drawn: tuple[tuple[str, str], ...]) -> dict[str, list[str]]:
    """Return the left-out backends by reason (one legend note per reason)."""
    out: dict[str, list[str]] = {}
    for backend, reason in not_drawn:
        out.setdefault(reason, []).append(backend)
    return out


def draw_comparison(ax: Any, c: Comparison, title: str | None = None) -> None:
    """Draw each compared configuration's runtime, estimate, proven maximum (the tight policy) and
    memory patterns' proven maxima in its own color."""
    legend = Legend()
    values: list[int] = []
    runtimes: dict[tuple[Any, ...], list[str]] = {}
    named: list[tuple[str, int]] = []
    span = sorted({x for s in c.series for x in s.x})
    for index, (label, s, color) in enumerate(zip(c.labels, c.series, COMPARE_COLORS)):
        key = (tuple(s.x), tuple(s.runtime))
        same = runtimes.setdefault(key, [])
        dashes: Any = "-" if not same else (6 * len(same), (6, 6 * len(same)))
        width = 2.0 + 1.2 * (len(c.series) - 1 - index)  # each drawn over the wider ones before: both show
        ax.step(s.x, [float("nan") if y is None else y for y in s.runtime], where="post", color=color, linewidth=width,
                linestyle=dashes, zorder=3 + index / 10)
        legend.add(f"{label}: runtime workspace" + (f" (same as {', '.join(same)})" if same else ""), color=color,
                   linewidth=width, linestyle=dashes)
        same.append(label)
        values += [y for y in s.runtime if y is not None]
        maximum = "tight policy = proven max" if s.tight_is_maximum else "proven max"
        references = ((s.estimate_bytes, f"{s.estimator} AOT estimate", "--", "v"), (s.max_bytes, maximum, ":", "D"))
        for slot, (value, text, style, marker) in enumerate(references):
            if value is None:
                continue
            look = {"color": color, "linestyle": style, "linewidth": 1.6, "marker": marker, "markersize": 5}
            _reference(ax, span, value, index * 2 + slot, look)
            legend.add(f"{label}: {text} {byte_label(value)}", **look)
            named.append((f"{label} {'estimate' if slot == 0 else 'proven max'}", value))
            values.append(value)
        if s.estimate_bytes is None and s.estimate_message:
            legend.note(f"{label}: {s.estimator} AOT estimate unavailable ({clipped(s.estimate_message)})")
        if s.left_out:
            legend.note(f"{label}: proven max{left_out_words(s)}")
        values += draw_patterns(ax, s, legend, color, f"{label}: ", annotate=False, named=named)
        draw_route_changes(ax, s, legend, color, f"{label}: ", annotate=False)
        draw_drops(ax, s, legend, color, f"{label}: ", annotate=False)
        draw_no_bytes(ax, s, legend, color, f"{label}: ")
        symbol = SYMBOLS[SWEEPS[s.sweep]]
        for pair in s.pairs:
            ax.plot(pair["x"], pair["runtime_bytes"], linestyle="none", marker="o", markersize=11,
                    markerfacecolor="none", markeredgecolor=color, markeredgewidth=2, zorder=6)
            ax.annotate(f"{symbol} {pair['x'][0]} \u2192 {pair['x'][1]}", (pair["x"][1], pair["runtime_bytes"][1]),
                        textcoords="offset points", xytext=(8, 10), color=color, fontsize=9)
    if any(s.pairs for s in c.series):
        legend.add("non-monotonic pair (solver), in its configuration's color", linestyle="none", marker="o",
                   markersize=9, markerfacecolor="none", markeredgecolor="gray", markeredgewidth=2)
    _coincidences(ax, span, named)
    threshold = byte_axis(ax, values)
    first = c.series[0]
    ax.set_xlabel(x_label(first))
    ax.set_ylabel(f"workspace bytes (log; linear below {byte_label(threshold)}, 0 B at the bottom)")
    heading = title or f"{first.target}: {c.key} compared"
    ax.set_title(literal(f"{heading}\n{textwrap.fill(compared_configuration(c), 110)}"), fontsize=10)
    legend.draw(ax)


def compared_configuration(c: Comparison) -> str:
    """Return the shared part of the compared configurations' one-line texts and what varies."""
    texts = [s.configuration.split("; ") for s in c.series]
    shared = [part for part in texts[0] if all(part in t for t in texts[1:])]
    return "; ".join(shared + [f"compared: {' | '.join(c.labels)}"])
