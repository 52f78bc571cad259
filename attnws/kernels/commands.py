"""`attnws validate`: run the validator on one concrete shape or on a shapes document.

Results stream: each shape's result is handed to the CLI as soon as it is ready (a text block, or
one JSON object per line with --json), then a summary. Before a shape runs, its cost is
estimated: one over --max-sim-seconds (on the simulator) or --max-memory-bytes is not run and
reported "too large", which is not a failure.

Exit codes: 0 every check passed (shapes too large to run included), 1 a check failed or the
specification rejects the shape, 2 a usage error (raised as UsageError; a malformed shapes
document too). The handler never prints: it returns a CommandResult.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from ..command import (
    EXIT_OK,
    EXIT_REJECTED,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_problem_arguments,
    config_flags_given,
    geometry_from_args,
    given,
    problem_flags_given,
)
from ..spec.errors import InvalidArgument, UsageError, WorkspaceError
from ..spec.problem import Backend
from ..spec.shapes_file import load_shapes_document, read_shapes_document
from ..spec.units import format_bytes
from .budget import DEFAULT_MAX_SIM_SECONDS, RunLimits, default_max_memory_bytes

def register(subparsers: Any) -> None:
    """Add the `validate` subcommand."""
    parser = subparsers.add_parser(
        "validate", help="run the backend ORT would pick on exactly the recipe's memory and check it",
        description="Validate recipes against real allocations: one shape from the problem flags, or every "
                    "shape of a document written by `attnws counterexamples --json`. Each result prints as "
                    "it finishes (with --json: one JSON object per line, then a summary object). Runs on a "
                    "GPU when Numba sees one, else on the CUDA simulator, where a shape estimated to take "
                    "longer than --max-sim-seconds is reported too large and not run (not a failure).")
    add_problem_arguments(parser)
    add_config_arguments(parser)
    parser.add_argument("--shapes", metavar="FILE|-", help="shapes document (JSON); '-' reads standard input")
    parser.add_argument("--backend", choices=[b.value for b in Backend],
                        help="force this backend instead of ORT's dispatch (one shape only)")
    parser.add_argument("--max-sim-seconds", dest="max_sim_seconds", type=float, default=DEFAULT_MAX_SIM_SECONDS,
                        metavar="SECONDS", help="on the simulator, do not run a shape estimated to take longer")
    parser.add_argument("--max-memory-bytes", dest="max_memory_bytes", type=int, default=None, metavar="BYTES",
                        help="do not run a shape needing more host or device memory (default: a quarter of "
                             "this machine's RAM)")
    add_json_argument(parser)
    parser.set_defaults(handler=run_validate)


def read_document(source: str) -> Any:
    """Return the JSON document in FILE, or on standard input for '-', read through the shared
    reader (regular files only, a size limit, UTF-8, bounded JSON); a usage error when it cannot be
    read or is not JSON."""
    try:
        return load_shapes_document(source)
    except InvalidArgument as error:
        raise UsageError(f"--shapes {source}: {error}") from None


def shape_name(s: Any) -> str:
    """Return the shape record as `attnws validate` flags would name it, with its labels
    (MultiHeadAttention: B, S, L, P, N, H, Hv and its flags, where the record carries them)."""
    labels = " ".join(str(s[k]) for k in ("label", "pair", "role") if k in s)
    if s["op"] == "mha":
        extra = [f"{short}={s[key]}" for key, short in (("kv_seq", "L"), ("past", "P")) if s.get(key)]
        flags = [str(s[k]) for k in ("format", "mask") if s.get(k) not in (None, "separate", "none", "packed")]
        flags += [k for k in ("with_past", "with_present", "unidirectional", "qkv_bias", "attn_bias") if s.get(k)]
        dims = " ".join([f"B={s['batch']}", f"S={s['seq']}", *extra, f"N={s['heads']}", f"H={s['head_size']}",
                         f"Hv={s['v_head_size']}", *flags])
        return f"mha {s['dtype']} {dims} sm{s['sm']}" + (f" [{labels}]" if labels else "")
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


VERDICT = {"passed": "ok  ", "failed": "FAIL", "refused": "SKIP"}


def format_report(report: Any) -> str:
    """Return a shape's verdict line, then its failures and its buffers, one per line."""
    name = shape_name(report.shape)
    if report.error:
        return f"FAIL {name}: {report.error}"
    if report.backend is None:
        return f"ok   {name}: empty output, nothing allocated or launched"
    estimate = "unavailable" if report.estimate_bytes is None else format_bytes(report.estimate_bytes)
    if report.status == "refused":
        return (f"SKIP {name}: {report.backend}, recipe {format_bytes(report.recipe_bytes)}, estimate {estimate}; "
                f"not run: {report.refused}")
    ran = (f", output error {report.max_error:.3g} (tolerance {report.tolerance:.3g})" if report.stages
           else ", not launched")
    lines = [f"{VERDICT[report.status]} {name}: {report.backend}, recipe {format_bytes(report.recipe_bytes)}, "
             f"allocated {format_bytes(report.allocated_bytes)}, estimate {estimate}{ran}"]
    if report.failures:
        lines.append(f"  failed: {', '.join(report.failures)}")
        lines += [f"  {line}" for line in failure_lines(report)]
        if report.refused:
            lines.append(f"  not run: {report.refused}")
    if report.stages:
        lines.append(f"  stages: {', '.join(report.stages)}")
    width = max((len(b.name) for b in report.buffers), default=0)
    lines += [buffer_line(b, width) for b in report.buffers]
    return "\n".join(lines)


def pair_line(p: dict[str, Any]) -> str:
    """Return a non-monotonic pair's allocated bytes, smaller shape first."""
    members = " vs ".join(
        f"{format_bytes(m['allocated_bytes'])} ({' '.join(f'{k}={v}' for k, v in m['dimensions'].items())}, "
        f"{m['backend']})" for m in p["members"])
    return f"pair {p['pair']}: allocated {members}" + (": the smaller shape allocates more"
                                                       if p["smaller_allocates_more"] else "")


def summary(reports: list[Any], device: str) -> CommandResult:
    """Return the summary result: counts by status, the pairs' comparison, and the exit code."""
    from .report import pair_comparisons

    counts = {status: sum(r.status == status for r in reports) for status in ("passed", "failed", "refused")}
    pairs = pair_comparisons([r for r in reports if r.ran])
    passed = counts["failed"] == 0
    words = f"{len(reports)} result(s) on the {device}: {counts['passed']} passed, {counts['failed']} failed"
    if counts["refused"]:
        words += (f", {counts['refused']} not run because too large (not failures: run them on a GPU, or "
                  "shrink them, e.g. with a smaller target)")
    lines = [pair_line(p) for p in pairs] + [f"{'passed' if passed else 'FAILED'}: {words}"]
    doc = {"record": "summary", "device": device, "passed": passed, "total": len(reports), "counts": counts,
           "pairs": pairs}
    return CommandResult(EXIT_OK if passed else EXIT_REJECTED, "\n".join(lines), doc)


def limits_from_args(ns: argparse.Namespace) -> RunLimits:
    """Return the run limits the flags give (UsageError for a non-positive limit)."""
    seconds = ns.max_sim_seconds
    if not seconds > 0:
        raise UsageError(f"--max-sim-seconds {seconds}: must be a positive number of seconds (inf: no limit)")
    memory = ns.max_memory_bytes
    if memory is not None and memory <= 0:
        raise UsageError(f"--max-memory-bytes {memory}: must be a positive number of bytes")
    return RunLimits(seconds, default_max_memory_bytes() if memory is None else memory)


def run_validate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Validate the shape(s) the flags name, streaming one result per shape; see the module docstring."""
    from .device import device_kind
    from .validate import iter_document, validate_shape

    limits = limits_from_args(ns)
    if ns.shapes:
        if problem_flags_given(ns):
            raise UsageError(f"--shapes gives every shape; {' '.join(given(ns, ('op', 'batch', 'seq', 'heads', 'head_size', 'v_head_size', 'tokens', 'input_hidden', 'dtype', 'format', 'qkv_hidden_sizes', 'qkv_bias', 'attn_bias', 'attn_bias_broadcast_batch', 'attn_bias_broadcast_heads')))} cannot be combined with it")
        if config_flags_given(ns):
            raise UsageError(f"--shapes: each shape record carries its own device and options; "
                             f"{' '.join(config_flags_given(ns))} cannot be combined with it")
        if ns.backend:
            raise UsageError("--backend applies to one shape; a shapes document runs ORT's dispatch")
        document = read_document(ns.shapes)
        try:
            read_shapes_document(document)
        except InvalidArgument as error:
            raise UsageError(f"--shapes {ns.shapes}: {error}") from None
        reports: Iterator[Any] = iter_document(document, progress, limits=limits)
    else:
        geometry, config = geometry_from_args(ns, "validate")
        try:
            reports = iter([validate_shape(geometry, config, ns.backend, limits=limits)])
        except UsageError:
            raise
        except WorkspaceError as error:
            from ..spec.shapes_file import shape_record
            from .report import ValidationReport

            reports = iter([ValidationReport(shape_record(geometry, config), device_kind(),
                                             error=f"{error.status}: {error}")])
    device = device_kind()
    return CommandResult(EXIT_OK, "", {}, stream=_stream(reports, device))


def _stream(reports: Iterator[Any], device: str) -> Iterator[CommandResult]:
    done: list[Any] = []
    yield CommandResult(EXIT_OK, f"device: {device}", None)
    for report in reports:
        done.append(report)
        yield CommandResult(EXIT_OK if report.status != "failed" else EXIT_REJECTED, format_report(report),
                            {"record": "result", **report.as_dict()})
    yield summary(done, device)
