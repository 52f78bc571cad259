"""`attnws validate`: run the validator on one concrete shape or on a shapes document.

Results stream: each shape's result is handed to the CLI as soon as it is ready (a text block, or
one JSON object per line with --json), then a summary. Before a shape runs, its cost is
estimated: one over --max-sim-seconds (on the simulator) or --max-memory-bytes is not run and
reported "too large", which is not a failure.

Every operator's shapes run through the one validator (`validate`), GroupQueryAttention's too,
and a document may mix operators. A shape whose route or features the kernels here do not model
(GroupQueryAttention's cuDNN route, bf16, a quantized cache...) is reported not run, which is not a
failure either.

A shape ORT refuses before any kernel runs (the specification rejects it, as ORT's input checks
do, or ORT's cascade runs no route for it) is reported "rejected" with ORT's message: nothing was
run, and it is counted apart from the failed shapes (a rejection is not a kernel fault). Only ORT's
own checks reject a shape (`validate.refusal`): an attnws bug (InternalError) is never a rejection;
it propagates, and the CLI exits 4 as for every internal error.

Exit codes: 0 every check passed (shapes not run included, as long as one shape ran), 1 a check
failed or ORT rejects a shape (as every command exits on a rejected problem), 2 a usage error
(raised as UsageError; a malformed shapes document too, and a backend forced on a shape it does
not implement), 3 no shape ran (every one too large or without kernels here, or a document
without shapes). The handler never prints: it returns a CommandResult.
"""

from __future__ import annotations

import argparse
from typing import Any, Iterator

from ..spec.command_line import (
    EXIT_OK,
    EXIT_REJECTED,
    EXIT_UNKNOWN,
    PROBLEM_FLAGS,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_problem_arguments,
    config_flags_given,
    geometry_from_args,
    given,
    in_range,
)
from ..spec.dispatch import cascade_gates
from ..spec.domain import CONCRETE
from ..spec.errors import InternalError, InvalidArgument, UsageError, WorkspaceError
from ..spec.estimate import runtime_problem
from ..spec.families import op_fields
from ..spec.hints import Geometry
from ..spec.options import RuntimeConfig
from ..spec.printable import printable
from ..spec.problem import Backend, Op
from ..spec.shapes_file import load_shapes_document, read_shapes_document
from ..spec.units import bytes_more, format_bytes
from .budget import DEFAULT_MAX_SIM_SECONDS, RunLimits, default_max_memory_bytes, sim_seconds_from_args
from .family_checks import NOT_APPLICABLE


def register(subparsers: Any) -> None:
    """Add the `validate` subcommand."""
    parser = subparsers.add_parser(
        "validate", help="run the backend ORT would pick on exactly the recipe's memory and check it",
        description="Validate recipes against real allocations: one shape from the problem flags, or every "
                    "shape of a document written by `attnws counterexamples --json`. Each result prints as "
                    "it finishes (with --json: one JSON object per line, then a summary object). Runs on a "
                    "GPU when Numba sees one, else on the CUDA simulator, where a shape estimated to take "
                    "longer than --max-sim-seconds is reported too large and not run (not a failure).")
    shapes = parser.add_argument_group("shapes", "One shape from the problem flags, or --shapes.")
    shapes.add_argument("--shapes", metavar="FILE|-", help="shapes document (JSON); '-' reads standard input")
    shapes.add_argument("--backend", choices=[b.value for b in Backend],
                        help="force this backend instead of ORT's dispatch (one shape only; refused on a shape the "
                             "backend does not implement)")
    add_problem_arguments(parser)
    add_config_arguments(parser)
    limits = parser.add_argument_group("limits", "A shape over a limit is reported too large and not run.")
    limits.add_argument("--max-sim-seconds", dest="max_sim_seconds", type=float, default=DEFAULT_MAX_SIM_SECONDS,
                        metavar="SECONDS", help="on the simulator, do not run a shape estimated to take longer "
                                                "(inf: no limit)")
    limits.add_argument("--max-memory-bytes", dest="max_memory_bytes", type=int, default=None, metavar="BYTES",
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
    labels = " ".join(printable(str(s[k])) for k in ("label", "pair", "role") if k in s)
    return op_fields(Op(s["op"])).record_name(s, labels)


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
              f"footprint {format_bytes(o.footprint_bytes)} plus documented slack {format_bytes(o.slack_bytes)} "
              f"{bytes_more(o.nbytes, o.footprint_bytes + o.slack_bytes)}" for o in report.oversized]
    if m.first_guard_write:
        lines.append(f"guard bands: a guard byte changed at {m.first_guard_write}")
    lines += [f"stray writes: {s.stage} wrote {format_bytes(s.nbytes)} of {s.allocation} outside the buffers it "
              f"declares, the first at offset {s.first_offset:,}" for s in m.stray]
    lines += [f"incomplete writes: {i.stage} wrote {i.written:,} of the {i.expected:,} elements of {i.buffer} "
              "it must write" for i in m.incomplete]
    if report.outside_regions.failed:
        lines.append("outside regions: buffers running past the room of their recipe region (up to the next "
                     f"region): {', '.join(report.outside_regions.failures)}")
    lines += [f"present cache: {f}" for f in report.present_cache.failures]
    lines += [f"lse: {f} against the float64 reference" for f in report.lse.failures]
    return lines


def note_lines(report: Any) -> list[str]:
    """Return what the report says beyond its checks: what the recipe reserves beyond the footprint
    where ORT documents no slack bounding it, and ORT's launches not run here."""
    lines = []
    if report.slack.status == NOT_APPLICABLE and report.spare_bytes:
        regions = ", ".join(f"{name} {format_bytes(n)}" for name, n in report.untouched_regions)
        lines.append(f"reserved beyond the footprint: {format_bytes(report.spare_bytes)} no buffer covers "
                     + (f"(whole regions: {regions})" if regions else "(alignment gaps and regions' unused ends)")
                     + "; not a failure: ORT documents no slack here")
    if report.launches_not_run:
        lines.append(f"ORT's launches not run here: {', '.join(report.launches_not_run)}")
    return lines


VERDICT = {"passed": "ok  ", "failed": "FAIL", "refused": "SKIP", "rejected": "REJ "}
STATUSES = ("passed", "failed", "refused", "rejected")  # the summary counts each apart


def format_report(report: Any) -> str:
    """Return a shape's verdict line, then its failures and its buffers, one per line."""
    name = shape_name(report.shape)
    if report.rejected:
        return f"{VERDICT['rejected']} {name}: rejected by ORT before any kernel runs (nothing run): {report.error}"
    if report.backend is None:
        return f"ok   {name}: empty output, nothing allocated or launched"
    if report.unmodelled:
        return f"SKIP {name}: {report.backend}: not run: {report.refused}"
    estimate = "unavailable" if report.estimate_bytes is None else format_bytes(report.estimate_bytes)
    backend = report.backend + (f" ({report.route})" if report.route else "")
    if report.status == "refused":
        return (f"SKIP {name}: {backend}, recipe {format_bytes(report.recipe_bytes)}, estimate {estimate}; "
                f"not run: {report.refused}")
    ran = (f", output error {report.max_error:.3g} (tolerance {report.tolerance:.3g})" if report.stages
           else ", not launched")
    if report.lse.checked:
        ran += f", LSE error {report.lse.max_error:.3g} (tolerance {report.lse.tolerance:.3g})"
    lines = [f"{VERDICT[report.status]} {name}: {backend}, recipe {format_bytes(report.recipe_bytes)}, "
             f"allocated {format_bytes(report.allocated_bytes)}, estimate {estimate}{ran}"]
    if report.failures:
        lines.append(f"  failed: {', '.join(report.failures)}")
        lines += [f"  {line}" for line in failure_lines(report)]
        if report.refused:
            lines.append(f"  not run: {report.refused}")
    lines += [f"  {line}" for line in note_lines(report)]
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
    smaller, larger = (m["allocated_bytes"] for m in p["members"])
    return f"pair {printable(str(p['pair']))}: allocated {members}" + (
        f": the smaller shape allocates more {bytes_more(smaller, larger)}" if p["smaller_allocates_more"] else "")


def summary(reports: list[Any], device: str) -> CommandResult:
    """Return the summary result: counts by status, the pairs' comparison, and the exit code."""
    from .report import pair_comparisons

    counts = {status: sum(r.status == status for r in reports) for status in STATUSES}
    pairs = pair_comparisons([r for r in reports if r.ran])
    passed = counts["failed"] == counts["rejected"] == 0
    words = f"{len(reports)} result(s) on the {device}: {counts['passed']} passed, {counts['failed']} failed"
    if counts["rejected"]:
        words += f", {counts['rejected']} rejected by ORT before any kernel runs (nothing run; not a kernel fault)"
    unmodelled = sum(r.status == "refused" and r.unmodelled for r in reports)
    if counts["refused"] - unmodelled:
        words += (f", {counts['refused'] - unmodelled} not run because too large (not failures: run them on a GPU, "
                  "or shrink them, e.g. with a smaller target)")
    if unmodelled:
        words += f", {unmodelled} not run because no kernels here model their route or features (not failures)"
    ran = counts["passed"] + counts["failed"] > 0
    if not passed:
        verdict, code = "FAILED" if counts["failed"] else "REJECTED", EXIT_REJECTED
    elif ran:
        verdict, code = "passed", EXIT_OK
    else:
        verdict, code = "no shape ran", EXIT_UNKNOWN
        words = words if reports else "the shapes document holds no shapes"
    lines = [pair_line(p) for p in pairs] + [f"{verdict}: {words}"]
    doc = {"record": "summary", "device": device, "passed": passed, "ran": ran, "total": len(reports),
           "counts": counts, "pairs": pairs}
    return CommandResult(code, "\n".join(lines), doc)


def limits_from_args(ns: argparse.Namespace) -> RunLimits:
    """Return the run limits the flags give (UsageError for a non-positive limit)."""
    seconds = sim_seconds_from_args(ns)
    memory = ns.max_memory_bytes
    if memory is not None:
        in_range(memory, "--max-memory-bytes", 1)
    return RunLimits(seconds, default_max_memory_bytes() if memory is None else memory)


# Gates that say whether ORT would pick a backend, not whether its kernels implement the shape: a
# backend forced past them still runs it (a build flag, the kernel options, the runner's cubin
# loading, the sequence thresholds the environment moves).
PREFERENCE_GATES = ("built", "enabled", "runner valid", "packed QKV sequence threshold", "fp32 sequence threshold")


def check_forced_backend(geometry: Geometry, config: RuntimeConfig, backend: Backend) -> None:
    """Raise UsageError when `--backend` names a route whose kernels do not implement the shape (a
    gate of `cascade_gates` other than the preference gates fails): ORT never sends the shape there,
    so a run would say nothing about ORT. A backend the operator has no route for at all is left to
    the specification, which rejects it (exit 1), as `attnws recipe` does; so is a problem ORT's checks
    refuse (`validate_shape` reports it rejected)."""
    try:  # ORT's own checks
        gates = dict(cascade_gates(CONCRETE, runtime_problem(geometry), config, runner_valid=True)).get(backend, [])
    except (InternalError, UsageError):
        raise
    except WorkspaceError:
        return
    failing = next((g for g in gates if g.name not in PREFERENCE_GATES and not g.cond), None)
    if failing is not None:
        raise UsageError(f"--backend {backend.value}: ORT's {backend.value} kernels do not implement this shape "
                         f"({failing.reason()}); ORT never sends it there. Drop --backend to run the backend ORT's "
                         "dispatch picks")


def run_validate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Validate the shape(s) the flags name, streaming one result per shape; see the module docstring."""
    from .device import device_kind
    from .validate import iter_document, validate_shape

    limits = limits_from_args(ns)
    if ns.shapes:
        problem = given(ns, PROBLEM_FLAGS)
        if problem:
            raise UsageError(f"--shapes gives every shape; {' '.join(problem)} cannot be combined with it")
        if config_flags_given(ns):
            raise UsageError(f"--shapes: each shape record carries its own device and options; "
                             f"{' '.join(config_flags_given(ns))} cannot be combined with it")
        if ns.backend:
            raise UsageError("--backend applies to one shape; a shapes document runs ORT's dispatch")
        document = read_document(ns.shapes)
        try:
            read_shapes_document(document)  # a malformed record is a usage error before anything runs
        except InvalidArgument as error:
            raise UsageError(f"--shapes {ns.shapes}: {error}") from None
        reports: Iterator[Any] = iter_document(document, progress, limits=limits)
    else:
        geometry, config = geometry_from_args(ns, "validate")
        if ns.backend:
            check_forced_backend(geometry, config, Backend(ns.backend))
        reports = iter([validate_shape(geometry, config, ns.backend, limits=limits)])  # ORT's refusal: rejected
    device = device_kind()
    return CommandResult(EXIT_OK, "", {}, stream=_stream(reports, device))


def _stream(reports: Iterator[Any], device: str) -> Iterator[CommandResult]:
    done: list[Any] = []
    yield CommandResult(EXIT_OK, f"device: {device}", None)
    for report in reports:
        done.append(report)
        code = EXIT_OK if report.passed else EXIT_REJECTED
        yield CommandResult(code, format_report(report), {"record": "result", **report.as_dict()})
    yield summary(done, device)
