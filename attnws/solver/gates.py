"""Which dispatch gates a target crosses: for every gate of the cascade, a shape of the target
where dispatch reaches the gate and it holds, and one where it fails.

A gate is reached at a shape when the output is not empty, every earlier backend of the cascade
was refused and every earlier gate of the same backend held (for an unknown TRT runner, under
either outcome). A specification bug that keeps every route inside the estimate (a gate on the
wrong dimension, a threshold off by one) is visible to reachability, the ledger's witnesses and
the findings only where some committed target's box holds both sides of that gate; the ledger
records these witnesses and `tests/solver/test_gate_coverage.py` requires every gate of every
family to be crossed. The gates are the spec's own `cascade_gates`, evaluated over the target's
symbolic shape; each witness is replayed through the concrete cascade before it is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from attnws.spec.dispatch import cascade_gates, output_is_empty, runner_validity
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import WorkspaceError
from attnws.spec.estimate import runtime_problem
from attnws.spec.options import TrtRunner
from attnws.spec.problem import Backend
from attnws.spec.target import Target

from .domain import conj, negate
from .encode import build, concrete_dims, concrete_geometry
from .gateway import Limits
from .results import mismatch
from .session import Session


@dataclass(frozen=True)
class GateSite:
    """One gate of the cascade at the symbolic problem: where dispatch reaches it, and its condition."""

    backend: Backend
    gate: str
    reached: Any
    cond: Any

    @property
    def key(self) -> str:
        return gate_key(self.backend, self.gate)


def gate_key(backend: Backend, gate: str) -> str:
    """Return the ledger's name of a gate: 'backend/gate name'."""
    return f"{backend.value}/{gate}"


def gate_sites(d: Any, p: Any, target: Target) -> Iterator[GateSite]:
    """Yield every gate of the cascade with the condition under which dispatch reaches it (one
    site per TRT-runner outcome when the runner is unknown)."""
    config = target.config
    runners = [True, False] if config.trt_runner is TrtRunner.UNKNOWN else [runner_validity(d, p, config)]
    for runner in runners:
        refused: Any = negate(output_is_empty(d, p))
        for backend, gates in cascade_gates(d, p, config, runner):
            held: list[Any] = []
            for g in gates:
                yield GateSite(backend, g.name, conj(refused, *held), g.cond)
                held.append(g.cond)
            refused = conj(refused, negate(conj(*held)))


def gate_reached(p: Any, target: Target, key: str) -> list[bool]:
    """Return the values the gate takes where the concrete cascade reaches it at problem p (empty
    when it is not reached; two values only for an unknown runner's two outcomes)."""
    return [bool(site.cond) for site in gate_sites(CONCRETE, p, target)
            if site.key == key and site.reached]


def crossings(target: Target, limits: Limits | None = None) -> dict[str, dict[str, Any]]:
    """Return, per gate of the target's cascade, the witness shapes found: {"holds": dims,
    "fails": dims} where each side exists, "unknown" where a query is undecided, and nothing
    for a side proven not to exist. Every witness is replayed through the concrete cascade."""
    built = build(target)
    if built.problem is None:
        return {}
    session = Session(f"{target.name}/gates", limits or Limits())
    out: dict[str, dict[str, Any]] = {}
    for site in gate_sites(built.domain, built.problem, target):
        entry = out.setdefault(site.key, {})
        for side, cond in (("holds", site.cond), ("fails", negate(site.cond))):
            if isinstance(entry.get(side), dict):
                continue
            answer = session.search([built.valid, site.reached, cond], f"-{site.key}-{side}")
            if answer.status == "unknown":
                entry[side] = "unknown"
            elif answer.status == "sat":
                dims = concrete_dims(built.shape, answer.model)
                entry[side] = _replayed(target, dims, site.key, side == "holds")
    return out


def _replayed(target: Target, dims: dict[str, Any], key: str, expected: bool) -> dict[str, Any]:
    try:
        p = runtime_problem(concrete_geometry(target, dims))
    except WorkspaceError as error:
        raise mismatch("gate coverage", dims, f"the builder refuses the witness of {key}: {error}") from None
    if expected not in gate_reached(p, target, key):
        raise mismatch("gate coverage", dims, f"the concrete cascade does not reach {key} "
                                              f"{'holding' if expected else 'failing'}")
    return dims


__all__ = ["GateSite", "crossings", "gate_key", "gate_reached", "gate_sites"]
