"""`attnws validate`: run the validator on one concrete shape or on a shapes document.

Exit codes: 0 every check passed, 1 a check failed or the specification rejects the shape, 2 a
usage error (raised as UsageError). The handler never prints: it returns a CommandResult.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..command import (
    EXIT_OK,
    EXIT_REJECTED,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_problem_arguments,
    geometry_from_args,
    problem_flags_given,
)
from ..spec.units import format_bytes
from ..spec.errors import UsageError, WorkspaceError
from ..spec.problem import Backend


def register(subparsers: Any) -> None:
    """Add the `validate` subcommand."""
    parser = subparsers.add_parser(
        "validate", help="run the backend ORT would pick on exactly the recipe's memory and check it",
        description="Validate recipes against real allocations: one shape from the problem flags, or every "
                    "shape of a document written by `attnws counterexamples --json`.")
    add_problem_arguments(parser)
    add_config_arguments(parser)
    parser.add_argument("--shapes", metavar="FILE|-", help="shapes document (JSON); '-' reads standard input")
    parser.add_argument("--backend", choices=[b.value for b in Backend],
                        help="force this backend instead of ORT's dispatch")
    add_json_argument(parser)
    parser.set_defaults(handler=run_validate)


def read_document(source: str) -> Any:
    """Return the JSON document in FILE, or on standard input for '-'."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
        return json.loads(text)
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"--shapes {source}: {error}") from None


def shape_name(s: Any) -> str:
    """Return the shape record as `attnws validate` flags would name it, with its labels."""
    labels = " ".join(str(s[k]) for k in ("label", "pair", "role") if k in s)
    return (f"{s['op']} {s['dtype']} T={s['tokens']} B={s['batch']} S={s['seq']} N={s['heads']} H={s['head_size']} "
            f"Hv={s['v_head_size']} sm{s['sm']}" + (f" [{labels}]" if labels else ""))


def buffer_line(b: Any, width: int) -> str:
    """Return one buffer's placement and sizes: reserved, footprint, touched, documented unwritten, padding."""
    extras = [f"{format_bytes(b.unwritten_bytes)} documented unwritten"] if b.unwritten_bytes else []
    extras += [f"padding {format_bytes(b.padding_bytes)}"] if b.padding_bytes else []
    return (f"    {b.name:<{width}} at {b.allocation} + {b.offset:,}: reserved {format_bytes(b.reserved_bytes)}, "
            f"footprint {format_bytes(b.footprint_bytes)}, touched {format_bytes(b.touched_bytes)}"
            + (f" ({', '.join(extras)})" if extras else ""))


def failure_lines(report: Any) -> list[str]:
    """Return a sentence per failed check that has details beyond its name."""
    m, lines = report.measurement, []
    if report.unplaced:
        lines.append(f"unplaced buffers: the recipe has no view to place {', '.join(report.unplaced)} at")
    if report.misaligned:
        lines.append(f"misaligned: buffers starting off their alignment: {', '.join(report.misaligned)}")
    if report.undersized:
        lines.append(f"undersized: buffers running past the end of their allocation: {', '.join(report.undersized)}")
    lines += [f"overlapping buffers: {a} and {b} hold data together and share bytes" for a, b in report.overlapping]
    if not report.allocations_match:
        measured = ", ".join(f"{r.purpose} {format_bytes(r.nbytes)}" for r in report.workspace_allocations) or "none"
        expected = ", ".join(f"{p} {format_bytes(b)}" for p, b in report.recipe_allocations) or "none"
        lines.append(f"allocations: the device holds {measured}; the recipe asks for {expected}")
    lines += [f"oversized: the recipe reserves {format_bytes(o.nbytes)} for {o.allocation}, more than its "
              f"footprint {format_bytes(o.footprint_bytes)} plus documented slack {format_bytes(o.slack_bytes)}"
              for o in report.oversized]
    if m.first_guard_write:
        lines.append(f"guard bands: a guard byte changed at {m.first_guard_write}")
    lines += [f"stray writes: {s.stage} wrote {format_bytes(s.nbytes)} of {s.allocation} outside the buffers it "
              f"declares, the first at offset {s.first_offset:,}" for s in m.stray]
    lines += [f"incomplete writes: {i.stage} wrote {i.written:,} of the {i.expected:,} elements of {i.buffer} "
              "it must write" for i in m.incomplete]
    return lines


def format_report(report: Any) -> str:
    """Return a shape's verdict line, then its failures and its buffers, one per line."""
    name = shape_name(report.shape)
    if report.error:
        return f"FAIL {name}: {report.error}"
    if report.backend is None:
        return f"ok   {name}: empty output, nothing allocated or launched"
    verdict = "ok  " if report.passed else "FAIL"
    estimate = "unavailable" if report.estimate_bytes is None else format_bytes(report.estimate_bytes)
    ran = (f", output error {report.max_error:.3g} (tolerance {report.tolerance:.3g})" if report.stages
           else ", not launched")
    lines = [f"{verdict} {name}: {report.backend}, recipe {format_bytes(report.recipe_bytes)}, allocated "
             f"{format_bytes(report.allocated_bytes)}, estimate {estimate}{ran}"]
    if report.failures:
        lines.append(f"  failed: {', '.join(report.failures)}")
        lines += [f"  {line}" for line in failure_lines(report)]
    if report.stages:
        lines.append(f"  stages: {', '.join(report.stages)}")
    width = max((len(b.name) for b in report.buffers), default=0)
    lines += [buffer_line(b, width) for b in report.buffers]
    return "\n".join(lines)


def run_validate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Validate the shape(s) the flags name; see the module docstring for the exit codes."""
    from .. import kernels

    if ns.shapes and problem_flags_given(ns):
        raise UsageError("give either --shapes or the problem flags, not both")
    if ns.shapes:
        if ns.backend:
            raise UsageError("--backend applies to one shape; a shapes document runs ORT's dispatch")
        reports = kernels.validate_document(read_document(ns.shapes), progress)
    else:
        geometry, config = geometry_from_args(ns)
        try:
            reports = [kernels.validate_shape(geometry, config, ns.backend)]
        except UsageError:
            raise
        except WorkspaceError as error:
            return CommandResult(EXIT_REJECTED, f"rejected: {error}", {"error": error.status, "message": str(error)})
    pairs = kernels.pair_comparisons(reports)
    device = reports[0].device if reports else "none"
    lines = [f"device: {device}", *map(format_report, reports)]
    lines += [f"pair {p['pair']}: allocated " + " vs ".join(
        f"{format_bytes(m['allocated_bytes'])} ({' '.join(f'{k}={v}' for k, v in m['dimensions'].items())}, "
        f"{m['backend']})"
        for m in p["members"])
              + (": the smaller shape allocates more" if p["smaller_allocates_more"] else "") for p in pairs]
    passed = all(r.passed for r in reports)
    document = {"device": device, "passed": passed, "reports": [r.as_dict() for r in reports], "pairs": pairs}
    return CommandResult(EXIT_OK if passed else EXIT_REJECTED, "\n".join(lines), document)
