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


def format_report(report: Any) -> str:
    """Return one line per shape: verdict, backend, bytes, error and the failed checks."""
    s = report.shape
    labels = " ".join(str(s[k]) for k in ("label", "pair", "role") if k in s)
    name = (f"{s['op']} {s['dtype']} T={s['tokens']} B={s['batch']} S={s['seq']} N={s['heads']} H={s['head_size']} "
            f"Hv={s['v_head_size']} sm{s['sm']}" + (f" [{labels}]" if labels else ""))
    if report.error:
        return f"FAIL {name}: {report.error}"
    verdict = "ok  " if report.passed else "FAIL"
    estimate = "n/a" if report.estimate_bytes is None else str(report.estimate_bytes)
    failed = f"  failed: {', '.join(report.failures)}" if report.failures else ""
    return (f"{verdict} {name}: {report.backend or 'empty'} recipe {report.recipe_bytes} B, allocated "
            f"{report.allocated_bytes} B, estimate {estimate} B, error {report.max_error:.3g} <= "
            f"{report.tolerance:.3g}{failed}")


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
        f"{m['allocated_bytes']} B ({' '.join(f'{k}={v}' for k, v in m['dimensions'].items())}, {m['backend']})"
        for m in p["members"])
              + (": the smaller shape allocates more" if p["smaller_allocates_more"] else "") for p in pairs]
    passed = all(r.passed for r in reports)
    document = {"device": device, "passed": passed, "reports": [r.as_dict() for r in reports], "pairs": pairs}
    return CommandResult(EXIT_OK if passed else EXIT_REJECTED, "\n".join(lines), document)
