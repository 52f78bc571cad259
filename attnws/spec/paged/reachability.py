"""PagedAttention's AOT reachability: which routes some step within a node's maxima can take
(attnws's own: ORT 1.31.1 has no estimator for PagedAttention).

A PagedAttention node's heads, head size, block size and block table width are fixed by the model
and its cache; only the step varies: B sequences, T tokens, S new tokens at most per sequence, L
keys at most. The selection (`dispatch.cascade_gates`, the very same gates) reads the step only
through T against B (T == B, T < B, T > B), S (1, each speculative length 2..8, or more) and the
grid's T; the key length sizes buffers but picks no route. So the cascade is run at one step of
each of those classes that fits the maxima, and at the maxima themselves; a route is reachable
when one of them takes it. The solver's `reachability` and `safe_bound` theorems check this
against every step of a target: a class missed here would show as a route dispatch picks that the
estimate does not size.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..domain import CONCRETE
from ..gates import HeadDomain, RouteReachability, first_open, verdict
from ..options import RuntimeConfig
from ..problem import Backend
from . import dispatch
from .problem import PagedProblem


def representative_steps(p: PagedProblem) -> list[PagedProblem]:
    """One step per class the selection tells apart (module docstring) that fits the maxima p,
    then p itself; each with L at its maximum (which is at least S)."""
    lengths = [1, *range(2, min(dispatch.SPEC_MAX_QUERY, p.max_query_len) + 1)]
    if p.max_query_len > dispatch.SPEC_MAX_QUERY:
        lengths.append(dispatch.SPEC_MAX_QUERY + 1)
    steps = []
    for s in lengths:
        for b, t in ((s, s), (s + 1, s), (1, s)):  # T == B, T < B, T > B (T = S tokens: S <= T <= B * S)
            if b <= p.batch_size and t <= p.token_count and t <= b * s and (b, t) != (1, 1) or (b, t, s) == (1, 1, 1):
                steps.append(replace(p, batch_size=b, token_count=t, max_query_len=s))
    return steps + [p]


def reachability(p: PagedProblem, config: RuntimeConfig, domain: HeadDomain) -> list[RouteReachability]:
    """Return every PagedAttention backend, in cascade order, with attnws's AOT verdict for a node
    whose step dimensions are maxima: reachable where the cascade takes it at a representative
    step, else why its own gates fail there (the step where the most of them hold). The head size
    is the node's own (its caches fix it), so `domain` changes nothing."""
    taken: set[Backend] = set()
    closest: dict[Backend, tuple[int, RouteReachability]] = {}
    for step in representative_steps(p):
        cascade = dispatch.cascade_gates(CONCRETE, step, config)
        backend, _ = first_open(cascade)
        if backend is not None:
            taken.add(backend)
        for route, gates in cascade:
            found = verdict(route, gates)
            if found.reachable:  # its gates hold but an earlier route takes the step
                found = RouteReachability(route, False, "an earlier route takes every step its gates admit")
            passing = sum(1 for g in gates if g.cond)
            if route not in closest or passing > closest[route][0]:
                closest[route] = (passing, found)
    return [RouteReachability(route, True) if route in taken else closest[route][1]
            for route, _ in dispatch.cascade_gates(CONCRETE, p, config)]


def abi_scope(d: Any, p: PagedProblem, config: RuntimeConfig, backend: Backend) -> Any:
    """Where the estimate sizes a route of its reachable set: wherever the route's own runtime
    gates admit the step, whichever route an earlier gate takes there."""
    gates = dict(dispatch.cascade_gates(d, p, config))[backend]
    return d.all_(*(g.cond for g in gates)) if gates else True
