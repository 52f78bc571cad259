"""The solver's subcommands: `attnws prove` and `attnws counterexamples`, and the proven maxima
for `attnws estimate --policy tight`. Registering them loads no Z3 (each handler imports what it
runs), so `attnws --help` starts quickly.

Handlers take (namespace, progress) and return a `CommandResult`; they never print or exit.
prove exits 0 when every theorem is PROVED (or NOT_APPLICABLE), 1 when one is REFUTED or VACUOUS
(unless the target declares that outcome: its estimate unavailable, or the theorem refuted by a
property of ORT; or the ledger differs), 3 when some are UNKNOWN and none REFUTED or VACUOUS; usage problems raise UsageError (exit 2). Without
--theorem, prove runs `DEFAULT_THEOREMS` (the safety claims); `--theorem all` adds the findings.
counterexamples exits 0 when something was found or every search was decided (its findings are
data, not failures), 3 when a search was undecided and nothing was found. Each of its searches
has a wall-clock budget, `--max-search-seconds` (default DEFAULT_SEARCH_SECONDS; inf: none), on
top of each query's limits: a search the clock cuts says so and is never "none" (see
`counterexamples`); on a terminal the search shows its queries and elapsed seconds as it goes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from attnws.spec.commands import TargetSolver
from attnws.spec.command_line import (
    CONFIG_FLAGS, EXIT_INTERRUPTED, EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, PROBLEM_FLAGS, UINT32_MAX, CommandResult,
    Progress, add_config_arguments, add_json_argument, add_pattern_argument, add_problem_arguments,
    add_target_argument, given, in_range, target_from_args,
)
from attnws.spec.errors import UsageError
from attnws.spec.printable import printable
from attnws.spec.units import bytes_more, format_bytes
from attnws.spec.target import Target

from attnws.spec.families import options_line, shape_words

from .claims import THEOREM_NAMES
from .settings import DEFAULT_LIMIT, DEFAULT_RLIMIT, DEFAULT_SECOND_RLIMIT, SOLVERS

MAX_JOBS = 64
# Each counterexample search's wall-clock budget unless --max-search-seconds says otherwise: twice
# what the slowest committed target's whole default `counterexamples` takes on a busy 2-core
# machine (bench/bench_cli.py counterexamples), so that none of them is cut there.
DEFAULT_SEARCH_SECONDS = 60.0
# Registering these commands loads no Z3: each handler imports what it runs.
VERDICT_EXIT = {"PROVED": EXIT_OK, "NOT_APPLICABLE": EXIT_OK, "REFUTED": EXIT_REJECTED, "VACUOUS": EXIT_REJECTED,
                "UNKNOWN": EXIT_UNKNOWN}

__all__ = ["register", "prove_command", "counterexamples_command"]


def _add_solver_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the target, problem, device and solver flags; return the solver group for the command's own
    (the command adds --json last)."""
    add_target_argument(parser)
    add_problem_arguments(parser)
    add_config_arguments(parser)
    solver = parser.add_argument_group("solver")
    solver.add_argument("--rlimit", type=int, default=None, metavar="N",
                        help=f"Z3 resource limit per query, 1..{UINT32_MAX:,} (default: {DEFAULT_RLIMIT:,})")
    solver.add_argument("--timeout-ms", dest="timeout_ms", type=int, default=None, metavar="MS",
                        help=f"optional wall-clock limit per query, 1..{UINT32_MAX:,} ms")
    solver.add_argument("--smt2-dir", dest="smt2_dir", type=Path, default=None, metavar="DIR",
                        help="write every query as SMT-LIB2 here")
    return solver


def usable_folder(path: Path, flag: str) -> None:
    """Raise UsageError unless path is a folder, or can be made one (its nearest existing
    ancestor is a writable folder). Nothing is created here: the first query written does."""
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: exists and is not a folder")
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create the folder there ({existing or path} is not a writable folder)")


def limits_from_args(ns: argparse.Namespace) -> Any:
    """Return the query limits the flags describe: each limit in 1..2^32 - 1 (Z3 reads them as
    unsigned 32-bit numbers, so a larger one would wrap); --second-opinion-rlimit only with the
    second solver, which must be installed. A value out of range is a UsageError naming its flag."""
    from .gateway import Limits
    from .second_opinion import require_solver

    rlimit = DEFAULT_RLIMIT if ns.rlimit is None else in_range(ns.rlimit, "--rlimit", 1, UINT32_MAX)
    if ns.timeout_ms is not None:
        in_range(ns.timeout_ms, "--timeout-ms", 1, UINT32_MAX)
    second, second_rlimit = getattr(ns, "second_opinion", None), getattr(ns, "second_rlimit", None)
    extra = {}
    if second_rlimit is not None:
        if not second:
            raise UsageError("--second-opinion-rlimit limits the second solver: add --second-opinion cvc5, "
                             "or drop it")
        extra["second_rlimit"] = in_range(second_rlimit, "--second-opinion-rlimit", 1, UINT32_MAX)
    if second:
        require_solver(second)
    if ns.smt2_dir is not None:
        usable_folder(ns.smt2_dir, "--smt2-dir")
    return Limits(rlimit=rlimit, timeout_ms=ns.timeout_ms, smt2_dir=ns.smt2_dir, second_opinion=second, **extra)


def _dispatch_report(target: Target) -> dict[str, Any]:
    """`estimate --target`'s report of which backends can run in the target (see `routes`)."""
    from .routes import dispatch_report

    return dispatch_report(target)


def jobs_from_args(ns: argparse.Namespace) -> int:
    """Return the processes `--jobs` gives (default: every core this process may use)."""
    from .parallel import default_jobs

    return default_jobs() if ns.jobs is None else in_range(ns.jobs, "--jobs", 1, MAX_JOBS)


def _tight_report(target: Target, progress: Progress) -> dict[str, Any]:
    """`estimate --policy tight`'s proven maxima (see `tight`)."""
    from .tight import tight_report

    return tight_report(target, progress)


def register(subparsers: Any) -> None:
    """Add `prove` and `counterexamples` to the CLI's subparsers, and hand `estimate --target` the
    solver's part when `estimate` is registered."""
    if "estimate" in subparsers.choices:
        subparsers.choices["estimate"].set_defaults(target_solver=TargetSolver(_dispatch_report, _tight_report))
    prove = subparsers.add_parser("prove", help="prove the workspace theorems for a target")
    solver = _add_solver_arguments(prove)
    add_pattern_argument(solver)
    solver.add_argument("--theorem", action="append", choices=[*THEOREM_NAMES, "all"], metavar="NAME|all",
                        help=f"run this theorem (repeatable): {', '.join(THEOREM_NAMES)}; 'all' adds the findings "
                             "nonmonotonic_dispatch and naive_cascade to the default safety theorems")
    solver.add_argument("--jobs", type=int, default=None, metavar="N",
                        help=f"decide the theorems (with --check-ledger / --write-ledger: the targets) on N processes "
                             f"at once, 1..{MAX_JOBS} (default: every core this process may use); each verdict is its "
                             "own, whatever runs beside it")
    solver.add_argument("--second-opinion", dest="second_opinion", choices=SOLVERS, default=None,
                        help="re-decide every query behind a PROVED or REFUTED verdict with this second solver "
                             "(needs pip install 'attnws[cvc5]'); a disagreement fails (exit 1) and keeps the query")
    solver.add_argument("--second-opinion-rlimit", dest="second_rlimit", type=int, default=None, metavar="N",
                        help=f"the second solver's resource limit per query (its own units; 1..{UINT32_MAX:,}, "
                             f"default {DEFAULT_SECOND_RLIMIT:,}; needs --second-opinion)")
    ledger = prove.add_argument_group(
        "ledger", "Every committed target with its own problem and configuration: no target, theorem, problem or "
                  "device flag applies.").add_mutually_exclusive_group()
    ledger.add_argument("--write-ledger", dest="write_ledger", action="store_true",
                        help="prove every committed target and rewrite the committed ledger (attnws/proofs/ledger.json; "
                             "a source checkout only)")
    ledger.add_argument("--check-ledger", dest="check_ledger", action="store_true",
                        help="prove every committed target and compare with the committed ledger")
    add_json_argument(prove)
    prove.set_defaults(handler=prove_command)
    found = subparsers.add_parser("counterexamples", help="find non-monotonic pairs and naive-cascade shapes")
    _add_solver_arguments(found)
    search = found.add_argument_group("search")
    search.add_argument("--kind", choices=["nonmonotonic", "naive-cascade", "runtime-failure", "all"], default="all",
                        help="which findings to search: pairs where a smaller shape needs more "
                             "workspace, shapes needing more than the cascade's choice at the maximum, shapes where "
                             "ORT picks a backend that then fails at run time")
    search.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="K", help="at most K findings per kind")
    search.add_argument("--max-search-seconds", dest="max_search_seconds", type=float, default=DEFAULT_SEARCH_SECONDS,
                        metavar="SECONDS",
                        help=f"wall-clock budget of each search (default {DEFAULT_SEARCH_SECONDS:g}; inf: none): a "
                             "search cut by it says so, with what it decided and what it left undecided, and is "
                             "never reported as none found")
    search.add_argument("--max-elements", dest="max_elements", type=int, default=None, metavar="N",
                        help="only shapes whose working set is at most N elements (B*N*S*(S+2H+Hv); "
                             "MultiHeadAttention B*N*(S*T+S*H+T*(H+Hv))): the smallest witnesses that the CUDA "
                             "simulator runs in seconds (try 100000)")
    add_json_argument(found)
    found.set_defaults(handler=counterexamples_command)


def prove_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Run the theorems on the target (or the ledger over every committed target)."""
    limits = limits_from_args(ns)
    if ledger_mode(ns):
        return _ledger_command(ns, limits, progress)
    target = target_from_args(ns)
    options = options_line(target.max_geometry())
    from .parallel import prove_all
    from .text import opinions_text, result_text
    from .theorems import combined_verdict, context
    from .tight import uncovered_shape

    names = list(THEOREM_NAMES) if ns.theorem and "all" in ns.theorem else ns.theorem
    results: list[Any] = []
    try:
        ctx = context(target, limits)
        for result in prove_all(target, limits, names, jobs_from_args(ns), ctx):
            progress(f"{target.name}: {result.theorem} {result.verdict.value}")
            results.append(result)
    except KeyboardInterrupt:
        done = len(results)
        text = "\n".join(result_text(r) for r in results)
        note = f"interrupted after {done} theorem(s): these results are partial, nothing is claimed of the rest"
        if options:
            text += f"\n         {options}"
        document = {"target": target.name, "verdict": None, "interrupted": True, "complete": False,
                    "results": [r.as_dict() for r in results]}
        return CommandResult(EXIT_INTERRUPTED, f"{text}\n{note}".lstrip("\n"), document)
    verdict = combined_verdict(results)
    text = "\n".join(result_text(r) for r in results)
    document = {"target": target.name, "verdict": verdict.value, "interrupted": False, "complete": True,
                "results": [r.as_dict() for r in results]}
    if target.patterns:
        status, witness = uncovered_shape(target, limits)
        document["uncovered"] = {"status": status, "witness": witness}
        text += "\n" + {"found": f"         outside every pattern: {shape_words(witness or {})}",
                         "none": "         every valid shape lies in some pattern (proven)",
                         "undecided": "         whether some shape lies outside every pattern: undecided"}[status]
    if options:
        text += f"\n         {options}"
    opinions = opinions_text(results)
    if opinions:
        text += f"\n{opinions}"
    text += f"\n{verdict.value}: {printable(target.name)}"
    return CommandResult(VERDICT_EXIT[verdict.value], text, document)


def ledger_mode(ns: argparse.Namespace) -> str | None:
    """Return the ledger flag given (--write-ledger or --check-ledger), else None. The ledger runs
    every committed target with its own problem and configuration and the default theorems: a
    target, theorem, problem or device flag beside it would be ignored, so it is a UsageError."""
    modes = given(ns, ("write_ledger", "check_ledger"))
    mode = modes[0] if modes else None
    ignored = given(ns, ("target", "theorem", *PROBLEM_FLAGS, *CONFIG_FLAGS)) if mode else []
    if ignored:
        raise UsageError(f"{mode} proves every committed target, each with its own problem and configuration and "
                         f"the default theorems; {' '.join(ignored)} cannot be combined with it")
    return mode


def check_search_flags(ns: argparse.Namespace) -> None:
    """Raise UsageError unless --limit and --max-elements are at least 1 and --max-search-seconds is
    a positive number of seconds (inf: no budget)."""
    in_range(ns.limit, "--limit", 1)
    if ns.max_elements is not None:
        in_range(ns.max_elements, "--max-elements", 1)
    if not ns.max_search_seconds > 0:
        raise UsageError(f"--max-search-seconds {ns.max_search_seconds}: must be a positive number of seconds "
                         "(inf: no limit)")


def _ledger_command(ns: argparse.Namespace, limits: Any, progress: Progress) -> CommandResult:
    from .ledger import (
        LEDGER_PATH, committed_targets, compute_ledger, in_source_checkout, ledger_differences, read_ledger, write_ledger,
    )

    if ns.write_ledger and not in_source_checkout():
        raise UsageError(f"--write-ledger rewrites the committed ledger of a source checkout; this attnws is "
                         f"installed ({LEDGER_PATH} is package data): run it from a checkout "
                         f"(pip install -e .) instead")
    fresh = compute_ledger(committed_targets(), limits, progress, jobs_from_args(ns))
    if ns.write_ledger:
        write_ledger(fresh)
        return CommandResult(EXIT_OK, f"wrote {LEDGER_PATH} ({len(fresh['targets'])} targets)", fresh)
    differences = ledger_differences(read_ledger(), fresh)
    text = "\n".join(differences) or f"the ledger matches ({len(fresh['targets'])} targets)"
    return CommandResult(EXIT_REJECTED if differences else EXIT_OK, text, {"differences": differences})


def counterexamples_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Find non-monotonic pairs and naive-cascade shapes; JSON is a shapes document that
    `attnws validate --shapes` reads, with each search's status. Exit 0 when something was
    found or every search was decided, 3 when a search was undecided and nothing was found."""
    check_search_flags(ns)
    limits = limits_from_args(ns)
    target: Target = target_from_args(ns)
    from .counterexamples import (
        UNDECIDED, naive_cascade_shapes, nonmonotonic_pairs, runtime_failure_shapes, shapes_document, working_set_text,
    )
    from .encode import encode
    from .session import Session

    name = f"{target.name}/counterexamples"
    pairs, naive_bytes, naive, failures, statuses, records = [], None, [], [], [], []
    # One encoding of the target for naive-cascade and runtime-failure, built before any search's
    # clock starts, so that neither search's budget depends on which ran first.
    shared = encode(target) if ns.kind in ("naive-cascade", "runtime-failure", "all") else None

    def session(words: str) -> Session:
        label = f"searching {words} in {printable(target.name)}"
        progress(label)
        return Session(name, limits, seconds=ns.max_search_seconds, progress=progress, label=label)

    def record(status: Any, searched: Session) -> None:
        statuses.append(status)
        records.append({**status.as_dict(), "cut": status.cut, "minimal": status.minimal, "queries": searched.queries,
                        "seconds": round(searched.seconds, 3), "max_search_seconds": searched.budget})

    if ns.kind in ("nonmonotonic", "all"):
        searched = session("non-monotonic pairs")
        pairs, status = nonmonotonic_pairs(target, searched, ns.limit, ns.max_elements)
        record(status, searched)
    if ns.kind in ("naive-cascade", "all"):
        searched = session("naive-cascade shapes")
        naive_bytes, naive, status = naive_cascade_shapes(target, searched, ns.limit, ns.max_elements, shared)
        record(status, searched)
    if ns.kind in ("runtime-failure", "all"):
        searched = session("shapes where ORT fails at run time")
        failures, status = runtime_failure_shapes(target, searched, ns.limit, ns.max_elements, shared)
        record(status, searched)
    document = {**shapes_document(target, pairs, (naive_bytes, naive), failures),
                "searches": records, "max_elements": ns.max_elements}
    bound = f" with {working_set_text(target.op)} <= {ns.max_elements:,}" if ns.max_elements else ""
    options = options_line(target.max_geometry())
    lines = [f"counterexamples in {printable(target.name)}{bound}", *([f"  {options}"] if options else [])]
    found = {"nonmonotonic": pairs, "naive-cascade": naive, "runtime-failure": failures}
    nouns = {"nonmonotonic": "non-monotonic pairs", "naive-cascade": "naive-cascade shapes",
             "runtime-failure": "shapes where ORT fails at run time"}
    for status in statuses:
        count = len(found[status.kind])
        words = status.describe() + (" within the element bound" if ns.max_elements and not count else "")
        lines.append(f"{nouns[status.kind]}: {count} {words}" if count else f"{nouns[status.kind]}: {words}")
        lines += _finding_lines(status.kind, pairs, naive, naive_bytes, failures)
    undecided = any(status.state == UNDECIDED for status in statuses)
    exit_code = EXIT_UNKNOWN if undecided and not (pairs or naive or failures) else EXIT_OK
    return CommandResult(exit_code, "\n".join(lines), document)


def _finding_lines(kind: str, pairs: list[Any], naive: list[Any], naive_bytes: int | None,
                   failures: list[Any]) -> list[str]:
    """Return one indented line per finding of the kind, in words (one the wall clock kept from
    being minimized says so)."""
    from .counterexamples import NOT_MINIMAL

    def mark(finding: Any) -> str:
        return "" if finding.minimal else f" [{NOT_MINIMAL}]"

    if kind == "nonmonotonic":
        return [f"  {'; '.join(pair.gates) or '+'.join(pair.differ)}: {shape_words(pair.smaller.dims)} needs "
                f"{format_bytes(pair.smaller.runtime_bytes)} ({', '.join(pair.smaller.backends)}), more than "
                f"{shape_words(pair.larger.dims)} needs: {format_bytes(pair.larger.runtime_bytes)} "
                f"({', '.join(pair.larger.backends)}) "
                f"{bytes_more(pair.smaller.runtime_bytes, pair.larger.runtime_bytes)}{mark(pair)}" for pair in pairs]
    if kind == "naive-cascade":
        if naive_bytes is None:
            return ["  the route the cascade picks at the maximum geometry fails there: nothing to exceed"]
        return [f"  {shape_words(found.dims)} needs {format_bytes(found.runtime_bytes)} ({', '.join(found.backends)}), "
                f"more than the {format_bytes(naive_bytes)} the cascade's choice needs at the maximum geometry "
                f"{bytes_more(found.runtime_bytes, naive_bytes)}{mark(found)}" for found in naive]
    return [f"  {shape_words(found.dims)}: {found.failure}{mark(found)}" for found in failures]
