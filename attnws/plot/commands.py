"""The `attnws plot` subcommand: workspace bytes against one swept dimension, drawn or as JSON.

The handler returns a CommandResult and never prints or exits; matplotlib is imported only when
a picture is drawn. A bad --sweep, --at or --out (an unknown extension, a folder that does not
exist or cannot be written) is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from attnws.command import (
    EXIT_OK, CommandResult, Progress, add_config_arguments, add_json_argument, add_problem_arguments, target_from_args,
)
from attnws.spec.errors import UsageError
from attnws.spec.units import format_bytes

from .series import HELD, SWEEPS, SYMBOLS, compute_series, parse_at

FORMATS = (".png", ".svg")


def register(subparsers: Any) -> None:
    """Add the `plot` subcommand."""
    parser = subparsers.add_parser(
        "plot", help="draw workspace bytes against one swept dimension (PNG or SVG)",
        description="Sweep one dimension of a target over its range, the others held at their maximum (or at "
                    "--at values), and draw per swept value: each backend's recipe root, the runtime workspace "
                    "ORT allocates (bold), the AOT estimate (ORT's; attnws's own for MultiHeadAttention), the tight policy's bound and the proven maximum "
                    "(when proved), and the solver's non-monotonic pairs along the line. --json prints the "
                    "plotted series.")
    parser.add_argument("--target", help="a committed target name (see `attnws targets`) or a target JSON file")
    add_problem_arguments(parser)
    add_config_arguments(parser)
    parser.add_argument("--sweep", required=True, choices=list(SWEEPS),
                        help=f"the dimension swept over its range: {', '.join(SWEEPS)}")
    parser.add_argument("--at", action="append", default=[], metavar="NAME=VALUE",
                        help=f"hold a dimension at VALUE instead of its maximum (repeatable; NAME one of "
                             f"{', '.join(HELD)})")
    parser.add_argument("--out", metavar="FILE.png|FILE.svg", help="write the picture here (needed unless --json)")
    add_json_argument(parser)
    parser.set_defaults(handler=plot_command)


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


def plot_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Compute the series, draw it when --out is given, and report what was drawn."""
    if ns.sweep not in SWEEPS:
        from attnws.command import suggestion

        raise UsageError(f"--sweep {ns.sweep}: expected one of {', '.join(SWEEPS)}{suggestion(ns.sweep, SWEEPS)}")
    if ns.out is None and not ns.json:
        raise UsageError("--out FILE.png|FILE.svg is required (or --json to print the series)")
    out = check_out(ns.out) if ns.out is not None else None
    target = target_from_args(ns)
    at = parse_at(ns.at, ns.sweep, target)
    series = compute_series(target, ns.sweep, at, progress=progress)
    seconds = None
    if out is not None:
        from .render import render

        progress(f"plot: drawing {len(series.points)} points into {out}")
        try:
            seconds = render(series, out)
        except OSError as error:
            raise UsageError(f"--out {out}: cannot write the picture ({error.strerror or error})") from None
    document = series.as_dict()
    if out is not None:
        document = {**document, "out": str(out)}
    symbol = SYMBOLS[SWEEPS[ns.sweep]]
    runtime = [y for y in series.runtime if y is not None]
    lines = [f"{series.target}: {series.configuration}",
             f"  {len(series.points)} points of {ns.sweep} ({symbol}) from {series.x[0]} to {series.x[-1]}",
             f"  runtime workspace from {format_bytes(min(runtime, default=None))} to "
             f"{format_bytes(max(runtime, default=None))}",
             f"  {series.estimator} AOT estimate {format_bytes(series.estimate_bytes)}",
             f"  tight policy's bound {format_bytes(series.tight_bytes)} ({series.tight_verdict})",
             f"  proven maximum {format_bytes(series.max_bytes)} ({series.max_verdict})"]
    for pair in series.pairs:
        lines.append(f"  non-monotonic pair {symbol} {pair['x'][0]} -> {pair['x'][1]}: "
                     f"{format_bytes(pair['runtime_bytes'][0])} on {'/'.join(pair['backends'][0])} -> "
                     f"{format_bytes(pair['runtime_bytes'][1])} on {'/'.join(pair['backends'][1])}")
    if out is not None:
        lines.append(f"wrote {out} in {seconds:.2f} s")
    return CommandResult(EXIT_OK, "\n".join(lines), document)
