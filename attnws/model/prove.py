"""Solver checks per node: `safe_bound` and `containment` (`--prove`: the shared theorems,
`solver.theorems.prove_target`), the proven maximum (`--policy tight`: the tight policy,
`solver.tight.tight_policy`) and each memory pattern's proven maximum (`--pattern`:
`solver.tight.pattern_maximum` on the node's target), on each node's `node_target`, whatever
its family: the sized nodes, and the valid ones ORT's estimate declares nothing for (a reachable
cuDNN route), whose patterns are proven where no shape takes a route without a recipe. A node its target cannot state (`report.Unstated`, or a target its own
checks refuse) is not run: it keeps its estimate's bound, and says why.

Imports `attnws.solver` (Z3): the command imports this module only when one of those flags is
given. Nodes whose targets are equal (same shapes, flags and configuration) share one run; the
later ones name the node whose results they reuse. What the records mean and how they add up is
`reserve`'s. Bytes throughout.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from ..spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN
from ..spec.errors import InvalidArgument
from ..solver.gateway import Verdict
from ..solver.theorems import prove_target
from ..solver.tight import pattern_maximum, tight_policy
from ..spec.target import Pattern, Target
from .report import ModelReport, Unstated, node_target
from .reserve import NodeChecks, PatternCheck, pattern_box, peak_and_sum

PROVE_THEOREMS = ("safe_bound", "containment")


def _pattern_checks(target: Target, whole: int | None, patterns: tuple[Pattern, ...],
                    progress: Callable[[str], None]) -> tuple[PatternCheck, ...]:
    """Each pattern on the node's target: its proven maximum, or why it does not apply (then the
    node's whole reservation `whole` counts for it, None where nothing bounds the node). A maximum
    that leaves out shapes of a route no recipe sizes (`left_out`) bounds nothing either."""
    out = []
    for pattern in patterns:
        box, reason = pattern_box(target, pattern)
        if box is None:
            out.append(PatternCheck(pattern, None, reason, None, whole))
            continue
        progress(f"proving the largest workspace of {target.name} in pattern {pattern.name}")
        result = pattern_maximum(replace(target, patterns=(box,)), box)
        bounded = result.verdict is Verdict.PROVED and not result.details.get("left_out")
        out.append(PatternCheck(pattern, box, "", result, result.details["max_runtime_bytes"] if bounded else whole))
    return tuple(out)


def check_nodes(report: ModelReport, prove: bool, tight: bool, progress: Callable[[str], None],
                patterns: tuple[Pattern, ...] = ()) -> list[NodeChecks]:
    """Return the solver checks of every sized node, running each distinct target once. Patterns
    imply the tight policy (a pattern that does not apply counts the node's proven maximum)."""
    from .render import group_key

    tight = tight or bool(patterns)
    done: dict[Any, NodeChecks] = {}
    out: list[NodeChecks] = []
    for node in report.provable:
        try:
            target = node_target(node)
        except InvalidArgument as error:  # identical nodes share the first one's answer
            why = error.why if isinstance(error, Unstated) else str(error)
            first = done.setdefault((group_key(node), why), _unprovable(node, why, tight, patterns))
            out.append(replace(first, node=node))
            continue
        key = replace(target, name="")
        if key not in done:
            progress(f"proving {target.name}")
            results = tuple(prove_target(target, names=list(PROVE_THEOREMS))) if prove else ()
            # Where ORT's estimate declares nothing, the whole node's maximum would leave out the
            # shapes of the route no recipe sizes (cuDNN's): only the patterns are bounded then.
            policy = tight_policy(target) if tight and node.estimate.ok else None
            first = NodeChecks(node, results, policy, node.path, tight_asked=tight)
            done[key] = replace(first, patterns=_pattern_checks(target, first.tight_total_bytes, patterns, progress))
        first = done[key]
        out.append(replace(first, node=node))
    return out


def _unprovable(node: Any, why: str, tight: bool, patterns: tuple[Pattern, ...]) -> NodeChecks:
    """A node the solver's target cannot state: no run, its estimate's bound for the whole and for
    every pattern (which does not apply to it, saying why)."""
    check = NodeChecks(node, (), None, node.path, unprovable=why, tight_asked=tight)
    reason = f"the solver's target cannot state the node ({why})"
    return replace(check, patterns=tuple(PatternCheck(p, None, reason, None, check.ort_bytes) for p in patterns))


def verdict(checks: list[NodeChecks]) -> Verdict:
    """Return the worst proof verdict over every node (PROVED when nothing was proved; an
    expected VACUOUS counts as PROVED)."""
    return Verdict.worst(r.failing_verdict for c in checks for r in c.results)


def exit_code(report: ModelReport, checks: list[NodeChecks]) -> int:
    """Return 1 when a node is unavailable or a theorem REFUTED or VACUOUS, 3 for UNKNOWN only, else 0."""
    worst = verdict(checks)
    if not report.complete or worst in (Verdict.REFUTED, Verdict.VACUOUS):
        return EXIT_REJECTED
    return EXIT_UNKNOWN if worst is Verdict.UNKNOWN else EXIT_OK


def checks_json(checks: list[NodeChecks]) -> dict[str, Any]:
    """Return the checks as JSON fields to add to the model document: the worst verdict, per node
    its proofs, tight policy (the proven maximum) and memory patterns, and the sum and peak under
    the policy used."""
    nodes = {c.node.path: {
        "shared_from": c.shared_from, "unprovable": c.unprovable or None, "proofs": [r.as_dict() for r in c.results],
        "tight": c.tight.as_dict() if c.tight else None,
        "patterns": {p.pattern.name: p.as_dict() for p in c.patterns},
    } for c in checks}
    policy = peak_and_sum([c.tight_total_bytes for c in checks])  # kept from schema 1: `totals` has them and more
    return {"verdict": verdict(checks).value, "checks": nodes, "policy_sum_total_bytes": policy["sum"],
            "policy_peak_total_bytes": policy["peak"]}


def checks_text(checks: list[NodeChecks]) -> str:
    """Return the theorems (--prove) by target: nodes sharing one target (a stack of identical
    layers) print once, then one line per theorem in words. The proven maxima print with their
    nodes (`render.group_text`)."""
    from ..solver.text import result_text
    from .render import names_text

    if not checks:
        return "solver checks: none (no attention node was sized)"
    lines = ["solver checks (per distinct node target)"]
    groups: dict[str, list[NodeChecks]] = {}
    for c in checks:
        groups.setdefault(c.shared_from, []).append(c)
    for members in groups.values():
        names = [c.node.path for c in members]
        lines.append(f"  {names_text(names)}" + (f" (x{len(members)}, one target)" if len(members) > 1 else ""))
        if members[0].unprovable:
            lines.append(f"    not run: the solver's target cannot state the node ({members[0].unprovable})")
        lines += ["    " + line for r in members[0].results for line in result_text(r, timing=False).splitlines()]
    return "\n".join(lines)
