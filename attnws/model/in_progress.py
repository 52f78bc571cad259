"""Attention nodes of the families whose readers are declared in progress
(`registry.IN_PROGRESS_READERS`, which says why): today GroupQueryAttention. Its spec family
(`attnws.spec.gqa`) is registered, but its estimate is ORT 1.31.1's own estimator and its proofs
are the family's own (`attnws.solver.gqa_proofs`, not the shared theorems `prove` and
`solver.tight` run), so `translate`, `derive` and `report.node_report` do not take its nodes
through the reader registry. This module is that pipeline's stand-in: when the family's proofs
join the shared theorems, its nodes become `NodeReport`s like any other (the reader a
`NodeReader`, the estimate the spec's `Estimate`, the proofs `prove`'s) and this module goes.

A node is found like any attention node (`functions.attention_sites`, inside subgraphs and at
every call of a model-local function), checked against ORT's schema (`translate.checked_types`:
a bad node is a `BadModel`) and read by position at the maximum shapes of the user's bounds (shape
inference and `derive.resolve`, as for every node: B and S from query, the cache capacity P from
past_key's dimension 2). Its Level-1 estimate is ORT's own (`attnws.spec.gqa.estimate.ort_estimate`,
what `attnws estimate --op gqa` prints) with the session option
`ep.cuda.gqa_workspace_max_total_sequence_length` (`--max-total-seq`; 0 unset, and then a
non-windowed cache has no estimate, as in ORT); Level 2 is one 256-byte-aligned slot-0 root of
that size. A node ORT cannot size is unavailable with ORT's reason.

For the solver (`--prove`, `--policy tight`, `--pattern`; `check_nodes` loads Z3) a sized node is
a shared `attnws.spec.target.Target` of its operator (`in_progress_target`): B over 1..its bound, S over
1..its bound, N, H, Nk and the cache capacity P exact, T over 1..P (past and present share one
buffer of P rows, onnxruntime-genai's layout: no run passes a larger T; a windowed cache over
1..max(P, S, --max-total-seq)), with the memory patterns decode (S = 1) and prefill (S >= 2: a
first prompt, past empty, and any later chunk) and the user's patterns that narrow batch or seq.
`attnws.solver.gqa_commands.prove_box` proves ORT's estimate safe, the kernels' buffers inside
their regions and each maximum. A node the target cannot state (per-channel scales, an attention
bias, q/k norms, a prepacked head sink...) says so and keeps ORT's bound. Bytes throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

import onnx

from ..spec.errors import WorkspaceError
from ..spec.estimate import level2_requirements
from ..spec.gqa.estimate import node_at_maxima, ort_estimate
from ..spec.options import RuntimeConfig
from ..spec.target import DimRange, Pattern, Target
from .functions import attention_sites
from .graph import Site, all_graphs
from .registry import in_progress_reader
from .translate import ReadNode, checked_types, element_type_name, is_in_progress, read_hints

DECODE, PREFILL = "decode", "prefill"  # the memory patterns every sized node is proved over
PATTERN_DIMS = ("batch", "seq")  # the user's pattern dimensions a node's target narrows


@dataclass(frozen=True)
class InProgressNode(ReadNode):
    """One node of an in-progress family: where it is, what was read, and ORT's estimate (bytes;
    `status` ok or unavailable, `error` the typed error's status, `message` why)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    config: RuntimeConfig
    max_total_sequence_length: int
    problem: Any = None  # the family's problem at the maxima; None when ORT refuses the node
    status: str = "ok"
    error: str = ""
    message: str = ""
    total_workspace_bytes: int = 0
    routes: tuple[tuple[str, int], ...] = ()  # each route ORT sizes, with its bytes
    persistent_prepack_bytes: int = 0
    initialization_scratch_bytes: int = 0
    head_sink_prepacked: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def input_names(self) -> tuple[str, ...]:
        """Return the operator's inputs by position."""
        return in_progress_reader(self.op_type).input_names

    @property
    def output_names(self) -> tuple[str, ...]:
        """Return the operator's outputs by position."""
        return in_progress_reader(self.op_type).output_names

    def as_dict(self) -> dict[str, Any]:
        """Return the estimate as JSON data (bytes; the Level-2 requirements)."""
        p = self.problem
        return {"status": self.status, "error": self.error or None, "message": self.message or None,
                "total_workspace_bytes": self.total_workspace_bytes if self.ok else None,
                "routes": dict(self.routes), "persistent_prepack_bytes": self.persistent_prepack_bytes,
                "initialization_scratch_bytes": self.initialization_scratch_bytes,
                "requirements": [r.as_dict() for r in level2_requirements(self.total_workspace_bytes)] if self.ok else [],
                "cache_capacity": p.past_sequence_length if p is not None else None,
                "max_total_sequence_length": self.max_total_sequence_length or None}


def _attribute(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def node_of(site: Site, config: RuntimeConfig, max_total_sequence_length: int, constants: frozenset[str]) -> InProgressNode:
    """Return one node's report, or raise BadModel for a node ONNX Runtime would refuse to load."""
    reader = in_progress_reader(site.node.op_type)
    types = checked_types(site, reader)
    hints, unresolved = read_hints(types, reader.input_names)
    attributes = {name: _attribute(value) for name, value in types.attributes.items()}
    node = InProgressNode(site.label, site.node.op_type, site.graph_path, element_type_name(types.type_of(0)),
                          attributes, hints, types.inputs, types.outputs, config, max_total_sequence_length,
                          head_sink_prepacked=reader.prepacked_head_sink(types.inputs, constants))
    reason = reader.unmodelled(types.outputs) or "; ".join(unresolved)
    if reason:
        return replace(node, status="unavailable", message=reason)
    try:
        problem = reader.problem(hints, attributes, node.element_type, element_type_name(types.type_of(3)),
                                 types.outputs)
    except WorkspaceError as error:
        return replace(node, status="unavailable", error=error.status, message=str(error))
    try:
        result = ort_estimate(problem, config, max_total_sequence_length, node.head_sink_prepacked)
    except WorkspaceError as error:
        return replace(node, problem=problem, status="unavailable", error=error.status, message=str(error))
    routes = tuple((str(getattr(route, "value", route)), nbytes) for route, nbytes in result.sized.items())
    return replace(node, problem=problem, total_workspace_bytes=result.total_workspace_bytes, routes=routes,
                   persistent_prepack_bytes=result.persistent_prepack_bytes,
                   initialization_scratch_bytes=result.initialization_scratch_bytes)


def in_progress_nodes(graph: onnx.GraphProto, config: RuntimeConfig,
                      max_total_sequence_length: int = 0) -> tuple[InProgressNode, ...]:
    """Return every in-progress family's node of an inlined, inferred graph, in graph order."""
    constants = frozenset(t.name for g in all_graphs(graph) for t in g.initializer)
    return tuple(node_of(site, config, max_total_sequence_length, constants)
                 for site in attention_sites(graph, is_in_progress))


# -- the solver: one target per distinct node ---------------------------------------------------------

@dataclass(frozen=True)
class InProgressChecks:
    """One sized node's solver results: its target (None with `reason` when the target cannot
    state the node), `prove_box`'s document (safe bound, kernel contract, the maxima per pattern),
    the user's patterns that do not apply (name -> why) and the node whose identical target was
    run."""

    node: InProgressNode
    target: Target | None
    reason: str
    doc: dict[str, Any] | None
    not_applied: tuple[tuple[str, str], ...]
    shared_from: str

    def _maximum(self, name: str) -> int | None:
        found = [m["bytes"] for m in (self.doc or {}).get("maxima", []) if m["pattern"] == name]
        return found[0] if found else None

    @property
    def tight_total_bytes(self) -> int:
        """Return what the node reserves: its proven maximum, else ORT's estimate."""
        proven = self._maximum("every shape")
        return self.node.total_workspace_bytes if proven is None else proven

    @property
    def proven(self) -> bool:
        return self._maximum("every shape") is not None

    def pattern_bytes(self, name: str) -> int:
        """Return the pattern's proven maximum, else the node's whole reservation."""
        proven = self._maximum(name)
        return self.tight_total_bytes if proven is None else proven

    @property
    def verdict(self) -> str:
        """Return the box's combined verdict (PROVED when no box was run)."""
        return (self.doc or {}).get("verdict", "PROVED")

    def as_dict(self) -> dict[str, Any]:
        return {"shared_from": self.shared_from, "unprovable": self.reason or None, "results": self.doc,
                "not_applied": dict(self.not_applied)}


def in_progress_target(n: InProgressNode,
                       patterns: tuple[Pattern, ...]) -> tuple[Target | None, str, tuple[tuple[str, str], ...]]:
    """Return (the node's solver target, "", the user's patterns that do not apply) or (None,
    why, ...): B over 1..its bound, S over 1..its bound, the rest the reader's
    (`Reader.target_fields`), with the patterns decode, prefill and the user's that narrow B or S."""
    p, reader = n.problem, in_progress_reader(n.op_type)
    own = {DECODE: {"seq": DimRange(1, 1)}}
    if p.sequence_length >= 2:
        own[PREFILL] = {"seq": DimRange(2, p.sequence_length)}
    limits = {"batch": p.batch_size, "seq": p.sequence_length}
    not_applied = []
    for pattern in patterns:
        other = [dim for dim, _ in pattern.dims if dim not in PATTERN_DIMS]
        clipped = {dim: DimRange(max(r.lo, 1), min(r.hi, limits[dim])) for dim, r in pattern.dims if dim in PATTERN_DIMS}
        if other:
            not_applied.append((pattern.name, f"the node's box has no {', '.join(other)} (it ranges batch, seq and "
                                              "total_seq)"))
        elif any(r.lo > r.hi for r in clipped.values()):
            not_applied.append((pattern.name, "the pattern lies outside the node's batch and seq"))
        else:
            own[pattern.name] = clipped
    reason = reader.unstated(p, n.head_sink_prepacked)
    if reason:
        return None, reason, tuple(not_applied)
    try:
        target = Target(op=p.op, element_size=p.element_size, batch=DimRange(1, p.batch_size),
                        seq=DimRange(1, p.sequence_length), config=n.config, name=n.path,
                        patterns=tuple(Pattern(name, tuple(dims.items())) for name, dims in own.items()),
                        **reader.target_fields(p, n.max_total_sequence_length))
    except WorkspaceError as error:
        return None, f"the solver's box is not valid: {error}", tuple(not_applied)
    at = node_at_maxima(target.max_geometry())
    differ = [f.name for f in fields(p) if f.name != "total_sequence_length" and getattr(at, f.name) != getattr(p, f.name)]
    if differ:
        return None, f"the solver's box cannot state the node's {', '.join(differ)}", tuple(not_applied)
    return target, "", tuple(not_applied)


def check_nodes(nodes: tuple[InProgressNode, ...], patterns: tuple[Pattern, ...],
                progress: Callable[[str], None]) -> list[InProgressChecks]:
    """Return the solver's results for every sized node, each distinct target proved once (loads Z3)."""
    from ..solver.gateway import Limits
    from ..solver.gqa_commands import SPLIT_RLIMIT, prove_box

    done: dict[Any, InProgressChecks] = {}
    out = []
    for n in nodes:
        if not n.ok:
            continue
        target, reason, not_applied = in_progress_target(n, patterns)
        key = (replace(target, name="") if target is not None else n.path, not_applied)
        if key not in done:
            doc = prove_box(target, Limits(rlimit=SPLIT_RLIMIT), progress) if target is not None else None
            done[key] = InProgressChecks(n, target, reason, doc, not_applied, n.path)
        out.append(replace(done[key], node=n))
    return out
