"""`attnws model MODEL.onnx --plot FILE`: per attention node, the Level-1 estimate (ORT's; attnws's
own for MultiHeadAttention, which ORT does not estimate), the tight policy's reservation (the
proven maximum; the route-dropping bound where the maximum is undecided) and the proven maximum
runtime as bars, with the model's sum and sequential peak.

The values come from the model report (Level-1) and the solver on each sized node's target
(`node_target`, run once per distinct target); a bound that is not PROVED is not drawn (null in
the document). Identical nodes (a stack of layers) share one bar group labelled with their count
("x12"); the sum counts every node. Bytes throughout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from attnws.model.report import ModelReport, node_target, with_exact_dims

BARS = ("ort_estimate_bytes", "tight_bound_bytes", "proven_max_bytes")
UPRIGHT_PIXELS = 26  # a bar at least this wide (in pixels) takes an upright "0 B"
BAR_LABELS = {"ort_estimate_bytes": "Level-1 estimate", "tight_bound_bytes": "tight policy (proved)",
              "proven_max_bytes": "proven maximum runtime"}


@dataclass(frozen=True)
class NodeBars:
    """One node's three values (None where not sized or not PROVED)."""

    node: str
    ort_estimate_bytes: int | None
    tight_bound_bytes: int | None
    proven_max_bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, **{k: getattr(self, k) for k in BARS}}


@dataclass(frozen=True)
class BarGroup:
    """Identical nodes (same op, graph, attributes, inferred shapes and fixed dimensions: one
    target, so one set of bars), drawn once with their count."""

    nodes: tuple[str, ...]
    bars: NodeBars
    positions: tuple[int, ...]  # the nodes' places in the report

    @property
    def label(self) -> str:
        """Return the bar group's name: the node, or the first and last node and the count (x12)."""
        names = self.nodes
        if len(names) == 1:
            return names[0]
        between = ", " if len(names) == 2 else " \u2026 "
        return f"{names[0]}{between}{names[-1]} (x{len(names)})"

    def as_dict(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "count": len(self.nodes),
                **{k: getattr(self.bars, k) for k in BARS}}


def node_bars(report: ModelReport, progress: Callable[[str], None] = lambda _: None) -> list[BarGroup]:
    """Return the bars of each group of identical nodes, in the order of the group's first node;
    each distinct target is proved once."""
    from attnws.model.render import group_key
    from attnws.plot.series import proven_values

    groups: dict[Any, list[int]] = {}
    for position, node in enumerate(report.nodes):
        groups.setdefault((group_key(node), node.exact), []).append(position)
    done: dict[Any, tuple[int | None, int | None]] = {}
    out = []
    for positions in groups.values():
        node = report.nodes[positions[0]]
        names = tuple(report.nodes[i].path for i in positions)
        if not node.estimate.ok:
            out.append(BarGroup(names, NodeBars(names[0], None, None, None), tuple(positions)))
            continue
        target = node_target(node)
        key = replace(target, name="")
        if key not in done:
            progress(f"plot: proving the tight bound and the maximum of {names[0]}")
            proven = proven_values(target)
            done[key] = (proven.tight_bytes, proven.max_bytes)
        bars = NodeBars(names[0], node.estimate.total_workspace_bytes, *done[key])
        out.append(BarGroup(names, bars, tuple(positions)))
    return out


def totals(groups: list[BarGroup]) -> dict[str, dict[str, int | None]]:
    """Return per quantity the model's sum over every node and sequential peak (None when a node lacks it)."""
    out: dict[str, dict[str, int | None]] = {}
    for key in BARS:
        values = [getattr(g.bars, key) for g in groups]
        missing = None in values
        out[key] = {"sum": None if missing else sum(v * len(g.nodes) for v, g in zip(values, groups)),
                    "peak": None if missing else max(values, default=0)}
    return out


def model_plot_document(groups: list[BarGroup]) -> dict[str, Any]:
    """Return the JSON fields `model --plot` adds: per node and per group of identical nodes the
    bars, and each quantity's sum and peak."""
    nodes = sorted((position, {**g.bars.as_dict(), "node": name})
                   for g in groups for position, name in zip(g.positions, g.nodes))
    return {"plot_nodes": [node for _, node in nodes], "plot_groups": [g.as_dict() for g in groups],
            "plot_totals": totals(groups)}


LEFT, RIGHT = 0.09, 0.78  # the axes' place in the figure


def render_model(groups: list[BarGroup], title: str, out: str | Path) -> float:
    """Draw the bars into `out` (see `draw_model`); return the seconds it took."""
    from .render import DPI, HEIGHT_IN, WIDTH_IN, plt

    start = time.perf_counter()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        draw_model(ax, groups, title)
        fig.subplots_adjust(left=LEFT, right=RIGHT, top=0.92, bottom=0.3)
        fig.savefig(out, dpi=DPI, format=Path(out).suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return time.perf_counter() - start


def draw_model(ax: Any, groups: list[BarGroup], title: str) -> None:
    """Draw the bars: one bar group per set of identical nodes, then the sum and the peak. A 0 B bar
    has no height: a short floor in its color and a "0 B" label (upright where the bar is wide
    enough) mark it."""
    from .render import DPI, WIDTH_IN, byte_axis, byte_label, literal

    sums = totals(groups)
    labels = [literal(g.label) for g in groups] + ["model sum", "peak (sequential)"]
    width = 0.8 / len(BARS)
    bar_pixels = (RIGHT - LEFT) * WIDTH_IN * DPI / (len(labels) + 0.2) * width
    values: list[int] = []
    for index, (key, color) in enumerate(zip(BARS, ("tab:red", "tab:blue", "tab:cyan"))):
        ys = [getattr(g.bars, key) for g in groups] + [sums[key]["sum"], sums[key]["peak"]]
        xs = [i + (index - 1) * width for i in range(len(labels))]
        drawn = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if drawn:
            ax.bar(*zip(*drawn), width=width, color=color, label=BAR_LABELS[key])
        for x, y in drawn:
            if y == 0:
                ax.hlines(0, x - width * 0.45, x + width * 0.45, color=color, linewidth=3, zorder=3)
                ax.annotate("0 B", (x, 0), textcoords="offset points", xytext=(0, 4), ha="center", va="bottom",
                            rotation=0 if bar_pixels >= UPRIGHT_PIXELS else 90, fontsize=8, color=color,
                            fontweight="bold")
        values += [y for y in ys if y is not None]
    threshold = byte_axis(ax, values, bottom_margin=False)
    ax.set_xticks(range(len(labels)))
    step = max(1, len(labels) // 40)
    ax.set_xticklabels([g if i % step == 0 else "" for i, g in enumerate(labels)],
                       rotation=30 if len(labels) <= 8 else 60, ha="right", fontsize=8)
    ax.set_ylabel(f"workspace bytes (log; linear below {byte_label(threshold)})")
    ax.set_title(literal(title), fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def plot_model(model: Any, report: ModelReport, bounds: Any, out: Path,
               progress: Callable[[str], None] = lambda _: None) -> tuple[str, dict[str, Any]]:
    """Draw `model --plot` into `out`; return the text line and the JSON fields it adds."""
    from attnws.spec.errors import UsageError
    from attnws.spec.units import format_bytes

    groups = node_bars(with_exact_dims(model, report, bounds), progress)
    progress(f"plot: drawing {len(groups)} bar groups into {out}")
    device = f" (sm{report.nodes[0].config.device.sm})" if report.nodes else ""
    title = f"{Path(report.path).name or 'model'}: workspace per attention node{device}"
    try:
        seconds = render_model(groups, title, out)
    except OSError as error:
        raise UsageError(f"--plot {out}: cannot write the picture ({error.strerror or error})") from None
    sums = totals(groups)
    words = ", ".join(f"{BAR_LABELS[k]} sum {format_bytes(sums[k]['sum'])}, peak {format_bytes(sums[k]['peak'])}"
                      for k in BARS)
    return f"wrote {out} in {seconds:.2f} s ({words})", {**model_plot_document(groups), "plot": str(out)}
