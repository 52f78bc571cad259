"""The `attnws plot` subcommand: workspace bytes against one swept dimension, drawn or as JSON.

The handler returns a CommandResult and never prints or exits; matplotlib is imported only when
a picture is drawn. A bad --sweep, --at, --compare, --title or --out (an unknown extension, a folder
that does not exist or cannot be written) is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from attnws.spec.command_line import (
    EXIT_OK, CommandResult, Progress, add_config_arguments, add_json_argument, add_pattern_argument,
    add_problem_arguments, add_target_argument, output_group, parse_env, target_from_args,
)
from attnws.model.commands import ModelPlotter
from attnws.spec.errors import UsageError
from attnws.spec.target import Target
from attnws.spec.units import bytes_more, format_bytes

from .series import (
    COMPARE_EXAMPLES, FIXED, SWEEPS, SYMBOLS, Comparison, PatternLine, Point, Series, by_operators, compare_keys_of,
    compare_series, compute_series, held_of, own_setting, parse_at, parse_compare, pattern_dims_of, sweeps_of,
)

FORMATS = (".png", ".svg")
MAX_TITLE = 120  # characters
MAX_DROP_LINES = 20  # runtime drops listed in the text report (the JSON lists all)
# The flag that sets each --compare key (both at once is a usage error).
COMPARE_FLAGS = {"sm": "sm", "sm_count": "sm_count", "sdpa_kernel": "sdpa_kernel", "flash_build": "flash_build",
                 "mea_build": "mea_build", "trt_build": "trt_build", "trt_runner": "trt_runner"}


def register(subparsers: Any) -> None:
    """Add the `plot` subcommand, and hand `model --plot` its plotter when `model` is registered."""
    parser = subparsers.add_parser(
        "plot", help="draw workspace bytes against one swept dimension (PNG or SVG)",
        description="Sweep one dimension of a target of any operator over its range, the others held at their "
                    "maximum (or at --at values), and draw per swept value: each backend's recipe root, the runtime "
                    "workspace ORT allocates (bold) with its route switches and its drops marked (Flash's split-KV "
                    "count among them), the points without bytes shaded with why (a route no recipe sizes, such as "
                    "GroupQueryAttention's cuDNN, is never drawn as 0 B), the AOT estimate (ORT's; attnws's own for "
                    "MultiHeadAttention; why, where unavailable), the tight policy (the proven maximum over the "
                    "target; the route-dropping bound when the maximum is undecided), each memory pattern's proven "
                    "maximum over the part of the line inside its box (--pattern, or the target file's "
                    "\"patterns\"), and the solver's non-monotonic pairs along the line. --json prints the plotted "
                    "series.")
    add_target_argument(parser)
    add_problem_arguments(parser)
    add_config_arguments(parser)
    line = parser.add_argument_group("line", "the swept dimension, the held ones, the memory patterns drawn, and the "
                                                   "configurations compared")
    line.add_argument("--sweep", required=True, choices=list(SWEEPS),
                      help=f"the dimension swept over its range: {by_operators(sweeps_of)}; a dimension the model "
                           f"fixes ({fixed_text()}) is never swept")
    line.add_argument("--at", action="append", default=[], metavar="NAME=VALUE",
                      help=f"hold a dimension at VALUE instead of its maximum (repeatable; NAME one of "
                           f"{by_operators(held_of)}; one the model fixes only at its value; one the target leaves "
                           "implicit only at its relation: Hv = H, K = N*H, L = S, P = 0, T <= B*S; GQA's S is held at "
                           "min(its maximum, T) unless given, and S <= T unless the cache is windowed)")
    add_pattern_argument(line)
    for action in line._group_actions:  # the shared help names every family's dimensions at once
        if action.dest == "pattern":
            action.help = ("a memory pattern: a named sub-box whose own maximum is proven (repeatable), e.g. "
                           f"decode:seq=1; DIM one of {by_operators(pattern_dims_of)}, each RANGE read as that "
                           "dimension's flag reads it; the sub-box of the target; added to the target's own patterns")
    line.add_argument("--compare", action="append", default=[], metavar="KEY=V1,V2,...",
                      help=f"overlay the line under each configuration (its runtime, AOT estimate, proven "
                           f"maximum and memory patterns in one color); KEY one of {by_operators(compare_keys_of)}; "
                           "each sm at its default SM count; e.g. --compare sm=80,90, "
                           f"--compare env={COMPARE_EXAMPLES['env']}")
    output = output_group(parser)
    output.add_argument("--out", metavar="FILE.png|FILE.svg", help="write the picture here (needed unless --json)")
    output.add_argument("--title", metavar="TEXT",
                        help=f"the picture's heading instead of the target's name (at most {MAX_TITLE} characters; "
                             "the line's configuration stays below it)")
    add_json_argument(parser)
    parser.set_defaults(handler=plot_command)
    if "model" in subparsers.choices:
        subparsers.choices["model"].set_defaults(model_plotter=ModelPlotter(check_out, _draw_model))


def fixed_text() -> str:
    """Return the dimensions each operator's model fixes, in symbols: "GQA: N, H, Nk, P"."""
    return "; ".join(f"{op.value.upper()}: {', '.join(SYMBOLS[d] for d in dims)}" for op, dims in FIXED.items() if dims)


def _draw_model(*args: Any) -> tuple[str, dict[str, Any]]:
    """`model --plot`'s drawing (matplotlib and the solver load only when a model is drawn)."""
    from .model import plot_model

    return plot_model(*args)


def check_out(out: str, option: str = "--out") -> Path:
    """Return the output path when its suffix is .png or .svg and its folder exists and is writable."""
    path = Path(out)
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"{option} {out}: the picture must be a .png or .svg file (got {path.suffix or 'no extension'!r})")
    if path.is_dir():
        raise UsageError(f"{option} {out}: is a folder; give a file name ending .png or .svg")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"{option} {out}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {out}: cannot write there (permission denied)")
    return path


def check_title(title: str | None) -> str | None:
    """Return the --title text when it is one printable line of at most MAX_TITLE characters."""
    if title is None:
        return None
    if not title.strip() or not title.isprintable() or len(title) > MAX_TITLE:
        raise UsageError(f"--title {title[:40]!r}{'...' if len(title) > 40 else ''}: give one line of printable text, "
                         f"1 to {MAX_TITLE} characters")
    return title.strip()


def check_compare(ns: argparse.Namespace) -> str | None:
    """Return the one --compare value, refusing a second one or a flag that sets the same key."""
    if not ns.compare:
        return None
    if len(ns.compare) > 1:
        raise UsageError(f"--compare is given {len(ns.compare)} times; one picture compares one key")
    text = ns.compare[0]
    key = text.partition("=")[0].strip().replace("-", "_")
    flag = COMPARE_FLAGS.get(key)
    if flag is not None and getattr(ns, flag, None) is not None:
        raise UsageError(f"--compare {key} and --{flag.replace('_', '-')} both set {key}; drop one")
    if key == "sm" and getattr(ns, "sm_count", None) is not None:
        raise UsageError("--compare sm and --sm-count: each compared sm runs at its own default SM count; drop "
                         "--sm-count, or compare sm_count")
    if key == "env":
        given = parse_env(ns.env)
        for value in text.partition("=")[2].split(","):
            name = value.partition("=")[0].strip()
            if name in given:
                raise UsageError(f"--compare env and --env both set {name}; drop one")
    return text


def plot_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Compute the series, draw it when --out is given, and report what was drawn."""
    if ns.sweep not in SWEEPS:
        from attnws.spec.command_line import suggestion

        raise UsageError(f"--sweep {ns.sweep}: expected one of {', '.join(SWEEPS)}{suggestion(ns.sweep, SWEEPS)}")
    if ns.out is None and not ns.json:
        raise UsageError("--out FILE.png|FILE.svg is required (or --json to print the series)")
    out = check_out(ns.out) if ns.out is not None else None
    title = check_title(ns.title)
    compare = check_compare(ns)
    target = target_from_args(ns)
    at = parse_at(ns.at, ns.sweep, target)
    if compare is not None:
        key, variants = parse_compare(compare, target)
        comparison = compare_series(key, variants, ns.sweep, at, progress=progress)
        document, lines = comparison.as_dict(), compared_lines(target, variants, comparison)
        drawn = sum(len(s.points) for s in comparison.series)
    else:
        series = compute_series(target, ns.sweep, at, progress=progress)
        document, lines, drawn = series.as_dict(), summary(series), len(series.points)
    if title is not None:
        document = {**document, "title": title}
    if out is not None:
        from .render import render, render_comparison

        progress(f"plot: drawing {drawn} points into {out}")
        try:
            seconds = render_comparison(comparison, out, title) if compare is not None else render(series, out, title)
        except OSError as error:
            raise UsageError(f"--out {out}: cannot write the picture ({error.strerror or error})") from None
        document = {**document, "out": str(out)}
        lines.append(f"wrote {out} in {seconds:.2f} s")
    return CommandResult(EXIT_OK, "\n".join(lines), document)


def compared_lines(target: Target, variants: tuple[tuple[str, Target], ...], comparison: Comparison) -> list[str]:
    """Return the text report of a comparison: per configuration its label, whether it is the
    target's own configuration (when not, what the target's own setting is), then its series'
    report, headed by the setting it is drawn under."""
    own = own_setting(target, comparison.key, comparison.labels)
    lines: list[str] = []
    for label, (_, variant), series in zip(comparison.labels, variants, comparison.series):
        if (variant.config, variant.env) == (target.config, target.env):
            lines += [f"{label} (the target's own configuration):"] + ["  " + line for line in summary(series)]
        else:
            lines.append(f"{label} (not the target's own configuration, which has {own}):")
            lines += ["  " + line for line in summary(series, under=label)]
    return lines


def summary(series: Series, under: str = "") -> list[str]:
    """Return the text report of one series: what was swept (`under`: the compared setting the
    target is drawn under, when not its own), the runtime's range and the runs without bytes (with
    why), the estimate (or why it is unavailable), the tight policy (how it was found, and the
    shape that needs it), the proven maximum when it is not the tight policy, what the proofs leave
    out, each memory pattern's proven maximum and where the line meets it, what is not drawn and
    why, the route switches, the drops of the runtime and the non-monotonic pairs."""
    symbol = SYMBOLS[SWEEPS[series.sweep]]
    runtime = [y for y in series.runtime if y is not None]
    lines = [f"{series.target}{f' under {under}' if under else ''}: {series.configuration}",
             f"  {len(series.points)} points of {series.sweep} ({symbol}) from {series.x[0]} to {series.x[-1]}",
             f"  runtime workspace from {format_bytes(min(runtime))} to {format_bytes(max(runtime))}" if runtime
             else "  runtime workspace: none at any point drawn"]
    for run in series.no_bytes():
        lo, hi = run["x"]
        where = f"{symbol} = {lo}" + ("" if lo == hi else f"..{hi}")
        route = f"dispatch picks {'/'.join(run['dispatched'])}, " if run["dispatched"] else ""
        lines.append(f"  no bytes at {where}: {route}{run['why']}")
    if series.estimate_bytes is None and series.estimate_message:
        lines.append(f"  {series.estimator} AOT estimate unavailable: {series.estimate_message}")
    else:
        lines.append(f"  {series.estimator} AOT estimate {format_bytes(series.estimate_bytes)}")
    lines.append(tight_line(series))
    if not series.tight_is_maximum:
        value = ": none" if series.max_bytes is None else f" {format_bytes(series.max_bytes)}"
        lines.append(f"  proven maximum{value} ({series.max_verdict})")
    for backend, left in (series.left_out or {}).items():
        lines.append(f"  the proofs leave out {backend} ({left['why']}), taken at {shape_text(left['witness'])}")
    lines += [f"  memory pattern {pattern_text(series, p)}" for p in series.patterns]
    lines += [f"  not drawn: {backend} ({reason})" for backend, reason in series.not_drawn]
    for a, b in series.route_changes():
        lines.append(f"  route switch {symbol} {a.x} -> {b.x}: {'/'.join(a.dispatched)} -> {'/'.join(b.dispatched)}")
    drops = series.drop_points()
    for a, b in drops[:MAX_DROP_LINES]:
        lines.append(f"  runtime drop {symbol} {a.x} -> {b.x}: {format_bytes(a.runtime)} on {route_text(a)} -> "
                     f"{format_bytes(b.runtime)} on {route_text(b)} {bytes_more(a.runtime, b.runtime)}")
    if len(drops) > MAX_DROP_LINES:
        lines.append(f"  and {len(drops) - MAX_DROP_LINES} more runtime drops (--json lists them)")
    for pair in series.pairs:
        lines.append(f"  non-monotonic pair {symbol} {pair['x'][0]} -> {pair['x'][1]}: "
                     f"{format_bytes(pair['runtime_bytes'][0])} on {'/'.join(pair['backends'][0])} -> "
                     f"{format_bytes(pair['runtime_bytes'][1])} on {'/'.join(pair['backends'][1])} "
                     f"{bytes_more(*pair['runtime_bytes'])}")
    if series.pair_search and series.pair_search["status"] == "undecided":
        lines.append("  the solver's pair search along the line: undecided within its resource limit per query; the "
                     "runtime drops listed are the spec's at every point drawn")
    return lines


def route_text(p: Point) -> str:
    """Return a point's route: its backends and, when it says more, its words ("flash (54 splits)")."""
    return "/".join(p.dispatched) + (f" ({p.route})" if p.route else "")


def tight_line(series: Series) -> str:
    """Return the tight policy in words: the proven maximum and where it is needed, the
    route-dropping bound (the maximum undecided), or nothing proved."""
    if series.tight_is_maximum:
        return (f"  tight policy = proven maximum {format_bytes(series.tight_bytes)} ({series.tight_verdict}), "
                f"needed at {shape_text(series.tight_witness)}")
    if series.tight_bytes is not None:
        return (f"  tight policy = {series.tight_method} {format_bytes(series.tight_bytes)} ({series.tight_verdict}; "
                "the maximum undecided)")
    return f"  tight policy: nothing proved ({series.tight_verdict})"


def shape_text(dims: dict[str, Any] | None) -> str:
    """Return a shape as "B=8 S=255 N=12 H=64 P=1536 (unfused)"."""
    if not dims:
        return "no shape"
    words = " ".join(f"{symbol}={dims[dim]}" for dim, symbol in SYMBOLS.items() if dims.get(dim) is not None)
    backends = dims.get("backends")
    return words + (f" ({'/'.join(backends)})" if backends else "")


def pattern_text(series: Series, p: PatternLine) -> str:
    """Return one memory pattern in words: its box, its proven maximum (with the ratio to the
    estimate) or why not, and the part of the line inside its box."""
    symbol = SYMBOLS[SWEEPS[series.sweep]]
    where = ("not on this line" if p.x_range is None
             else f"on this line at {symbol} = {p.x_range[0]}" + ("" if p.x_range[0] == p.x_range[1]
                                                                  else f"..{p.x_range[1]}"))
    if p.max_bytes is None:
        value = f"{p.unproved}, not drawn"
    else:
        ratio = f", {p.ratio:.1f}x below {series.estimator} estimate" if p.ratio else ""
        value = f"proven max {format_bytes(p.max_bytes)}{ratio}, needed at {shape_text(p.witness)}"
    return f"{p.name} ({p.box}): {value}; {where}"
