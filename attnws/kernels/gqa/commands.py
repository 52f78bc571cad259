"""`attnws validate --op gqa`: GroupQueryAttention shapes run on their route's kernels and measured
against the family's footprint (`harness`), one shape from the node flags or every record
of a shapes document (`attnws counterexamples --op gqa --json` writes one). The family is not in
the shared registries yet, so the shared `validate` hands GroupQueryAttention documents here
(`validate_records`) and `route` sends `validate --op gqa` to this module's group; both go when
the family registers.

Results stream as the shared validator's do: the device line, one result per shape (text, or a
JSON object per line), then a summary with each pair's comparison (T and T + 1 of a key-length
drop: the larger key length measured needing less). Flash, MEA and unfused run with the
preparation stages the footprint declares (`harness`); a shape whose route or features have no
kernels here (cuDNN; bf16, a quantized cache, smooth softmax or a head sink...) is not run, which
is not a failure; exit 3 when no shape ran, 1 when one failed.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from ...spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, CommandResult, Progress, add_json_argument
from ...spec.domain import CONCRETE
from ...spec.errors import InvalidArgument, Unsupported, UsageError, WorkspaceError
from ...spec.gqa.arguments import OP, add_box_arguments, box_from_args, without_op
from ...spec.gqa.node import read_shape_record, shape_record
from ...spec.printable import printable
from ...spec.units import format_bytes
from ..budget import DEFAULT_MAX_SIM_SECONDS, sim_seconds_from_args

GROUP = "gqa-validate"  # the subcommand `route` sends `validate --op gqa` to (not listed in `attnws --help`)


def route(args: list[str]) -> tuple[list[str], str] | None:
    """Return `attnws validate --op gqa ...` as this module's group parses it, with the name its
    messages go under; None for any other command line."""
    if not args or args[0] != "validate":
        return None
    rest, given = without_op(args[1:])
    return ([GROUP, *rest], f"validate --op {OP}") if given else None


def register(subparsers: Any) -> None:
    """Add the group `route` sends `validate --op gqa` to."""
    text = "run one GroupQueryAttention shape on its route's kernels and measure it against the footprint"
    parser = subparsers.add_parser(GROUP, prog=f"attnws validate --op {OP}", description=text)
    add_box_arguments(parser, exact=True)
    parser.add_argument_group("limits").add_argument(
        "--max-sim-seconds", dest="max_sim_seconds", type=float, default=DEFAULT_MAX_SIM_SECONDS, metavar="SECONDS",
        help="on the simulator, do not run a shape estimated to take longer (inf: no limit)")
    add_json_argument(parser)
    parser.set_defaults(handler=run_validate)


def run_validate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Validate the one shape the flags name (a target names its node: B, S and T at their maxima)."""
    box = box_from_args(ns, exact=True)
    records = [shape_record(box, box.batch.hi, box.seq.hi, box.total_seq.hi)]
    return CommandResult(EXIT_OK, "", {}, stream=validate_records(records, progress,
                                                                          sim_seconds_from_args(ns)))


def is_gqa_document(document: Any) -> bool:
    """Return whether a shapes document's records are GroupQueryAttention's (`"op": "gqa"`); one
    mixing them with other operators' records is a usage error."""
    shapes = document.get("shapes") if isinstance(document, dict) else None
    if not isinstance(shapes, list):
        return False
    ours = [isinstance(r, dict) and r.get("op") == OP for r in shapes]
    if any(ours) and not all(ours):
        raise UsageError("a shapes document holds GroupQueryAttention records or other operators' records, not both "
                         f"(record {ours.index(False) + 1} is not GroupQueryAttention's)")
    return bool(shapes) and all(ours)


def validate_records(records: list[Any], progress: Progress,
                     max_sim_seconds: float = DEFAULT_MAX_SIM_SECONDS) -> Iterator[CommandResult]:
    """Stream the device line, one result per record, then the summary (module docstring)."""
    from ..device import device_kind

    device = device_kind()
    yield CommandResult(EXIT_OK, f"device: {device}", None)
    results = []
    for index, record in enumerate(records, 1):
        result = validate_record(record, f"shape record {index}", progress, max_sim_seconds)
        results.append(result)
        yield CommandResult(EXIT_REJECTED if result["status"] == "failed" else EXIT_OK, result_text(result),
                            {"record": "result", **result})
    yield _summary(results, device)


# The simulator's time per attention multiply-add B * N * S * T * H, measured on #32453's pair
# (B 1, N 2, S 1, T 13,824, H 64: about 37 s a shape on this machine's cores), and its floor per shape.
SIMULATOR_SECONDS_PER_FMA = 2.1e-5
SIMULATOR_SECONDS_PER_SHAPE = 2.0


def simulator_seconds(batch: int, seq: int, total: int, heads: int, head_size: int) -> float:
    """Return the estimated simulator seconds of one shape (`SIMULATOR_SECONDS_PER_FMA`)."""
    return SIMULATOR_SECONDS_PER_SHAPE + SIMULATOR_SECONDS_PER_FMA * batch * heads * seq * total * head_size


def check_records(records: list[Any], source: str) -> None:
    """Read every record before any runs; a malformed one is a usage error naming it."""
    for index, record in enumerate(records, 1):
        try:
            read_shape_record(record, f"shape record {index}")
        except InvalidArgument as error:
            raise UsageError(f"--shapes {source}: {error}") from None


def validate_record(record: Any, what: str, progress: Progress,
                    max_sim_seconds: float = DEFAULT_MAX_SIM_SECONDS) -> dict[str, Any]:
    """Return one shape record's result as JSON data: status passed, failed or not_run (no
    kernels here for its route, or on the simulator estimated to take over `max_sim_seconds`;
    inf: no limit), and why; a malformed record raises DocumentError."""
    from ..device import SIMULATOR, device_kind
    from .harness import validate_gqa

    box, batch, seq, total, labels = read_shape_record(record, what)
    base = {"op": OP, "name": box.name, "batch": batch, "seq": seq, "total_seq": total, **labels}
    seconds = simulator_seconds(batch, seq, total, box.num_heads, box.head_size)
    if device_kind() == SIMULATOR and seconds > max_sim_seconds:
        return {**base, "status": "not_run", "reason": f"too large for the simulator: about {seconds:,.0f} s "
                                                       f"estimated, over --max-sim-seconds {max_sim_seconds:g}"}
    progress(f"{box.name}: B {batch}, S {seq}, T {total}")
    try:
        report = validate_gqa(box.problem(CONCRETE, batch, seq, total), box.config)
    except Unsupported as error:
        return {**base, "status": "not_run", "reason": str(error)}
    except WorkspaceError as error:
        return {**base, "status": "failed", "failures": [f"{error.status}: {error}"]}
    failures = list(report.failures())
    return {**base, "status": "failed" if failures else "passed", "shape": report.shape, "route": report.route,
            "splits": report.splits,
            "fast_decode": report.fast_decode, "workspace_bytes": report.workspace_bytes,
            "allocated": dict(report.allocated), "stages": list(report.stages), "not_run": list(report.not_run),
            "touched_bytes": dict(report.touched_bytes), "untouched_regions": dict(report.untouched),
            "spare_bytes": report.spare_bytes,
            "max_error": report.max_error,
            "tolerance": report.tolerance, "failures": failures}


def result_text(r: dict[str, Any]) -> str:
    """One result in words."""
    labels = " ".join(printable(str(r[k])) for k in ("label", "pair", "role") if k in r)
    head = f"{printable(r['name'])} B {r['batch']}, S {r['seq']}, T {r['total_seq']:,}" + (f" ({labels})" if labels else "")
    if r["status"] == "not_run":
        return f"{head}: not run: {printable(r['reason'])}"
    if "shape" not in r:
        return f"{head}: FAILED: {printable(r['failures'][0])}"
    route = r["route"] + " (fast decode)" * r["fast_decode"] + (f", {r['splits']} split(s)" if r["route"] == "flash"
                                                               else "")
    lines = [f"{head}: {'passed' if r['status'] == 'passed' else 'FAILED'}: {route}, workspace "
             f"{format_bytes(r['workspace_bytes'])} (the recipe's), allocated "
             + ", ".join(f"{name} {format_bytes(n)}" for name, n in r["allocated"].items())]
    if r["status"] == "passed":
        lines.append(f"  every stage ({', '.join(r['stages'])}) wrote inside its buffers and wrote them whole; "
                     f"output within {r['tolerance']:g} of the float64 reference (max error {r['max_error']:.3g})")
    lines += [f"  {printable(f)}" for f in r["failures"]]
    if r["spare_bytes"]:
        regions = ", ".join(f"{name} {format_bytes(n)}" for name, n in r["untouched_regions"].items())
        lines.append(f"  reserved beyond the footprint: {format_bytes(r['spare_bytes'])} no kernel touches"
                     + (f" (whole regions: {regions})" if regions else " (alignment and regions' unused ends)"))
    if r["not_run"]:
        lines.append(f"  ORT's launches not run here: {', '.join(r['not_run'])}")
    return "\n".join(lines)


def _summary(results: list[dict[str, Any]], device: str) -> CommandResult:
    """The counts, each pair's comparison and the exit code."""
    counts = {s: sum(r["status"] == s for r in results) for s in ("passed", "failed", "not_run")}
    pairs = []
    for name in dict.fromkeys(r["pair"] for r in results if "pair" in r):
        roles = {r.get("role"): r for r in results if r.get("pair") == name and "workspace_bytes" in r}
        if {"larger", "smaller"} <= set(roles):
            big, small = roles["larger"], roles["smaller"]
            pairs.append({"pair": name, "total_seq": big["total_seq"], "next_total_seq": small["total_seq"],
                          "bytes": big["workspace_bytes"], "next_bytes": small["workspace_bytes"],
                          "drops": small["workspace_bytes"] < big["workspace_bytes"]})
    lines = [f"pair {p['pair']}: T {p['total_seq']:,} allocated {format_bytes(p['bytes'])}, T {p['next_total_seq']:,} "
             f"allocated {format_bytes(p['next_bytes'])}"
             + (": the longer key length needs less" if p["drops"] else "") for p in pairs]
    ran = counts["passed"] + counts["failed"]
    words = (f"{len(results)} result(s) on the {device}: {counts['passed']} passed, {counts['failed']} failed"
             + (f", {counts['not_run']} not run (not failures: no kernels here for their route, or too large "
                "for the simulator)" if counts["not_run"] else ""))
    verdict, code = (("FAILED", EXIT_REJECTED) if counts["failed"] else ("passed", EXIT_OK)) if ran else \
        ("no shape ran", EXIT_UNKNOWN)
    doc = {"record": "summary", "op": OP, "device": device, "passed": not counts["failed"], "ran": bool(ran),
           "total": len(results), "counts": counts, "pairs": pairs}
    return CommandResult(code, "\n".join(lines + [f"{verdict}: {words}"]), doc)
