"""Solver checks per node: `safe_bound` and `containment` (`--prove`) and the tight policy
(`--policy tight`), on each sized node's `node_target`.

Imports `attnws.solver` (Z3): the command imports this module only when one of the two flags is
given. Nodes whose targets are equal (same shapes, flags and configuration) share one run; the
later ones name the node whose results they reuse. Bytes throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from ..command import EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN
from ..solver.gateway import Verdict
from ..solver.theorems import ProofResult, prove_target
from ..solver.tight import TightPolicy, tight_policy
from .report import ModelReport, NodeReport, node_target

PROVE_THEOREMS = ("safe_bound", "containment")


@dataclass(frozen=True)
class NodeChecks:
    """One sized node's proof results (empty without --prove) and tight policy (None without
    --policy tight); `shared_from` names the node whose identical target was run."""

    node: NodeReport
    results: tuple[ProofResult, ...]
    tight: TightPolicy | None
    shared_from: str

    @property
    def tight_total_bytes(self) -> int:
        """Return the node's root under the requested policy (ORT's without --policy tight)."""
        if self.tight is None or self.tight.tight_total_bytes is None:
            return self.node.estimate.total_workspace_bytes
        return self.tight.tight_total_bytes


def check_nodes(report: ModelReport, prove: bool, tight: bool, progress: Callable[[str], None]) -> list[NodeChecks]:
    """Return the solver checks of every sized node, running each distinct target once."""
    done: dict[Any, NodeChecks] = {}
    out: list[NodeChecks] = []
    for node in report.sized:
        target = node_target(node)
        key = replace(target, name="")
        if key not in done:
            progress(f"proving {target.name}")
            results = tuple(prove_target(target, names=list(PROVE_THEOREMS))) if prove else ()
            done[key] = NodeChecks(node, results, tight_policy(target) if tight else None, node.path)
        first = done[key]
        out.append(NodeChecks(node, first.results, first.tight, first.shared_from))
    return out


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
    """Return the checks as JSON fields to add to the model document."""
    nodes = {c.node.path: {
        "shared_from": c.shared_from, "proofs": [r.as_dict() for r in c.results],
        "tight": c.tight.as_dict() if c.tight else None,
    } for c in checks}
    totals = [c.tight_total_bytes for c in checks]
    return {"verdict": verdict(checks).value, "checks": nodes,
            "policy_sum_total_bytes": sum(totals), "policy_peak_total_bytes": max(totals, default=0)}


def checks_text(checks: list[NodeChecks]) -> str:
    """Return the checks by target: nodes sharing one target (a stack of identical layers) print
    once, then one line per theorem in words and the tight policy, bytes with units."""
    from ..solver.text import result_text
    from ..spec.units import format_bytes
    from .render import names_text

    if not checks:
        return "solver checks: none (no attention node was sized)"
    lines = ["solver checks (per distinct node target)"]
    groups: dict[str, list[NodeChecks]] = {}
    for c in checks:
        groups.setdefault(c.shared_from, []).append(c)
    for shared_from, members in groups.items():
        names = [c.node.path for c in members]
        lines.append(f"  {names_text(names)}" + (f" (x{len(members)}, one target)" if len(members) > 1 else ""))
        first = members[0]
        lines += ["    " + line for r in first.results for line in result_text(r, timing=False).splitlines()]
        if first.tight is not None:
            t = first.tight
            dropped = ", ".join(t.dropped_routes) or "none"
            if t.proof.verdict is Verdict.PROVED and t.tight_total_bytes is not None:
                lines.append(f"    tight policy: {format_bytes(t.tight_total_bytes)}, proven safe; saves "
                             f"{format_bytes(t.bytes_saved)} of ORT's {format_bytes(t.ort_total_bytes)} "
                             f"(routes proven never dispatched: {dropped})")
            else:
                lines.append(f"    tight policy: not proven ({t.proof.verdict.value}); ORT's "
                             f"{format_bytes(t.ort_total_bytes)} stays")
    totals = [c.tight_total_bytes for c in checks]
    lines.append(f"  under this policy: sum {format_bytes(sum(totals))}, peak {format_bytes(max(totals, default=0))}")
    return "\n".join(lines)
