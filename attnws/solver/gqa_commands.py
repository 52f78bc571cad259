"""GroupQueryAttention's own commands: the shared `estimate`, `prove` and `counterexamples` hand a
GroupQueryAttention target (`--op gqa` and its flags, or `--target` naming one) here
(`register_family_command`), because its engines are its own: ORT 1.31.1's own estimator, and
proofs over the target's box (`gqa_proofs`) held against it. `dispatch`, `recipe` and `targets`
are the shared ones.

- `attnws estimate --op gqa`: ORT 1.31.1's own AOT estimate for the node (its reachable routes,
  each sized as ORT sizes it, and why each other route is not reachable), or why ORT declares none.
- `attnws prove --op gqa`: over every valid shape of the box, ORT's estimate is a safe bound (or
  the shape that breaks it), the proven maximum and its shape, the same per pattern, and the ratio;
  `--write-ledger` / `--check-ledger` with `--op gqa`: the GroupQueryAttention ledger.
- `attnws counterexamples --op gqa --kind nonmonotonic`: key lengths T where T + 1 needs less
  workspace, on the route ORT picks and on Flash's own route.

Bytes throughout.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from attnws.spec.command_line import (
    EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, PROBLEM_FLAGS, PROOFS_DIR, CommandResult, Progress, flags_target_name, given,
    in_range, register_family_command, target_from_args,
)
from attnws.spec.commands import dims_text
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.gqa.estimate import aggregate_for_bounds, node_at_maxima, ort_bounds
from attnws.spec.gqa.inputs import target_geometry
from attnws.spec.gqa.reachability import unreachable_routes
from attnws.spec.options import RuntimeConfig
from attnws.spec.ort_version import ORT_VERSION
from attnws.spec.printable import printable
from attnws.spec.problem import Op
from attnws.spec.shapes_file import shape_record
from attnws.spec.target import Target
from attnws.spec.units import format_bytes

from .counterexamples import UNDECIDED
from .gateway import DEFAULT_RLIMIT, Limits, Verdict
from .gqa_proofs import kernel_contract, key_length_drops, maximum, problem_at, safe_bound
from .ledger import committed_targets, in_source_checkout
from .second_opinion import DISAGREEMENT, require_solver, second_opinion
from .session import Session
from .splits import KeyLengthCase, nonmonotonic_pairs

SPLIT_RLIMIT = 200_000_000  # the split heuristic's queries: 128 unrolled divisions per key length
FAMILY = "gqa"


def register_family_commands() -> None:
    """Hand the shared estimate, prove and counterexamples GroupQueryAttention's targets."""
    register_family_command(FAMILY, "estimate", estimate_command)
    register_family_command(FAMILY, "prove", prove_command)
    register_family_command(FAMILY, "counterexamples", counterexamples_command)


def target_text(t: Target) -> str:
    """The target's box in words, after its name when it has one of its own (not its flags')."""
    name = "" if t.name == flags_target_name(t) else f"{printable(t.name)}: "
    return name + dims_text(t)


def _reject_flags(ns: argparse.Namespace, command: str, names: tuple[str, ...]) -> None:
    """Refuse shared flags the GroupQueryAttention command does not read, by name."""
    unread = given(ns, names)
    if unread:
        raise UsageError(f"{command} --op gqa: {' '.join(unread)} does not apply to GroupQueryAttention")


# -- commands ------------------------------------------------------------------------------------
def estimate_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """ORT 1.31.1's own estimate for the target's node at its maxima."""
    _reject_flags(ns, "estimate", ("exact", "input_shapes", "pattern"))
    if ns.policy != "ort":
        raise UsageError(f"estimate --op gqa --policy {ns.policy}: GroupQueryAttention's proven maxima, per pattern, "
                         "are `attnws prove --op gqa`'s")
    target = target_from_args(ns)
    doc: dict[str, Any] = {"op": "gqa", "target": target.name}
    node = node_at_maxima(target.max_geometry())
    try:
        bounds = ort_bounds(node, target.config, target.max_total_seq or 0)
        result = aggregate_for_bounds(bounds)
    except WorkspaceError as error:
        doc.update(status="unavailable", reason=str(error))
        return CommandResult(EXIT_REJECTED, f"{target_text(target)}\nORT's estimate: unavailable: {error}", doc)
    routes = {str(getattr(r, "value", r)): b for r, b in result.sized.items()}
    unreachable = unreachable_routes(node, target.config)
    doc.update(status="ok", total_workspace_bytes=result.total_workspace_bytes, routes=routes,
               unreachable=[{"route": name, "reason": reason} for name, reason in unreachable],
               persistent_prepack_bytes=result.persistent_prepack_bytes,
               initialization_scratch_bytes=result.initialization_scratch_bytes,
               level2=[{"size_bytes": result.total_workspace_bytes, "slot_id": 0, "alignment_bytes": 256}]
               if result.total_workspace_bytes else [])
    lines = [target_text(target), f"ORT's estimate: {format_bytes(result.total_workspace_bytes)} (Level 2: one "
                                  "slot-0 root, 256-byte aligned), the largest of its routes:"]
    lines += [f"  {name}: {format_bytes(b)}" for name, b in routes.items()]
    if result.persistent_prepack_bytes:
        lines.append(f"  head-sink prepack: {result.persistent_prepack_bytes:,} B persistent, "
                     f"{result.initialization_scratch_bytes:,} B at initialization (outside the workspace)")
    lines += [f"not reachable: {name} ({reason})" for name, reason in unreachable]
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def _limits(ns: argparse.Namespace, default: int = DEFAULT_RLIMIT) -> Limits:
    second = getattr(ns, "second_opinion", None)
    if second:
        require_solver(second)
    return Limits(rlimit=default if ns.rlimit is None else in_range(ns.rlimit, "--rlimit", 1, 2**32 - 1),
                  second_opinion=second)


def prove_box(target: Target, limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """The target's results as a document (no timings: the ledger keeps it): the safe bound, the
    kernel contract, the maxima, and the verdict they combine to."""
    sessions: list[Session] = []
    progress(f"{target.name}: ORT's estimate as a bound")
    bound = safe_bound(target, limits, sessions)
    ort = bound.ort_bytes
    doc: dict[str, Any] = {"op": "gqa", "target": target.name, "ort_estimate_bytes": ort,
                           "safe_bound": {"verdict": bound.verdict.value, "counterexample": bound.counterexample,
                                          "reason": bound.reason, "vacuous_because": bound.vacuous_because},
                           "maxima": []}
    expected_vacuous = bound.verdict is Verdict.VACUOUS and target.expect_unavailable_estimate
    verdicts = [Verdict.PROVED if expected_vacuous else bound.verdict]
    progress(f"{target.name}: the kernels' buffers inside the recipe")
    kc = kernel_contract(target, limits, sessions)
    verdicts.append(kc.verdict)
    doc["kernel_contract"] = {"verdict": kc.verdict.value, "counterexample": kc.counterexample, "reason": kc.reason}
    for name, pattern in (("every shape", None), *((q.name, dict(q.dims)) for q in target.patterns)):
        progress(f"{target.name}: the largest workspace of {name}")
        found = maximum(target, limits, pattern, sessions)
        expected = found.vacuous and target.expect_unavailable_estimate and found.cudnn_shape is not None
        verdicts.append(Verdict.PROVED if expected or found.bytes is not None else
                        Verdict.VACUOUS if found.vacuous else Verdict.UNKNOWN)
        doc["maxima"].append({"pattern": name, "bytes": found.bytes, "witness": found.witness,
                              "backend": found.backend, "reason": found.reason, "vacuous": found.vacuous,
                              "expected": expected, "cudnn_shape": found.cudnn_shape,
                              "ratio": round(ort / found.bytes, 2) if ort and found.bytes else None})
    if limits.second_opinion:
        progress(f"{target.name}: {limits.second_opinion}'s opinion of every decided query")
        opinion = second_opinion([a for s in sessions for a in s.answers], limits, limits.second_opinion)
        doc["second_opinion"] = opinion.as_dict(timing=False)
        if opinion.verdict == DISAGREEMENT:
            verdicts.append(Verdict.REFUTED)
    doc["verdict"] = Verdict.worst(verdicts).value
    return doc


def prove_text(target: Target, doc: dict[str, Any]) -> list[str]:
    """The results of `prove_box` in words, one line each."""
    bound, ort = doc["safe_bound"], doc["ort_estimate_bytes"]
    lines = [target_text(target)]
    if bound["verdict"] == "VACUOUS":
        expected = " (the target expects it)" if target.expect_unavailable_estimate else ""
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
    return lines + [f"{doc['verdict']}: {printable(target.name)}"]


VERDICT_EXIT = {"PROVED": EXIT_OK, "REFUTED": EXIT_REJECTED, "VACUOUS": EXIT_REJECTED, "UNKNOWN": EXIT_UNKNOWN}


def prove_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Safe bound, kernel contract, proven maximum and per-pattern maxima over the target; or the
    GroupQueryAttention ledger over every committed target."""
    _reject_flags(ns, "prove", ("theorem", "timeout_ms", "smt2_dir", "second_rlimit"))
    limits = _limits(ns, SPLIT_RLIMIT)
    if ns.write_ledger or ns.check_ledger:
        return _ledger_command(ns, limits, progress)
    target = target_from_args(ns)
    doc = prove_box(target, limits, progress)
    return CommandResult(VERDICT_EXIT[doc["verdict"]], "\n".join(prove_text(target, doc)), doc)


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


def committed_gqa_targets() -> list[Target]:
    """Every committed GroupQueryAttention target, by file name."""
    return [t for t in committed_targets(own_engines=True) if t.op is Op.GQA]


def compute_gqa_ledger(limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """Every committed target's results (`prove_box`), with the modelled ORT version."""
    return {"version": 1, "ort_version": ORT_VERSION, "rlimit": limits.rlimit,
            "targets": {t.name: prove_box(t, limits, progress) for t in committed_gqa_targets()}}


def _ledger_command(ns: argparse.Namespace, limits: Limits, progress: Progress) -> CommandResult:
    flags = given(ns, ("target", *(f for f in PROBLEM_FLAGS if f != "op")))
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
    _reject_flags(ns, "counterexamples", ("timeout_ms", "smt2_dir", "max_elements"))
    if ns.kind not in ("nonmonotonic", "all"):
        raise UsageError(f"counterexamples --op gqa --kind {ns.kind}: GroupQueryAttention's search is nonmonotonic")
    target = target_from_args(ns)
    in_range(ns.limit, "--limit", 1)
    limits = _limits(ns, SPLIT_RLIMIT)
    lines, doc = [target_text(target)], {"op": "gqa", "target": target.name, "searches": []}
    progress(f"{target.name}: key-length drops on the route ORT picks")
    drops, status = key_length_drops(target, limits, ns.limit)
    lines.append(f"on the route ORT picks: {len(drops)} {status.describe()}" if drops
                 else f"on the route ORT picks: {status.describe()}")
    lines += [f"  B {d['batch']}, S {d['seq']}: T {d['total_seq']:,} needs {format_bytes(d['bytes'])} "
              f"({d['backend']}), T {d['total_seq'] + 1:,} needs {format_bytes(d['next_bytes'])} "
              f"({d['next_backend']})" for d in drops]
    doc["searches"].append({"route": "picked", **status.as_dict(), "drops": drops})
    statuses = [status]
    node = problem_at(target, CONCRETE, target.batch.hi, target.seq.hi, target.total_seq.hi)
    flash_case = KeyLengthCase(node.workspace_problem(CONCRETE), target.config.device.sm_count, target.total_seq.lo,
                               target.total_seq.hi, target.config.device.sm, node.local_window_size)
    progress(f"{target.name}: key-length drops on Flash's route at B {target.batch.hi}, S {target.seq.hi}")
    flash_drops, flash_status = nonmonotonic_pairs(flash_case, limits, ns.limit)
    where = f"on Flash's route (B {target.batch.hi}, S {target.seq.hi}, not fast decode)"
    lines.append(f"{where}: {len(flash_drops)} {flash_status.describe()}" if flash_drops
                 else f"{where}: {flash_status.describe()}")
    lines += [f"  T {d.total:,} needs {format_bytes(d.bytes_before)} ({d.splits_before} splits), T {d.total + 1:,} "
              f"needs {format_bytes(d.bytes_after)} ({d.splits_after} splits)" for d in flash_drops]
    doc["searches"].append({"route": "flash", **flash_status.as_dict(), "drops": [d.as_dict() for d in flash_drops]})
    statuses.append(flash_status)
    doc["shapes"] = _drop_records(target, [(d["batch"], d["seq"], d["total_seq"]) for d in drops], None) + \
        _drop_records(target, [(target.batch.hi, target.seq.hi, d.total) for d in flash_drops], FLASH_ONLY)
    undecided = any(s.state == UNDECIDED for s in statuses) and not (drops or flash_drops)
    return CommandResult(EXIT_UNKNOWN if undecided else EXIT_OK, "\n".join(lines), doc)


# The environment that makes ORT's dispatch take Flash's own route (no XQA, no fast decode), where
# the Flash search's drops are.
FLASH_ONLY = {"ORT_ENABLE_XQA": "0", "ORT_DISABLE_FLASH_DECODE": "1"}


def _drop_records(target: Target, pairs: list[tuple[int, int, int]], env: dict[str, str] | None) -> list[dict[str, Any]]:
    """Shape records (`attnws validate --shapes`) for each drop: T (role larger, more workspace)
    and T + 1 (role smaller), under the target's environment with `env` added."""
    route = "flash" if env else "picked"
    merged = {**dict(target.env), **(env or {})}
    c = target.config
    config = c if env is None else RuntimeConfig.make(
        sm=c.device.sm, sm_count=c.device.sm_count, sdpa_kernel=c.options.sdpa_kernel, env=merged,
        flash_build=c.build.flash, mea_build=c.build.mea, trt_build=c.build.trt, trt_runner=c.trt_runner)
    return [shape_record(target_geometry(target, b, s, t + step), config, merged, label=target.name,
                         pair=f"{route} {i}", role=role)
            for i, (b, s, t) in enumerate(pairs, 1) for step, role in ((0, "larger"), (1, "smaller"))]
