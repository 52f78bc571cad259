"""`attnws validate` on GroupQueryAttention shapes: each runs on its route's kernels and is measured
against the family's footprint (`harness`), one shape from the problem flags (`--op gqa`) or every
record of a shapes document (`attnws counterexamples --op gqa --json` writes one). The shared
`validate` reads the flags and the document as for every operator; while the family's kernels are
in progress (`attnws.kernels.families.IN_PROGRESS`) it hands the shapes read here
(`register_family_command`), and this module's results are the family's own.

Results stream as the shared validator's do: the device line, one result per shape (text, or a
JSON object per line), then a summary with each pair's comparison (T and T + 1 of a key-length
drop: the larger key length measured needing less). XQA, Flash, MEA and unfused run with the
preparation stages the footprint declares (`harness`); a shape whose route or features have no
kernels here (cuDNN; bf16, a quantized cache, smooth softmax or a head sink...) is not run, which
is not a failure, and neither is one estimated over --max-sim-seconds on the simulator; exit 3
when no shape ran, 1 when one failed. ORT's dispatch picks the route: --backend does not apply,
and neither does --max-memory-bytes (the harness has no memory estimate).
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from ...spec.command_line import (
    EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, CommandResult, Progress, given, register_family_command,
)
from ...spec.errors import Unsupported, UsageError, WorkspaceError
from ...spec.families import op_fields
from ...spec.gqa.inputs import runtime_problem
from ...spec.hints import Geometry
from ...spec.options import RuntimeConfig
from ...spec.printable import printable
from ...spec.problem import Op
from ...spec.shapes_file import read_shape_record, shape_record
from ...spec.units import format_bytes
from ..budget import DEFAULT_MAX_SIM_SECONDS, sim_seconds_from_args

FAMILY = "gqa"
# The shared validate's flags the harness does not read: ORT's dispatch picks the route, and the
# run's memory is not estimated.
UNREAD = ("backend", "max_memory_bytes")


def register(subparsers: Any) -> None:
    """Hand the shared `validate` GroupQueryAttention's shapes (no parser of its own)."""
    register_family_command(FAMILY, "validate", run_validate)


def run_validate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Validate the shapes the shared `validate` read (`ns.records`: geometry, configuration,
    labels), streaming one result per shape; see the module docstring."""
    unread = given(ns, UNREAD)
    if unread:
        raise UsageError(f"{' '.join(unread)} does not apply to GroupQueryAttention: its harness runs the route "
                         "ORT's dispatch picks and estimates simulator seconds only (--max-sim-seconds)")
    return CommandResult(EXIT_OK, "", {}, stream=validate_records(ns.records, progress, sim_seconds_from_args(ns)))


def validate_records(records: list[tuple[Geometry, RuntimeConfig, dict[str, Any]]], progress: Progress,
                     max_sim_seconds: float = DEFAULT_MAX_SIM_SECONDS) -> Iterator[CommandResult]:
    """Stream the device line, one result per shape read, then the summary (module docstring)."""
    from ..device import device_kind

    device = device_kind()
    yield CommandResult(EXIT_OK, f"device: {device}", None)
    results = []
    for index, (geometry, config, labels) in enumerate(records, 1):
        progress(f"validate {index}/{len(records)}: {labels.get('label', FAMILY)} B {geometry.batch}, "
                 f"S {geometry.seq}, T {geometry.total_seq}")
        result = validate_geometry(geometry, config, labels, max_sim_seconds)
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


def validate_record(record: Any, what: str, max_sim_seconds: float = DEFAULT_MAX_SIM_SECONDS) -> dict[str, Any]:
    """Return `validate_geometry` of one shape record (`attnws.spec.shapes_file`); a malformed
    record raises DocumentError naming `what` and the field."""
    geometry, config, labels = read_shape_record(record, what)
    return validate_geometry(geometry, config, labels, max_sim_seconds)


def validate_geometry(geometry: Geometry, config: RuntimeConfig, labels: dict[str, Any],
                      max_sim_seconds: float = DEFAULT_MAX_SIM_SECONDS) -> dict[str, Any]:
    """Return one shape's result as JSON data: status passed, failed (a check, or the specification
    rejects the shape) or not_run (no kernels here for its route, or on the simulator estimated to
    take over `max_sim_seconds`; inf: no limit), and why."""
    from ..device import SIMULATOR, device_kind
    from .harness import validate_gqa

    batch, seq, total = geometry.batch, geometry.seq, geometry.total_seq
    name = op_fields(Op.GQA).record_name(shape_record(geometry, config), "")
    base = {"op": FAMILY, "name": name, "batch": batch, "seq": seq, "total_seq": total}
    base.update({k: v for k, v in labels.items() if k not in base})  # the record's labels, after its shape
    seconds = simulator_seconds(batch, seq, total, geometry.heads, geometry.head_size)
    if device_kind() == SIMULATOR and seconds > max_sim_seconds:
        return {**base, "status": "not_run", "reason": f"too large for the simulator: about {seconds:,.0f} s "
                                                       f"estimated, over --max-sim-seconds {max_sim_seconds:g}"}
    try:
        report = validate_gqa(runtime_problem(geometry), config)
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


RESULT_LABELS = ("label", "pair", "role")  # the labels a result's line names, as the shared validate's does


def result_text(r: dict[str, Any]) -> str:
    """One result in words, headed by its shape as `attnws validate` names a record."""
    labels = " ".join(printable(str(r[k])) for k in RESULT_LABELS if k in r)
    head = printable(r["name"]) + (f" [{labels}]" if labels else "")
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
    lines = [f"pair {printable(str(p['pair']))}: T {p['total_seq']:,} allocated {format_bytes(p['bytes'])}, "
             f"T {p['next_total_seq']:,} allocated {format_bytes(p['next_bytes'])}"
             + (": the longer key length needs less" if p["drops"] else "") for p in pairs]
    ran = counts["passed"] + counts["failed"]
    words = (f"{len(results)} result(s) on the {device}: {counts['passed']} passed, {counts['failed']} failed"
             + (f", {counts['not_run']} not run (not failures: no kernels here for their route, or too large "
                "for the simulator)" if counts["not_run"] else ""))
    verdict, code = (("FAILED", EXIT_REJECTED) if counts["failed"] else ("passed", EXIT_OK)) if ran else \
        ("no shape ran", EXIT_UNKNOWN)
    doc = {"record": "summary", "op": FAMILY, "device": device, "passed": not counts["failed"], "ran": bool(ran),
           "total": len(results), "counts": counts, "pairs": pairs}
    return CommandResult(code, "\n".join(lines + [f"{verdict}: {words}"]), doc)
