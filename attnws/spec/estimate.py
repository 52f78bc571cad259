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
from .builders import build_pa_problem, build_pmha_problem
from .mha.builder import build_mha_problem
from .dispatch import dispatch
from .domain import CONCRETE
from .errors import WorkspaceError
from .hints import Geometry, Hint, HintState, MISSING, geometry_hints, hint_at, shape_of
from .layout import Recipe
from .limits import INT32_MAX, WORKSPACE_ALIGNMENT
from .options import RuntimeConfig
from .ort_version import CUDNN_ASSUMED
from .problem import Backend, Op, Problem
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
    problem: Problem | None = None
    head_domain: HeadDomain | None = None
    reachability: tuple[RouteReachability, ...] = ()
    routes: tuple[Recipe, ...] = ()
    projection_bytes: int = 0
    attention_workspace_offset_bytes: int = 0
    attention_workspace_bytes: int = 0
    total_workspace_bytes: int = 0
    skipped: tuple[tuple[Backend, str], ...] = field(default=())
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

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
    return unavailable(op, str(error), error=error.status, **extra)


def config_problem(op: Op, element_size: int | None, num_heads: Any, qkv_hidden_sizes: Sequence[int] | None) -> str:
    """Return why the node config is invalid (ORT's IsValidConfig), or '' when it is valid."""
    if element_size not in (2, 4):
        return f"element type is not fp16 or fp32 (element size {element_size})"
    if not isinstance(num_heads, int) or not 0 < num_heads <= INT32_MAX:
        return f"num_heads = {num_heads!r} must be in [1, {INT32_MAX}]"
    sizes = list(qkv_hidden_sizes or [])
    if op is Op.MHA:
        return f"MultiHeadAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""
    if op is Op.PMHA:
        return f"PackedMultiHeadAttention has no qkv_hidden_sizes attribute, got {sizes}" if sizes else ""
    if len(sizes) not in (0, 3):
        return f"qkv_hidden_sizes = {sizes} must have exactly 3 values"
    if any(not 0 <= s <= INT32_MAX for s in sizes):
        return f"qkv_hidden_sizes = {sizes} must be within [0, {INT32_MAX}]"
    if sizes:
        q, k, v = sizes
        if q != k or q % num_heads or v % num_heads or q + k + v > INT32_MAX:
            return f"qkv_hidden_sizes = {sizes} need q == k, q and v divisible by num_heads = {num_heads}, and a sum within int32"
    return ""


def _zero_hint(hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None, op: Op) -> str:
    if qkv_hidden_sizes and len(qkv_hidden_sizes) == 3 and 0 in qkv_hidden_sizes:
        return f"qkv_hidden_sizes = {list(qkv_hidden_sizes)} contains 0"
    for index, hint in enumerate(hints):
        shape = shape_of(hint)
        if shape is not None and op is Op.MHA and index in MHA_PAST_INPUTS and len(shape) == 4:
            shape = shape[:2] + shape[3:]  # an empty past (P = 0) is a real shape: the first decoding step
        if shape is not None and 0 in shape:
            return f"input {index} shape {shape} has a zero dimension: a zero hint is not proof of an empty run"
    return ""


def _unknown_dimension(hints: Sequence[Hint]) -> str:
    for index, hint in enumerate(hints):
        shape = shape_of(hint)
        if shape is not None and any(dim < 0 for dim in shape):
            return f"input {index} shape {shape} has an unknown dimension (-1): give a maximum"
    return ""


def _required_shapes(hints: Sequence[Hint], required: Sequence[int], optional: Sequence[int]) -> str:
    for index in required:
        if hint_at(hints, index) is MISSING:
            return f"required input {index} is missing"
        if shape_of(hint_at(hints, index)) is None:
            return f"required input {index} has no known shape"
    for index in optional:
        if hint_at(hints, index) is HintState.NO_SHAPE:
            return f"optional input {index} is present without a known shape"
    return ""


MHA_PAST_INPUTS = (6, 7)


def problem_from_hints(
    op: Op, element_size: int, num_heads: int, hints: Sequence[Hint], qkv_hidden_sizes: Sequence[int] | None = None,
    *, has_present: bool = False, unidirectional: bool = False,
) -> tuple[Problem | None, str]:
    """Return (problem, '') from positional shapes, or (None, reason) when they do not suffice.
    Builder errors propagate as typed errors. `has_present` and `unidirectional` describe a
    MultiHeadAttention node (its present outputs and its attribute)."""
    if op is Op.MHA:
        missing = _required_shapes(hints, (0,), range(1, 10))
        if missing:
            return None, missing
        shapes = [shape_of(hint_at(hints, i)) for i in range(10)]
        return build_mha_problem(*shapes, element_size=element_size, num_heads=num_heads, has_present=has_present,
                                 unidirectional=unidirectional), ""
    if op is Op.PA:
        missing = _required_shapes(hints, range(5), (5,))
        if missing:
            return None, missing
        shapes = [shape_of(hint_at(hints, i)) for i in range(6)]
        problem = build_pa_problem(*shapes[:5], element_size=element_size, num_heads=num_heads,
                                   qkv_hidden_sizes=qkv_hidden_sizes or None, attention_bias=shapes[5])
        return problem, ""
    missing = _required_shapes(hints, (0, 4, 5), (1, 2, 3, 6))
    if missing:
        return None, missing
    query = shape_of(hint_at(hints, 0))
    has_key, has_value = hint_at(hints, 1) is not MISSING, hint_at(hints, 2) is not MISSING
    if (len(query) == 4 and (has_key or has_value)) or (len(query) == 2 and not (has_key and has_value)) \
            or len(query) not in (2, 4):
        return None, f"query rank {len(query)} does not match the presence of key ({has_key}) and value ({has_value})"
    shapes = [shape_of(hint_at(hints, i)) for i in range(7)]
    problem = build_pmha_problem(*shapes, element_size=element_size, num_heads=num_heads)
    return problem, ""


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
    exact_heads = op is Op.PA and bool(qkv_hidden_sizes) and len(qkv_hidden_sizes) == 3
    domain = HeadDomain.EXACT if exact_heads else HeadDomain.UPPER_BOUND
    if domain is HeadDomain.EXACT:
        verdicts = tuple(reachability(problem, config, domain))
    backends = [v.backend for v in verdicts if v.reachable]
    try:
        agg = aggregate(problem, backends, bounds=True)
    except WorkspaceError as error:
        return _from_error(op, error, problem=problem, head_domain=domain, reachability=verdicts)
    failures = runtime_failure_note(problem, config, backends)
    note = (mha_estimate_note(problem, config, backends) if op is Op.MHA
            else f"{failures[:1].upper()}{failures[1:]}." if failures else "")
    return _ok(Classification.SAFE_BOUND, problem, agg, head_domain=domain, reachability=verdicts, note=note)


def runtime_failure_note(p: Any, config: RuntimeConfig, backends: Sequence[Backend]) -> str:
    """Return which run-time failures shapes within the estimate's maxima may hit ('' when none can)."""
    kinds = possible_failures(p, config, backends)
    if not kinds:
        return ""
    return (f"shapes within these maxima may make ORT fail at run time on a route it keeps ({', '.join(kinds)}; "
            "`attnws ort-failures` says when; `attnws counterexamples --kind runtime-failure` finds such a shape or "
            "proves none exists)")


def mha_estimate_note(p: Any, config: RuntimeConfig, backends: Sequence[Backend]) -> str:
    """Return what a MultiHeadAttention bound leaves out, and the run-time failures its range holds."""
    notes = ["The bound covers ORT's workspace allocation; the present key/value outputs are not workspace"]
    if Backend.FLASH in backends:
        notes.append("Flash also allocates its softmax LSE (4 * B * N * S bytes) and, when it splits the key/value "
                     "sequence, its accumulators separately: not covered")
    if Backend.CUDNN in backends:
        notes.append(f"cuDNN's frontend allocates its own workspace: not covered (cuDNN's rules are those of "
                     f"{CUDNN_ASSUMED})")
    failures = runtime_failure_note(p, config, backends)
    return "; ".join(notes + [failures] * bool(failures)) + "."


def _ok(classification: Classification, problem: Problem, agg: Aggregate, **extra: Any) -> Estimate:
    return Estimate(
        problem.op, classification, problem=problem, routes=agg.routes,
        projection_bytes=agg.projection_bytes, attention_workspace_offset_bytes=agg.attention_workspace_offset_bytes,
        attention_workspace_bytes=agg.attention_workspace_bytes, total_workspace_bytes=agg.total_workspace_bytes,
        **extra,
    )


def estimate_geometry(g: Geometry, config: RuntimeConfig | None = None) -> Estimate:
    """Return the safe-bound estimate for a geometry read as maxima, exactly as ORT reads shapes."""
    try:
        hints = geometry_hints(g)
    except WorkspaceError as error:
        return _from_error(g.op, error)
    return estimate_from_hints(g.op, g.element_size, g.heads, hints, config, g.qkv_hidden_sizes,
                               has_present=g.with_present, unidirectional=g.unidirectional)


def runtime_problem(g: Geometry, d: Any = CONCRETE) -> Problem:
    """Return the validated problem for a geometry taken as the concrete runtime shapes (ORT's
    positional input shapes through the builder; the solver passes symbolic dimensions and its
    domain, under which the builder's checks become obligations instead of errors)."""
    shapes = [shape_of(h) for h in geometry_hints(g)]
    if g.op is Op.MHA:
        return build_mha_problem(*shapes, element_size=g.element_size, num_heads=g.heads,
                                 has_present=g.with_present, unidirectional=g.unidirectional, d=d)
    if g.op is Op.PA:
        return build_pa_problem(*shapes[:5], element_size=g.element_size, num_heads=g.heads,
                                qkv_hidden_sizes=g.qkv_hidden_sizes, attention_bias=shapes[5], d=d)
    return build_pmha_problem(*shapes, element_size=g.element_size, num_heads=g.heads, d=d)


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
        routes = tuple(recipe(problem, b, trt_runner_available=True) for b in outcome.backends)
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
    ops = {"PackedAttention": Op.PA, "PackedMultiHeadAttention": Op.PMHA, "MultiHeadAttention": Op.MHA}
    if op_type not in ops:
        return unavailable(Op.PA, f"op type {op_type!r} is not PackedAttention, PackedMultiHeadAttention "
                                  "or MultiHeadAttention")
    op = ops[op_type]
    if element_type not in ELEMENT_TYPES:
        return unavailable(op, f"input 0 element type {element_type!r} is not float16 or float")
    if "num_heads" not in attributes:
        return unavailable(op, "the required attribute num_heads is missing")
    return estimate_from_hints(op, ELEMENT_TYPES[element_type], attributes["num_heads"], hints, config,
                               attributes.get("qkv_hidden_sizes"), has_present=has_present,
                               unidirectional=attributes.get("unidirectional", 0) == 1)
