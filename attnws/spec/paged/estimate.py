"""PagedAttention's AOT bound: attnws's own, since ORT 1.31.1 has none (no
DeclareWorkspaceRequirements, no Level-1 record: every buffer is its own `GetScratchBuffer`
request sized from run-time values, `docs/research/paged-workspace.md` §3).

The node's heads, head size, block size and block table width are its own; a geometry gives the
step's maxima (B, T, S, L). The bound of a route is the sum of its requests, each at its largest
over every step up to the maxima (they are all live to the end of the compute) and rounded up to
256 bytes (so that one reserved root holds them carved 256-aligned, as the arena hands them out),
and the node's bound is the largest over its reachable routes. Where a request is not monotone in the step:

- the paged decode kernel's partials (4 s T N (H + 2) bytes): its split count s falls as T grows
  (`recipe.decode_splits`), so the partials are sized at every T below 2 SMs / N (where s can
  exceed 1) and at the maximum, the largest taken;
- Flash's split-KV accumulators: at the most splits the heuristic can choose,
  min(128, SMs, key blocks of L), with B at its maximum (an envelope, as ORT's GroupQueryAttention
  estimator sizes Flash);
- XQA's scratch: its subsequence count falls as B grows, so it is sized at every B up to the
  maximum (XQA runs with T == B).

Every other request grows with B, T, S and L and is sized at the maxima. A request sized from
device data (the gathered key rows after a readback) is bounded by B * L. A reachable route no
recipe states (cuDNN's paged SDPA, speculative XQA) makes the bound unavailable, with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..backends import flash as flash_backend
from ..domain import CONCRETE
from ..errors import Unavailable, WorkspaceError
from ..gates import HeadDomain
from ..hints import Geometry
from ..limits import WORKSPACE_ALIGNMENT
from ..options import RuntimeConfig
from ..problem import Backend, Op
from .inputs import runtime_problem
from .problem import PagedProblem
from .reachability import reachability
from .recipe import FLASH_SPLIT_MIN_KV, UNSIZED_ROUTES, Allocation, common, route_allocations

ORT_ESTIMATOR = False  # ORT 1.31.1 has no estimator for PagedAttention: the bound is attnws's own
WHOSE = "attnws's"
BOUND_NAME = "attnws's bound"
READING = ("attnws's bound, every scratch request of each reachable route at its largest over every step up to the "
           "maxima")


@dataclass(frozen=True)
class Bound:
    """The bound's result: the largest route's bytes, each sized route's bytes and its requests
    (name, bytes) at their envelopes. Nothing is prepacked."""

    total_workspace_bytes: int
    sized: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    persistent_prepack_bytes: int = 0
    initialization_scratch_bytes: int = 0


def head_domain(op: Op, qkv_hidden_sizes: Sequence[int] | None) -> HeadDomain:
    """The head size is the node's own (its caches fix it)."""
    return HeadDomain.EXACT


def note(p: Any, config: RuntimeConfig, backends: Sequence[Backend], failures: str) -> str:
    """Return what the bound covers: every scratch request of the route a step takes, summed; the
    paged cache, block table and output are not scratch."""
    words = ("attnws's bound covers every GetScratchBuffer request of the route a step takes (ORT makes one request "
             "per buffer, each live to the end of the compute, so they are summed, each rounded up to 256 bytes for a "
             "root that carves them aligned); the paged key/value cache, the block table and the output are not "
             "scratch")
    if not p.has_metadata:
        words += ("; without attention_metadata the gathered key rows ORT sizes from the lengths it copies back are "
                  "bounded by B * L")
    return words + (f"; {failures}" if failures else "")


def side_allocations_of(p: Any, config: RuntimeConfig, backend: Backend) -> tuple[str, dict[str, int]] | None:
    """Nothing beside the requests the recipe lists: every buffer is one of them."""
    return None


def routes_apart(p: Any, config: RuntimeConfig) -> list[tuple[str, bool, str]]:
    """The routes the bound sizes apart from their backend's: none."""
    return []


def has_projection(op: Op) -> bool:
    """PagedAttention has no projection GEMM: its requests are all attention scratch."""
    return False


def flash_split_ceiling(p: PagedProblem, config: RuntimeConfig) -> int:
    """The most splits Flash's decode can take at any step up to the maxima p: 1 where its gate
    (one query token, no head sink, no window, a key lower bound above 512: given by the metadata
    or read back over a quantized cache) never opens, else min(128, SMs, key blocks of L)."""
    may_split = (not p.has_head_sink and p.local_window_size <= 0 and p.max_kv_len > FLASH_SPLIT_MIN_KV
                 and (p.has_metadata or p.quantized))
    if not may_split:
        return 1
    return flash_backend.split_cap(CONCRETE, flash_backend.key_blocks(CONCRETE, p.head_size, p.max_kv_len),
                                   config.device.sm_count)


def candidate_steps(p: PagedProblem, backend: Backend, config: RuntimeConfig) -> list[PagedProblem]:
    """The steps up to the maxima p among which each of the route's requests takes its largest
    value (see the module docstring)."""
    if backend is Backend.PAGED_DECODE:
        below = -(-2 * config.device.sm_count // p.num_heads)
        return [replace(p, token_count=t) for t in range(1, min(p.token_count, below) + 1)] + [p]
    if backend is Backend.XQA:
        return [replace(p, batch_size=b, token_count=b) for b in range(1, min(p.batch_size, p.token_count) + 1)] + [p]
    return [p]


def route_envelope(p: PagedProblem, backend: Backend, config: RuntimeConfig) -> list[Allocation]:
    """The route's requests, each at its largest over the steps up to the maxima p (bytes)."""
    ceiling = flash_split_ceiling(p, config) if backend is Backend.FLASH else None
    largest: dict[str, int] = {}
    for step in candidate_steps(p, backend, config):
        extra, _ = route_allocations(CONCRETE, step, backend, config, flash_split_count=ceiling)
        for a in common(CONCRETE, p) + extra:
            largest[a.name] = max(largest.get(a.name, 0), a.nbytes)
    return [Allocation(name, nbytes) for name, nbytes in largest.items()]


def bound(p: PagedProblem, config: RuntimeConfig, keep: Sequence[Backend] | None = None) -> Bound:
    """attnws's bound for the node at the maxima p over its reachable routes (`keep`: only these),
    or raise Unavailable where a reachable route has no recipe."""
    routes = [v.backend for v in reachability(p, config, HeadDomain.EXACT) if v.reachable]
    if keep is not None:
        routes = [r for r in routes if r in keep]
    unsized = [r for r in routes if r in UNSIZED_ROUTES]
    if unsized:
        raise Unavailable("; ".join(f"a reachable {r.value} route has no recipe: {UNSIZED_ROUTES[r]}" for r in unsized))
    if not routes:
        raise Unavailable("No PagedAttention route can run a step within these maxima.")
    buffers = {r: route_envelope(p, r, config) for r in routes}
    sized = {r: sum(CONCRETE.align_up(a.nbytes, WORKSPACE_ALIGNMENT) for a in allocations)
             for r, allocations in buffers.items()}
    return Bound(max(sized.values()), sized, {r: [(a.name, a.nbytes) for a in allocations]
                                              for r, allocations in buffers.items()})


def own_estimate(g: Geometry, config: RuntimeConfig,
                 keep: Sequence[Backend] | None = None) -> tuple[PagedProblem, Bound | WorkspaceError]:
    """The node read at the geometry's maxima (or raise the builder's error) and attnws's bound
    for it, or its Unavailable error."""
    p = runtime_problem(g)
    try:
        return p, bound(p, config, keep)
    except WorkspaceError as error:
        return p, error


OWN_ESTIMATE = own_estimate  # attnws's own PagedAttention bound, not the shared aggregate
