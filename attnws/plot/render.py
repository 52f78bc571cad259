"""Drawing a `Series` with matplotlib (Agg backend: no display needed), to PNG or SVG.

The y axis is bytes on a symmetric-log scale: logarithmic from 1 B up, linear below, so 0 B (a
route that allocates nothing) sits at the bottom of the axis instead of vanishing; ticks are
labelled B / KiB / MiB / GiB.
"""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from .series import SYMBOLS, SWEEPS, Series  # noqa: E402

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 6.75, 100  # 1200 x 675 pixels
FORMATS = (".png", ".svg")
BACKEND_STYLE = {
    "trt": ("TRT fused", "tab:purple"), "flash": ("Flash", "tab:orange"),
    "mea": ("memory-efficient (MEA)", "tab:green"), "unfused": ("unfused (two S\u00b2 buffers)", "tab:brown"),
    "trt_cross": ("TRT fused cross attention", "tab:pink"), "cudnn": ("cuDNN SDPA", "tab:olive"),
}
UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def byte_label(n: float, _pos: object = None) -> str:
    """Return a tick label: 0 B, 16 B, 4 KiB, 1.5 MiB, 2 GiB."""
    if n <= 0:
        return "0 B"
    for size, unit in UNITS:
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n:.0f} B"


def byte_ticks(bottom: int, top: float) -> list[float]:
    """Return 0 and every 16th power of two from `bottom` up to `top` (at most ten labels)."""
    ticks = [0.0]
    power = bottom
    while power <= top * 1.01:
        ticks.append(float(power))
        power *= 16
    return ticks


def linear_threshold(values: list[int]) -> int:
    """Return the largest power of two at most the smallest positive value (1 without one): the
    symmetric-log axis is logarithmic above it and linear (holding 0 B) below."""
    positive = [v for v in values if v > 0]
    return 1 << (min(positive).bit_length() - 1) if positive else 1


def _mib(n: int) -> str:
    return byte_label(n)


def render(series: Series, out: str | Path) -> float:
    """Draw the series into `out` (.png or .svg by its suffix); return the seconds it took."""
    start = time.perf_counter()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    try:
        _draw(ax, series)
        fig.subplots_adjust(left=0.09, right=0.72, top=0.86, bottom=0.1)
        fig.savefig(out, dpi=DPI, format=Path(out).suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return time.perf_counter() - start


def _draw(ax: object, s: Series) -> None:
    x = s.x
    values: list[int] = []
    for backend, (name, color) in BACKEND_STYLE.items():
        ys = [p.recipes.get(backend) for p in s.points]
        if all(y is None for y in ys):
            continue
        ax.plot(x, [float("nan") if y is None else y for y in ys], color=color, linewidth=0.9, alpha=0.75,
                label=f"{name} recipe (if it ran)")
        picked = [(p.x, y) for p, y in zip(s.points, ys) if y is not None and backend in p.dispatched]
        if picked:
            ax.plot(*zip(*picked), linestyle="none", marker="o", markersize=2.5, color=color, zorder=1.5,
                    label=f"  \u25cf dispatch picks {name}")
        values += [y for y in ys if y is not None]
    runtime = [float("nan") if y is None else y for y in s.runtime]
    ax.step(x, runtime, where="post", color="black", linewidth=2.6,
            label="runtime workspace ORT allocates", zorder=3)
    values += [y for y in s.runtime if y is not None]
    lines = [(s.estimate_bytes, "tab:red", "--", 3.0, f"{s.estimator} AOT estimate"),
             (s.tight_bytes, "tab:blue", "-.", 1.5, "tight bound (proved)"),
             (s.max_bytes, "tab:cyan", ":", 2.0, "proven max over target")]
    for value, color, style, width, text in lines:
        if value is not None:
            ax.axhline(value, color=color, linestyle=style, linewidth=width, label=f"{text}: {_mib(value)}")
            values.append(value)
    for index, pair in enumerate(s.pairs):
        ax.plot(pair["x"], pair["runtime_bytes"], linestyle="none", marker="o", markersize=11, markerfacecolor="none",
                markeredgecolor="red", markeredgewidth=2,
                label="non-monotonic pair (solver):\nthe smaller shape needs more" if index == 0 else None)
        symbol = SYMBOLS[SWEEPS[s.sweep]]
        stacked = sum(1 for other in s.pairs[:index] if other["x"][1] == pair["x"][1])  # pairs ending at one point
        ax.annotate(f"{symbol} {pair['x'][0]} \u2192 {pair['x'][1]}", (pair["x"][1], pair["runtime_bytes"][1]),
                    textcoords="offset points", xytext=(8, 10 + 12 * stacked), color="red", fontsize=9)
    top = max(values, default=1) or 1
    threshold = linear_threshold(values)
    ax.set_yscale("symlog", linthresh=threshold, linscale=0.3, base=2)
    ax.set_ylim(-threshold * 0.4, top * 4)  # a little below 0 B, so a line at 0 B stays visible
    ax.yaxis.set_major_locator(FixedLocator(byte_ticks(threshold, top * 4)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(byte_label))
    ax.grid(True, which="major", axis="y", alpha=0.3)
    symbol = SYMBOLS[SWEEPS[s.sweep]]
    ax.set_xlabel(f"{s.sweep} ({symbol}); the other dimensions held as in the title")
    ax.set_ylabel(f"workspace bytes (log; linear below {byte_label(threshold)}, 0 B at the bottom)")
    ax.set_title(f"{s.target}\n{s.configuration}", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
