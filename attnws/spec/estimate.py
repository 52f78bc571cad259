"""AOT workspace estimates: exact, safe bound or unavailable, plus the Level-2 declaration.

`estimate_from_hints` mirrors ORT's EstimatePackedAttentionWorkspace (the Level-1 adapter's
graph-free core): validate the node config, refuse zero hints (a zero may be a max-shape hint, not
a proven empty run), build the problem from positional shapes read as upper bounds, enumerate the
reachable routes and aggregate them. `estimate_exact` treats the shapes as the runtime geometry:
dispatch determines the route, so the result is exact. Every byte count is bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

from .aggregate import Aggregate, aggregate, is_proven_empty, root_layout
from .dispatch import dispatch
from .domain import CONCRETE
from .errors import InternalError, WorkspaceError
from .families import family_of
from .hints import Geometry, Hint, shape_of
from .inputs import geometry_hints
from .layout import Recipe
from .limits import INT32_MAX, WORKSPACE_ALIGNMENT
from .options import RuntimeConfig
from .problem import Backend, Op
from .reachability import HeadDomain, RouteReachability, reachability
from .runtime_failures import possible_failures
from .recipe import recipe


class Classification(enum.Enum):
    """What an AOT result promises."""

    EXACT = "exact"  # the route and every deciding dimension are known
    SAFE_BOUND = "safe_bound"  # the maximum over every reachable route's recipe
    UNAVAILABLE = "unavailable"  # shapes, optional inputs, capability or a recipe contract missing


@dataclass(frozen=True)
class Requirement:
    """One Level-2 WorkspaceRequirement: size in bytes, kernel-defined slot, alignment in bytes."""

    size_bytes: int
    slot_id: int = 0
    alignment_bytes: int = WORKSPACE_ALIGNMENT

    def as_dict(self) -> dict[str, int]:
        return {"size_bytes": self.size_bytes, "slot_id": self.slot_id, "alignment_bytes": self.alignment_bytes}


def level2_requirements(total_bytes: int) -> list[Requirement]:
    """Return the Level-2 declaration of a sized root: one slot-0 requirement, none for 0 bytes."""
    return [Requirement(total_bytes)] if total_bytes else []


@dataclass(frozen=True)
class Estimate:
    """An AOT result. `status` is ok or unavailable (ORT's nullopt); when a typed error made it
    unavailable, `error` is that error's status (invalid_argument or overflow) and `message` its
    text. The byte fields are zero unless the status is ok. `note` qualifies the classification:
    ORT declares its bound even where some shapes of the range fail at run time, and says so
    nowhere; the note does."""

    op: Op
    classification: Classification
    status: str = "ok"
    message: str = ""
    error: str = ""
    problem: Any = None  # the family's problem
    head_domain: HeadDomain | None = None
    reachability: tuple[RouteReachability, ...] = ()
    routes: tuple[Recipe, ...] = ()
    projection_bytes: int = 0
    attention_workspace_offset_bytes: int = 0
    attention_workspace_bytes: int = 0
    total_workspace_bytes: int = 0
    skipped: tuple[tuple[Backend, str], ...] = field(default=())
    note: str = ""
    sized: tuple[tuple[str, int], ...] = ()  # an estimator of its own: (route, bytes) it sizes each at
    apart: tuple[tuple[str, bool, str], ...] = ()  # routes sized apart from their backend's: (name, reachable, why not)
    persistent_prepack_bytes: int = 0  # Level 1: what a constant input's prepack keeps (outside the workspace)
    initialization_scratch_bytes: int = 0  # Level 1: the scratch that prepack needs at session creation

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def route_bytes(self) -> dict[str, int]:
        """Return the bytes the estimate sizes each of its routes at, by route name: the routes'
        attention workspaces (the root is align256(projection) + their maximum), or what a
        family's own estimator reports per route (GroupQueryAttention's: Flash's fast decode
        apart)."""
        if self.sized:
            return dict(self.sized)
        return {r.backend.value: r.attention_workspace_bytes for r in self.routes}

    @property
    def backends(self) -> tuple[Backend, ...]:
        return tuple(r.backend for r in self.routes)

    def requirements(self) -> list[Requirement]:
        """Level-2 declaration: one 256-aligned slot-0 root when OK and non-zero, else nothing."""
        return level2_requirements(self.total_workspace_bytes) if self.ok else []


def unavailable(op: Op, message: str, error: str = "", **extra: Any) -> Estimate:
    """Return an unavailable estimate with its reason (and the typed error's status, if any)."""
    return Estimate(op, Classification.UNAVAILABLE, status="unavailable", message=message, error=error, **extra)


def _from_error(op: Op, error: WorkspaceError, **extra: Any) -> Estimate:
    """The unavailable estimate ORT's error makes; attnws's own bug (InternalError) is never one."""
    if isinstance(error, InternalError):
        raise error
    return unavailable(op, str(error), error=error.status, **extra)


def _unknown_dimension(hints: Sequence[Hint]) -> str:
    for index, hint in enumerate(hints):
        shape = shape_of(hint)
        if shape is not None and any(dim < 0 for dim in shape):
            return f"input {index} shape {shape} has an unknown dimension (-1): give a maximum"
    return ""


def config_problem(op: Op, element_size: int | None, num_heads: Any, qkv_hidden_sizes: Sequence[int] | None) -> str:
    """Return why the node config is invalid (ORT's IsValidConfig), or '' when it is valid."""
    if element_size not in (2, 4):
        return f"element type is not fp16 or fp32 (element size {element_size})"
    if not isinstance(num_heads, int) or not 0 < num_heads <= INT32_MAX:
        return f"num_heads = {num_heads!r} must be in [1, {INT32_MAX}]"
    return family_of(op).inputs.attribute_problem(op, num_heads, qkv_hidden_sizes or [])


def _zero_hint(hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None, op: Op) -> str:
    if qkv_hidden_sizes and len(qkv_hidden_sizes) == 3 and 0 in qkv_hidden_sizes:
        return f"qkv_hidden_sizes = {list(qkv_hidden_sizes)} contains 0"
    for index, hint in enumerate(hints):
        shape = shape_of(hint)
        if shape is None:
            continue
        dims = family_of(op).inputs.nonzero_dims(index, shape)
        if 0 in dims:
            return f"input {index} shape {dims} has a zero dimension: a zero hint is not proof of an empty run"
    return ""


def problem_from_hints(
    op: Op, element_size: int, num_heads: int, hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None = None,
    *, has_present: bool = False, unidirectional: bool = False,
) -> tuple[Any, str]:
    """Return (problem, '') from positional shapes, or (None, reason) when they do not suffice.
    Builder errors propagate as typed errors. `has_present` and `unidirectional` describe a
    MultiHeadAttention node (its present outputs and its attribute)."""
    return family_of(op).inputs.problem_from_hints(op, element_size, num_heads, hints, qkv_hidden_sizes,
                                                   has_present=has_present, unidirectional=unidirectional)


def estimate_from_hints(
    op: Op,
    element_size: int | None,
    num_heads: Any,
    hints: Sequence[Hint],
    config: RuntimeConfig | None = None,
    qkv_hidden_sizes: Sequence[int] | None = None,
    *,
    has_present: bool = False,
    unidirectional: bool = False,
) -> Estimate:
    """Return ORT's AOT estimate for positional shape hints read as upper bounds (for
    MultiHeadAttention, which ORT has no estimator for, attnws's own: the same rules)."""
    config = config or RuntimeConfig()
    invalid = config_problem(op, element_size, num_heads, qkv_hidden_sizes)
    if invalid:
        return unavailable(op, invalid)
    zero = _zero_hint(hints, qkv_hidden_sizes, op)
    if zero:
        return unavailable(op, zero)
    unknown = _unknown_dimension(hints)
    if unknown:
        return unavailable(op, unknown)
    try:
        problem, reason = problem_from_hints(op, element_size, num_heads, hints, qkv_hidden_sizes,
                                             has_present=has_present, unidirectional=unidirectional)
        verdicts = tuple(reachability(problem, config, HeadDomain.UPPER_BOUND)) if problem is not None else ()
    except WorkspaceError as error:
        return _from_error(op, error)
    if problem is None:
        return unavailable(op, reason)
    family = family_of(op)
    domain = family.estimate.head_domain(op, qkv_hidden_sizes)
    if domain is HeadDomain.EXACT:
        verdicts = tuple(reachability(problem, config, domain))
    backends = [v.backend for v in verdicts if v.reachable]
    try:
        agg = aggregate(problem, backends, bounds=True)
    except WorkspaceError as error:
        return _from_error(op, error, problem=problem, head_domain=domain, reachability=verdicts)
    note = family.estimate.note(problem, config, backends, runtime_failure_note(problem, config, backends))
    return _ok(Classification.SAFE_BOUND, problem, agg, head_domain=domain, reachability=verdicts, note=note)


def runtime_failure_note(p: Any, config: RuntimeConfig, backends: Sequence[Backend]) -> str:
    """Return which run-time failures shapes within the estimate's maxima may hit ('' when none can)."""
    kinds = possible_failures(p, config, backends)
    if not kinds:
        return ""
    return (f"shapes within these maxima may make ORT fail at run time on a route it keeps ({', '.join(kinds)}; "
            "`attnws ort-failures` says when; `attnws counterexamples --kind runtime-failure` finds such a shape or "
            "proves none exists)")


def _ok(classification: Classification, problem: Any, agg: Aggregate, **extra: Any) -> Estimate:
    return Estimate(
        problem.op, classification, problem=problem, routes=agg.routes,
        projection_bytes=agg.projection_bytes, attention_workspace_offset_bytes=agg.attention_workspace_offset_bytes,
        attention_workspace_bytes=agg.attention_workspace_bytes, total_workspace_bytes=agg.total_workspace_bytes,
        **extra,
    )


def _own_estimate(g: Geometry, config: RuntimeConfig, keep: Sequence[Backend] | None = None) -> Estimate:
    """The estimate of a family with an estimator of its own (GroupQueryAttention's: ORT's own
    aggregate over its reachable routes, one root) for the geometry read as maxima; `keep`, only
    these of its routes."""
    try:
        problem, outcome = family_of(g.op).estimate.OWN_ESTIMATE(g, config, keep)
    except WorkspaceError as error:
        return _from_error(g.op, error)
    return own_estimate_record(problem, config, outcome)


def own_estimate_record(problem: Any, config: RuntimeConfig, outcome: Any) -> Estimate:
    """Return the estimate a family's own estimator gives for its problem at the bounds: its total
    and what it sizes each route at (no per-route recipes), or, where it declares nothing
    (`outcome` a WorkspaceError), that, with the problem and the route verdicts."""
    family = family_of(problem.op)
    verdicts = tuple(reachability(problem, config, HeadDomain.UPPER_BOUND))
    read = dict(problem=problem, head_domain=HeadDomain.UPPER_BOUND, reachability=verdicts,
                apart=tuple(family.estimate.routes_apart(problem, config)))
    if isinstance(outcome, WorkspaceError):
        return _from_error(problem.op, outcome, **read)
    total = outcome.total_workspace_bytes
    sized = tuple((str(getattr(route, "value", route)), bytes_) for route, bytes_ in outcome.sized.items())
    return Estimate(problem.op, Classification.SAFE_BOUND, attention_workspace_bytes=total, total_workspace_bytes=total,
                    note=family.estimate.note(problem, config, [v.backend for v in verdicts if v.reachable], ""),
                    sized=sized, persistent_prepack_bytes=outcome.persistent_prepack_bytes,
                    initialization_scratch_bytes=outcome.initialization_scratch_bytes, **read)


def estimate_over(g: Geometry, config: RuntimeConfig, backends: Sequence[Backend]) -> Estimate:
    """Return the estimate for a geometry read as maxima with only `backends` of its routes kept
    (each sized as the estimator sizes it: the tight policy's route-dropping bound), or the
    unavailable estimate with ORT's error."""
    if family_of(g.op).estimate.OWN_ESTIMATE is not None:
        return _own_estimate(g, config, backends)
    full = estimate_geometry(g, config)
    if not full.ok:
        return full
    try:
        agg = aggregate(full.problem, backends, bounds=True)
    except WorkspaceError as error:
        return _from_error(g.op, error, problem=full.problem)
    return _ok(Classification.SAFE_BOUND, full.problem, agg, head_domain=full.head_domain,
               reachability=full.reachability)


def estimate_geometry(g: Geometry, config: RuntimeConfig | None = None) -> Estimate:
    """Return the safe-bound estimate for a geometry read as maxima, exactly as ORT reads shapes."""
    if family_of(g.op).estimate.OWN_ESTIMATE is not None:
        return _own_estimate(g, config or RuntimeConfig())
    try:
        hints = geometry_hints(g)
    except WorkspaceError as error:
        return _from_error(g.op, error)
    return estimate_from_hints(g.op, g.element_size, g.heads, hints, config, g.qkv_hidden_sizes,
                               has_present=g.with_present, unidirectional=g.unidirectional)


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> Any:
    """Return the validated problem for a geometry taken as the concrete runtime shapes (ORT's
    positional input shapes through the builder; the solver passes symbolic dimensions and its
    domain, under which the builder's checks become obligations instead of errors)."""
    return family_of(g.op).inputs.runtime_problem(g, d)


def estimate_exact(g: Geometry, config: RuntimeConfig | None = None) -> Estimate:
    """Return the runtime workspace when the geometry is the runtime geometry.

    Dispatch determines the route, so the result is exact; when the TRT runner's validity is
    unknown and decides between two routes, the result is the safe bound over both.
    """
    config = config or RuntimeConfig()
    try:
        problem = runtime_problem(g)
        outcome = dispatch(problem, config)
        if outcome.empty:
            return Estimate(g.op, Classification.EXACT, problem=problem, skipped=outcome.skipped)
        if not outcome.backends:
            return unavailable(g.op, outcome.failure, problem=problem, skipped=outcome.skipped)
        routes = tuple(recipe(problem, b, trt_runner_available=True, config=config) for b in outcome.backends)
        attention = max(r.attention_workspace_bytes for r in routes)
        offset, total = root_layout(routes[0].projection_bytes, attention)
    except WorkspaceError as error:
        return _from_error(g.op, error)
    classification = Classification.EXACT if len(routes) == 1 else Classification.SAFE_BOUND
    return Estimate(
        g.op, classification, problem=problem, routes=routes, projection_bytes=routes[0].projection_bytes,
        attention_workspace_offset_bytes=offset, attention_workspace_bytes=attention,
        total_workspace_bytes=total, skipped=outcome.skipped,
    )


__all__ = [
    "Classification", "Estimate", "Requirement", "config_problem", "estimate_exact", "estimate_for_node",
    "estimate_from_hints", "level2_requirements",
    "estimate_geometry", "is_proven_empty", "problem_from_hints", "runtime_problem", "unavailable",
]


ELEMENT_TYPES = {"float16": 2, 10: 2, "float": 4, "float32": 4, 1: 4}  # ONNX TensorProto FLOAT16 = 10, FLOAT = 1


def estimate_for_node(
    op_type: str,
    element_type: Any,
    attributes: dict[str, Any],
    hints: Sequence[Hint],
    config: RuntimeConfig | None = None,
    *,
    has_present: bool = False,
) -> Estimate:
    """Level-1 for a node (ORT's ConfigFromNode): op type, input 0's element type, `num_heads`
    (required) and `qkv_hidden_sizes`; for MultiHeadAttention also `unidirectional` and whether
    the node has the present outputs (`has_present`). Anything it cannot read makes the estimate
    unavailable."""
    ops = {op.onnx_name: op for op in Op}
    if op_type not in ops:
        names = [op.onnx_name for op in Op]
        return unavailable(next(iter(Op)), f"op type {op_type!r} is not {', '.join(names[:-1])} or {names[-1]}")
    op = ops[op_type]
    if element_type not in ELEMENT_TYPES:
        return unavailable(op, f"input 0 element type {element_type!r} is not float16 or float")
    if "num_heads" not in attributes:
        return unavailable(op, "the required attribute num_heads is missing")
    return estimate_from_hints(op, ELEMENT_TYPES[element_type], attributes["num_heads"], hints, config,
                               attributes.get("qkv_hidden_sizes"), has_present=has_present,
                               unidirectional=attributes.get("unidirectional", 0) == 1)
