"""`attnws model MODEL.onnx --plot FILE`: per attention node, the Level-1 estimate (ORT's; attnws's
own for MultiHeadAttention, which ORT does not estimate), the tight
policy's bound and the proven maximum runtime as bars, with the model's sum and sequential peak.

The values come from the model report (Level-1) and the solver on each sized node's target
(`node_target`, run once per distinct target); a bound that is not PROVED is not drawn (null in
the document). Bytes throughout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from attnws.model.report import ModelReport, node_target, with_exact_dims

BARS = ("ort_estimate_bytes", "tight_bound_bytes", "proven_max_bytes")
BAR_LABELS = {"ort_estimate_bytes": "Level-1 estimate", "tight_bound_bytes": "tight policy's bound (proved)",
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


def node_bars(report: ModelReport, progress: Callable[[str], None] = lambda _: None) -> list[NodeBars]:
    """Return each attention node's bars, in the report's order; each distinct target is proved once."""
    from attnws.plot.series import proven_values

    done: dict[Any, tuple[int | None, int | None]] = {}
    out = []
    for node in report.nodes:
        name = f"{node.graph}/{node.name}"
        if not node.estimate.ok:
            out.append(NodeBars(name, None, None, None))
            continue
        target = node_target(node)
        key = replace(target, name="")
        if key not in done:
            progress(f"plot: proving the tight bound and the maximum of {name}")
            tight, _tv, maximum, _mv = proven_values(target)
            done[key] = (tight, maximum)
        out.append(NodeBars(name, node.estimate.total_workspace_bytes, *done[key]))
    return out


def totals(bars: list[NodeBars]) -> dict[str, dict[str, int | None]]:
    """Return per quantity the model's sum and sequential peak (None when a node lacks it)."""
    out: dict[str, dict[str, int | None]] = {}
    for key in BARS:
        values = [getattr(b, key) for b in bars]
        missing = None in values
        out[key] = {"sum": None if missing else sum(values), "peak": None if missing else max(values, default=0)}
    return out


def model_plot_document(bars: list[NodeBars]) -> dict[str, Any]:
    """Return the JSON fields `model --plot` adds: per node bars, and each quantity's sum and peak."""
    return {"plot_nodes": [b.as_dict() for b in bars], "plot_totals": totals(bars)}


def render_model(bars: list[NodeBars], title: str, out: str | Path) -> float:
    """Draw the bars (one group per node, then the sum and the peak) into `out`; return the seconds."""
    from .render import DPI, HEIGHT_IN, WIDTH_IN, byte_label, byte_ticks, linear_threshold, plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    start = time.perf_counter()
    sums = totals(bars)
    groups = [b.node for b in bars] + ["model sum", "peak (sequential)"]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        width = 0.8 / len(BARS)
        values: list[int] = []
        for index, (key, color) in enumerate(zip(BARS, ("tab:red", "tab:blue", "tab:cyan"))):
            ys = [getattr(b, key) for b in bars] + [sums[key]["sum"], sums[key]["peak"]]
            xs = [i + (index - 1) * width for i in range(len(groups))]
            drawn = [(x, y) for x, y in zip(xs, ys) if y is not None]
            if drawn:
                ax.bar(*zip(*drawn), width=width, color=color, label=BAR_LABELS[key])
            for x, y in drawn:
                if y == 0:  # a 0 B bar has no height: say so where it stands
                    ax.annotate("0 B", (x, 0), textcoords="offset points", xytext=(0, 3), ha="center",
                                rotation=90, fontsize=6, color=color)
            values += [y for y in ys if y is not None]
        threshold = linear_threshold(values)
        top = max(values, default=1) or 1
        ax.set_yscale("symlog", linthresh=threshold, linscale=0.3, base=2)
        ax.set_ylim(0, top * 4)
        ax.yaxis.set_major_locator(FixedLocator(byte_ticks(threshold, top * 4)))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(byte_label))
        ax.set_xticks(range(len(groups)))
        shown = groups if len(groups) <= 40 else [g if i % max(1, len(groups) // 40) == 0 else "" for i, g in enumerate(groups)]
        ax.set_xticklabels(shown, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel(f"workspace bytes (log; linear below {byte_label(threshold)})")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        fig.subplots_adjust(left=0.09, right=0.78, top=0.92, bottom=0.3)
        fig.savefig(out, dpi=DPI, format=Path(out).suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return time.perf_counter() - start


def plot_model(model: Any, report: ModelReport, bounds: Any, out: Path,
               progress: Callable[[str], None] = lambda _: None) -> tuple[str, dict[str, Any]]:
    """Draw `model --plot` into `out`; return the text line and the JSON fields it adds."""
    from attnws.spec.errors import UsageError
    from attnws.spec.units import format_bytes

    bars = node_bars(with_exact_dims(model, report, bounds), progress)
    progress(f"plot: drawing {len(bars)} nodes into {out}")
    device = f" (sm{report.nodes[0].config.device.sm})" if report.nodes else ""
    title = f"{Path(report.path).name or 'model'}: workspace per attention node{device}"
    try:
        seconds = render_model(bars, title, out)
    except OSError as error:
        raise UsageError(f"--plot {out}: cannot write the picture ({error.strerror or error})") from None
    sums = totals(bars)
    words = ", ".join(f"{BAR_LABELS[k]} sum {format_bytes(sums[k]['sum'])}, peak {format_bytes(sums[k]['peak'])}"
                      for k in BARS)
    return f"wrote {out} in {seconds:.2f} s ({words})", {**model_plot_document(bars), "plot": str(out)}
