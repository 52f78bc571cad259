"""GroupQueryAttention's commands: the shared commands with `--op gqa`, or with `--target` naming a
GroupQueryAttention target (`route` sends them here; the family is not yet in the shared registry,
so its flags and engine are its own: this module, `gqa_proofs` and `attnws.spec.gqa`).

- `attnws estimate --op gqa`: ORT 1.31.1's own AOT estimate for the node (its reachable routes,
  each sized as ORT sizes it, and why each other route is not reachable), or why ORT declares none.
- `attnws dispatch --op gqa` (and `recipe --op gqa`): for one shape, the route ORT picks, why
  each earlier one was passed over, and its workspace region by region.
- `attnws prove --op gqa`: over every valid shape of the box, ORT's estimate is a safe bound (or
  the shape that breaks it), the proven maximum and its shape, the same per pattern, and the ratio.
- `attnws counterexamples --op gqa --kind nonmonotonic`: key lengths T where T + 1 needs less
  workspace, on the route ORT picks and on Flash's own route.
- `attnws targets --op gqa`: the committed GroupQueryAttention targets.

A box is a target file (`attnws/proofs/gqa-targets/`) or flags. Bytes throughout.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from attnws.spec.command_line import (
    EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, PROOFS_DIR, CommandResult, Progress, add_json_argument, in_range, integer,
)
from attnws.spec.documents import read_user_json
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.gqa.arguments import (
    BOX_FLAGS, GQA_TARGETS_DIR, OP, add_box_arguments, box_from_args, load_gqa_target, without_op,
)
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.estimate import ort_bounds, aggregate_for_bounds
from attnws.spec.gqa.reachability import unreachable_routes
from attnws.spec.gqa.node import GqaBox, box_text, shape_record
from attnws.spec.gqa.recipe import complete
from attnws.spec.ort_version import ORT_VERSION
from attnws.spec.printable import printable
from attnws.spec.problem import Backend
from attnws.spec.units import format_bytes

from .counterexamples import DEFAULT_LIMIT, UNDECIDED
from .gateway import DEFAULT_RLIMIT, Limits, Verdict
from .gqa_proofs import kernel_contract, key_length_drops, maximum, safe_bound
from .ledger import in_source_checkout
from .second_opinion import DISAGREEMENT, SOLVERS, require_solver, second_opinion
from .session import Session
from .splits import KeyLengthCase, nonmonotonic_pairs

SPLIT_RLIMIT = 200_000_000  # the split heuristic's queries: 128 unrolled divisions per key length


# The shared commands that take `--op gqa`, and the command of this module each one runs.
ROUTED = {"estimate": "estimate", "dispatch": "dispatch", "recipe": "dispatch", "prove": "prove",
          "counterexamples": "counterexamples", "targets": "targets"}
GROUP = "gqa"  # the subcommand group `route` sends command lines to (not listed in `attnws --help`)


def route(args: list[str]) -> tuple[list[str], str] | None:
    """Return a GroupQueryAttention command line as this module's group parses it, with the name
    its messages go under ("estimate --op gqa"), or None when the line is another operator's.

    A line is GroupQueryAttention's when it gives `--op gqa`, or `--target` with a committed
    GroupQueryAttention target's name or a target file of one (an object with "kv_heads"). A
    command without GroupQueryAttention support is refused by name (UsageError)."""
    if not args or args[0].startswith("-") or args[0] == GROUP:
        return None
    rest, op_given = without_op(args[1:])
    if not (op_given or _names_gqa_target(rest)):
        return None
    if args[0] not in ROUTED:
        raise UsageError(f"--op {OP}: {args[0]} does not take GroupQueryAttention yet; the commands that do: "
                         + ", ".join(ROUTED) + ", validate")
    return [GROUP, ROUTED[args[0]], *rest], f"{args[0]} --op {OP}"


def _names_gqa_target(args: list[str]) -> bool:
    """Return whether `--target` names a committed GroupQueryAttention target or a file of one."""
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--target"]
    names += [a.split("=", 1)[1] for a in args if a.startswith("--target=")]
    for name in names:
        if "/" not in name and (GQA_TARGETS_DIR / f"{name.removesuffix('.json')}.json").exists():
            return True
        if name == "-":
            continue
        try:
            document = read_user_json(name, "--target")
        except (WorkspaceError, OSError):
            continue  # the shared loader says why
        if isinstance(document, dict) and "kv_heads" in document:
            return True
    return False


def register(subparsers: Any) -> None:
    """Add the group `route` sends GroupQueryAttention's command lines to."""
    gqa = subparsers.add_parser(GROUP, description=__doc__.split("\n\n")[0])
    gqa.set_defaults(handler=_needs_command)
    commands = gqa.add_subparsers(dest="gqa_command", metavar="COMMAND", parser_class=type(gqa))
    for name, handler, text in (("estimate", estimate_command, "ORT 1.31.1's own AOT estimate for the node"),
                                ("dispatch", dispatch_command, "the route ORT picks for one shape, and its workspace"),
                                ("prove", prove_command, "ORT's estimate safe? the proven maximum, per pattern"),
                                ("counterexamples", counterexamples_command,
                                 "key lengths where one more key needs less workspace"),
                                ("targets", targets_command, "list the committed GroupQueryAttention targets")):
        parser = commands.add_parser(name, help=text, description=text, prog=f"attnws {name} --op {OP}")
        if name != "targets":
            add_box_arguments(parser, exact=name == "dispatch")
        if name == "prove":
            ledger = parser.add_argument_group("ledger").add_mutually_exclusive_group()
            ledger.add_argument("--write-ledger", dest="write_ledger", action="store_true",
                                help="prove every committed GroupQueryAttention target and rewrite "
                                     "attnws/proofs/gqa-ledger.json (a source checkout only)")
            ledger.add_argument("--check-ledger", dest="check_ledger", action="store_true",
                                help="prove every committed GroupQueryAttention target and compare with the ledger")
            parser.add_argument("--second-opinion", dest="second_opinion", choices=SOLVERS, default=None,
                                help="re-decide every decided query with this second solver (needs "
                                     "pip install 'attnws[cvc5]'); a disagreement fails (exit 1)")
        if name in ("prove", "counterexamples"):
            solver = parser.add_argument_group("solver")
            solver.add_argument("--rlimit", type=integer, default=None, metavar="N",
                                help=f"Z3 resource limit per query (default {DEFAULT_RLIMIT:,}; the key-length "
                                     f"searches {SPLIT_RLIMIT:,})")
        if name == "counterexamples":
            parser.add_argument("--kind", choices=["nonmonotonic"], default="nonmonotonic",
                                help="what to search: key lengths T whose workspace exceeds that of T + 1")
            parser.add_argument("--limit", type=integer, default=DEFAULT_LIMIT, metavar="K",
                                help="at most K findings per search")
        add_json_argument(parser)
        parser.set_defaults(handler=handler)
def _needs_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    raise UsageError("GroupQueryAttention's commands are written `attnws COMMAND --op gqa`: "
                     + ", ".join(dict.fromkeys(ROUTED)))


# -- commands ------------------------------------------------------------------------------------
def estimate_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """ORT 1.31.1's own estimate for the box's node at its maxima."""
    box = box_from_args(ns)
    doc: dict[str, Any] = {"op": "gqa", "target": box.name}
    try:
        bounds = ort_bounds(box.at_maxima(), box.config, box.max_total_sequence_length)
        result = aggregate_for_bounds(bounds)
    except WorkspaceError as error:
        doc.update(status="unavailable", reason=str(error))
        return CommandResult(EXIT_REJECTED, f"{box_text(box)}\nORT's estimate: unavailable: {error}", doc)
    routes = {str(getattr(r, "value", r)): b for r, b in result.sized.items()}
    unreachable = unreachable_routes(box.at_maxima(), box.config)
    doc.update(status="ok", total_workspace_bytes=result.total_workspace_bytes, routes=routes,
               unreachable=[{"route": name, "reason": reason} for name, reason in unreachable],
               persistent_prepack_bytes=result.persistent_prepack_bytes,
               initialization_scratch_bytes=result.initialization_scratch_bytes,
               level2=[{"size_bytes": result.total_workspace_bytes, "slot_id": 0, "alignment_bytes": 256}]
               if result.total_workspace_bytes else [])
    lines = [box_text(box), f"ORT's estimate: {format_bytes(result.total_workspace_bytes)} (Level 2: one slot-0 "
                             "root, 256-byte aligned), the largest of its routes:"]
    lines += [f"  {name}: {format_bytes(b)}" for name, b in routes.items()]
    if result.persistent_prepack_bytes:
        lines.append(f"  head-sink prepack: {result.persistent_prepack_bytes:,} B persistent, "
                     f"{result.initialization_scratch_bytes:,} B at initialization (outside the workspace)")
    lines += [f"not reachable: {name} ({reason})" for name, reason in unreachable]
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def dispatch_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """The route ORT picks for one shape and its complete workspace."""
    box = box_from_args(ns, exact=True)
    p = box.problem(CONCRETE, box.batch.hi, box.seq.hi, box.total_seq.hi)
    chosen = select(p, box.config)
    shape = f"B {box.batch.hi}, S {box.seq.hi}, T {box.total_seq.hi}"
    doc: dict[str, Any] = {"op": "gqa", "shape": {"batch": box.batch.hi, "seq": box.seq.hi,
                                                  "total_seq": box.total_seq.hi},
                           "skipped": [reason for _, reason in chosen.skipped]}
    lines = [box_text(box), f"{shape}:"] + [f"  skipped {reason}" for _, reason in chosen.skipped]
    if chosen.route is None:
        doc.update(backend=None, failure=chosen.failure)
        return CommandResult(EXIT_REJECTED, "\n".join(lines + [f"  ORT fails at run time: {chosen.failure}"]), doc)
    route = chosen.route
    label = route.backend.value + (" (fast decode)" if route.fast_decode else "")
    if route.backend is Backend.CUDNN:
        doc.update(backend="cudnn", workspace_bytes=None)
        lines.append("  cudnn: its workspace is cuDNN's frontend's own (no recipe states it)")
        return CommandResult(EXIT_OK, "\n".join(lines), doc)
    run = complete(p.workspace_problem(CONCRETE), route)
    regions = [(f"preparation {v.name}", v.offset, v.nbytes) for v in run.preparation.regions if v.nbytes] + \
        [(f"{route.backend.value} {v.name}", run.backend_offset_bytes + v.offset, v.nbytes)
         for v in run.backend.regions if v.nbytes]
    doc.update(backend=route.backend.value, fast_decode=route.fast_decode, splits=run.backend.splits,
               workspace_bytes=run.total_workspace_bytes,
               regions=[{"name": n, "offset_bytes": o, "bytes": b} for n, o, b in regions])
    lines.append(f"  {label}: {format_bytes(run.total_workspace_bytes)}"
                 + (f", {run.backend.splits} splits" if route.backend is Backend.FLASH else ""))
    lines += [f"    {name}: {nbytes:,} B at {offset:,}" for name, offset, nbytes in regions]
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def _limits(ns: argparse.Namespace, default: int = DEFAULT_RLIMIT) -> Limits:
    second = getattr(ns, "second_opinion", None)
    if second:
        require_solver(second)
    return Limits(rlimit=default if ns.rlimit is None else in_range(ns.rlimit, "--rlimit", 1, 2**32 - 1),
                  second_opinion=second)


def prove_box(box: GqaBox, limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """The box's results as a document (no timings: the ledger keeps it): the safe bound, the
    kernel contract, the maxima, and the verdict they combine to."""
    sessions: list[Session] = []
    progress(f"{box.name}: ORT's estimate as a bound")
    bound = safe_bound(box, limits, sessions)
    ort = bound.ort_bytes
    doc: dict[str, Any] = {"op": "gqa", "target": box.name, "ort_estimate_bytes": ort,
                           "safe_bound": {"verdict": bound.verdict.value, "counterexample": bound.counterexample,
                                          "reason": bound.reason, "vacuous_because": bound.vacuous_because},
                           "maxima": []}
    expected_vacuous = bound.verdict is Verdict.VACUOUS and box.expect_unavailable_estimate
    verdicts = [Verdict.PROVED if expected_vacuous else bound.verdict]
    progress(f"{box.name}: the kernels' buffers inside the recipe")
    kc = kernel_contract(box, limits, sessions)
    verdicts.append(kc.verdict)
    doc["kernel_contract"] = {"verdict": kc.verdict.value, "counterexample": kc.counterexample, "reason": kc.reason}
    for name, pattern in (("every shape", None), *box.patterns):
        progress(f"{box.name}: the largest workspace of {name}")
        found = maximum(box, limits, pattern, sessions)
        expected = found.vacuous and box.expect_unavailable_estimate and found.cudnn_shape is not None
        verdicts.append(Verdict.PROVED if expected or found.bytes is not None else
                        Verdict.VACUOUS if found.vacuous else Verdict.UNKNOWN)
        doc["maxima"].append({"pattern": name, "bytes": found.bytes, "witness": found.witness,
                              "backend": found.backend, "reason": found.reason, "vacuous": found.vacuous,
                              "expected": expected, "cudnn_shape": found.cudnn_shape,
                              "ratio": round(ort / found.bytes, 2) if ort and found.bytes else None})
    if limits.second_opinion:
        progress(f"{box.name}: {limits.second_opinion}'s opinion of every decided query")
        opinion = second_opinion([a for s in sessions for a in s.answers], limits, limits.second_opinion)
        doc["second_opinion"] = opinion.as_dict(timing=False)
        if opinion.verdict == DISAGREEMENT:
            verdicts.append(Verdict.REFUTED)
    doc["verdict"] = Verdict.worst(verdicts).value
    return doc


def prove_text(box: GqaBox, doc: dict[str, Any]) -> list[str]:
    """The results of `prove_box` in words, one line each."""
    bound, ort = doc["safe_bound"], doc["ort_estimate_bytes"]
    lines = [box_text(box)]
    if bound["verdict"] == "VACUOUS":
        expected = " (the target expects it)" if box.expect_unavailable_estimate else ""
        lines.append(f"safe_bound VACUOUS{expected}: {bound['vacuous_because']}")
    elif bound["verdict"] == "PROVED":
        lines.append(f"safe_bound PROVED: no valid shape needs more than ORT's {format_bytes(ort)}")
    elif bound["verdict"] == "REFUTED":
        c = bound["counterexample"]
        lines.append(f"safe_bound REFUTED: B {c['batch']}, S {c['seq']}, T {c['total_seq']} needs "
                     f"{format_bytes(c['bytes'])} on {c['backend']}, more than ORT's {format_bytes(ort)}")
    else:
        lines.append(f"safe_bound UNKNOWN: {bound['reason']}")
    kc = doc["kernel_contract"]
    if kc["verdict"] == "PROVED":
        lines.append("kernel_contract PROVED: at every valid shape the kernels' buffers (attnws.spec.gqa.footprint, "
                     "stated from ORT's kernels) stay inside the regions the recipe gives them")
    elif kc["verdict"] == "REFUTED":
        c = kc["counterexample"]
        lines.append(f"kernel_contract REFUTED at B {c['batch']}, S {c['seq']}, T {c['total_seq']}: "
                     + "; ".join(c["violations"]) + " (read from ORT's kernel sources, not run on a GPU)")
    else:
        lines.append(f"kernel_contract UNKNOWN: {kc['reason']}")
    for m in doc["maxima"]:
        name = m["pattern"]
        if m["vacuous"]:
            lines.append(f"maximum of {name}: VACUOUS{' (the target expects it)' if m['expected'] else ''}: "
                         f"{m['reason']}")
            continue
        if m["bytes"] is None:
            lines.append(f"maximum of {name}: UNKNOWN ({m['reason']})")
            continue
        w = m["witness"]
        ratio = f"; ORT's estimate is {ort / m['bytes']:,.1f}x it" if ort else ""
        lines.append(f"maximum of {name}: {format_bytes(m['bytes'])} (proven) at B {w['batch']}, S {w['seq']}, "
                     f"T {w['total_seq']} on {m['backend']}{ratio}")
        if m["cudnn_shape"] is not None:
            c = m["cudnn_shape"]
            lines.append(f"  (shapes that take cuDNN, such as B {c['batch']}, S {c['seq']}, T {c['total_seq']}, are "
                         "left out: cuDNN's frontend sizes its own workspace)")
    if "second_opinion" in doc:
        o = doc["second_opinion"]
        lines.append(f"second opinion ({o['solver']}): {o['verdict']}, {o['confirmed']} of {o['queries']} queries "
                     "confirmed" + (f"; {o['disagreements'][0]}" if o["disagreements"] else ""))
    return lines + [f"{doc['verdict']}: {printable(box.name)}"]


VERDICT_EXIT = {"PROVED": EXIT_OK, "REFUTED": EXIT_REJECTED, "VACUOUS": EXIT_REJECTED, "UNKNOWN": EXIT_UNKNOWN}


def prove_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Safe bound, kernel contract, proven maximum and per-pattern maxima over the box; or the
    GroupQueryAttention ledger over every committed target."""
    limits = _limits(ns, SPLIT_RLIMIT)
    if ns.write_ledger or ns.check_ledger:
        return _ledger_command(ns, limits, progress)
    box = box_from_args(ns)
    doc = prove_box(box, limits, progress)
    return CommandResult(VERDICT_EXIT[doc["verdict"]], "\n".join(prove_text(box, doc)), doc)


GQA_LEDGER = PROOFS_DIR / "gqa-ledger.json"


def ledger_facts(entry: dict[str, Any]) -> dict[str, Any]:
    """What the ledger check compares of a target's results: the estimate, the verdicts and the
    proven bytes (a witness is one of possibly many shapes attaining a maximum: kept, not compared)."""
    return {"ort_estimate_bytes": entry.get("ort_estimate_bytes"), "verdict": entry.get("verdict"),
            "safe_bound": (entry.get("safe_bound") or {}).get("verdict"),
            "kernel_contract": (entry.get("kernel_contract") or {}).get("verdict"),
            "maxima": [(m["pattern"], m["bytes"], m["vacuous"], m["expected"]) for m in entry.get("maxima", [])]}


def ledger_differences(stored: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """One line per target and fact where the two ledgers differ."""
    out = []
    for name in sorted(set(stored["targets"]) | set(fresh["targets"])):
        old, new = (ledger_facts(ledger["targets"].get(name, {})) for ledger in (stored, fresh))
        out += [f"{name}: {key} was {old[key]}, is {new[key]}" for key in old if old[key] != new[key]]
    return out


def committed_boxes() -> list[GqaBox]:
    """Every committed GroupQueryAttention target, by name."""
    return [load_gqa_target(str(p)) for p in sorted(GQA_TARGETS_DIR.glob("*.json"))]


def compute_gqa_ledger(limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """Every committed target's results (`prove_box`), with the modelled ORT version."""
    return {"version": 1, "ort_version": ORT_VERSION, "rlimit": limits.rlimit,
            "targets": {box.name: prove_box(box, limits, progress) for box in committed_boxes()}}


def _ledger_command(ns: argparse.Namespace, limits: Limits, progress: Progress) -> CommandResult:
    flags = [f"--{n.replace('_', '-')}" for n in ("target", *BOX_FLAGS) if getattr(ns, n) is not None]
    if flags:
        raise UsageError(f"the ledger proves every committed target as committed; {' '.join(flags)} cannot be added")
    if ns.write_ledger and not in_source_checkout():
        raise UsageError(f"--write-ledger rewrites {GQA_LEDGER} of a source checkout; this attnws is installed")
    fresh = compute_gqa_ledger(limits, progress)
    if ns.write_ledger:
        GQA_LEDGER.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")
        return CommandResult(EXIT_OK, f"wrote {GQA_LEDGER} ({len(fresh['targets'])} targets)", fresh)
    stored = json.loads(GQA_LEDGER.read_text())
    differences = ledger_differences(stored, fresh)
    text = "\n".join(differences) or f"the GroupQueryAttention ledger matches ({len(fresh['targets'])} targets)"
    return CommandResult(EXIT_REJECTED if differences else EXIT_OK, text, {"differences": differences})


def counterexamples_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Key lengths whose workspace exceeds the next one's: on the route ORT picks, and on Flash's."""
    box = box_from_args(ns)
    in_range(ns.limit, "--limit", 1)
    limits = _limits(ns, SPLIT_RLIMIT)
    lines, doc = [box_text(box)], {"op": "gqa", "target": box.name, "searches": []}
    progress(f"{box.name}: key-length drops on the route ORT picks")
    drops, status = key_length_drops(box, limits, ns.limit)
    lines.append(f"on the route ORT picks: {len(drops)} {status.describe()}" if drops
                 else f"on the route ORT picks: {status.describe()}")
    lines += [f"  B {d['batch']}, S {d['seq']}: T {d['total_seq']:,} needs {format_bytes(d['bytes'])} "
              f"({d['backend']}), T {d['total_seq'] + 1:,} needs {format_bytes(d['next_bytes'])} "
              f"({d['next_backend']})" for d in drops]
    doc["searches"].append({"route": "picked", **status.as_dict(), "drops": drops})
    statuses = [status]
    flash_case = KeyLengthCase(box.problem(CONCRETE, box.batch.hi, box.seq.hi, box.total_seq.hi).workspace_problem(
        CONCRETE), box.config.device.sm_count, box.total_seq.lo, box.total_seq.hi, box.config.device.sm,
        box.local_window_size)
    progress(f"{box.name}: key-length drops on Flash's route at B {box.batch.hi}, S {box.seq.hi}")
    flash_drops, flash_status = nonmonotonic_pairs(flash_case, limits, ns.limit)
    where = f"on Flash's route (B {box.batch.hi}, S {box.seq.hi}, not fast decode)"
    lines.append(f"{where}: {len(flash_drops)} {flash_status.describe()}" if flash_drops
                 else f"{where}: {flash_status.describe()}")
    lines += [f"  T {d.total:,} needs {format_bytes(d.bytes_before)} ({d.splits_before} splits), T {d.total + 1:,} "
              f"needs {format_bytes(d.bytes_after)} ({d.splits_after} splits)" for d in flash_drops]
    doc["searches"].append({"route": "flash", **flash_status.as_dict(), "drops": [d.as_dict() for d in flash_drops]})
    statuses.append(flash_status)
    doc["shapes"] = _drop_records(box, [(d["batch"], d["seq"], d["total_seq"]) for d in drops], None) + \
        _drop_records(box, [(box.batch.hi, box.seq.hi, d.total) for d in flash_drops], FLASH_ONLY)
    undecided = any(s.state == UNDECIDED for s in statuses) and not (drops or flash_drops)
    return CommandResult(EXIT_UNKNOWN if undecided else EXIT_OK, "\n".join(lines), doc)


# The environment that makes ORT's dispatch take Flash's own route (no XQA, no fast decode), where
# the Flash search's drops are.
FLASH_ONLY = {"ORT_ENABLE_XQA": "0", "ORT_DISABLE_FLASH_DECODE": "1"}


def _drop_records(box: GqaBox, pairs: list[tuple[int, int, int]], env: dict[str, str] | None) -> list[dict[str, Any]]:
    """Shape records (`attnws validate --shapes`) for each drop: T (role larger, more workspace)
    and T + 1 (role smaller), under the box's environment with `env` added."""
    route = "flash" if env else "picked"
    return [shape_record(box, b, s, t + step, env, pair=f"{route} {i}", role=role)
            for i, (b, s, t) in enumerate(pairs, 1) for step, role in ((0, "larger"), (1, "smaller"))]


def targets_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """List the committed GroupQueryAttention targets."""
    boxes = [load_gqa_target(str(p)) for p in sorted(GQA_TARGETS_DIR.glob("*.json"))]
    lines = [f"{len(boxes)} committed GroupQueryAttention targets (attnws estimate|dispatch|prove|counterexamples "
             f"--target NAME), in "
             f"{GQA_TARGETS_DIR}"] + [f"  {b.name:<34} {printable(b.description)}" for b in boxes]
    return CommandResult(EXIT_OK, "\n".join(lines), {"targets": [{"name": b.name, "description": b.description}
                                                                 for b in boxes]})


__all__ = ["register", "route", "prove_box", "prove_text"]
