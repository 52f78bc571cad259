"""The series `attnws plot` draws: workspace bytes along one swept dimension of a target.

Pure computation, no drawing: the spec gives, at every swept value x (the other dimensions held at
their maximum or at the values given), each backend's recipe root where the recipe exists, the
backend(s) dispatch picks and the runtime root ORT allocates (`estimate_exact`); ORT's AOT estimate
at the target's maximum geometry; and, from the solver, the tight policy's root and the proven
maximum over the whole target (when PROVED) and the replayed non-monotonic pairs along the line.
Bytes throughout; None where a quantity does not exist (no recipe, a shape the spec rejects, an
undecided proof).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from attnws.spec.aggregate import root_layout
from attnws.spec.errors import UsageError, WorkspaceError
from attnws.spec.estimate import estimate_exact, estimate_geometry, runtime_problem
from attnws.spec.options import TrtRunner
from attnws.spec.problem import Backend, Op, family_backends
from attnws.spec.recipe import recipe
from attnws.spec.target import DimRange, Target

SWEEPS = {"seq": "seq", "batch": "batch", "tokens": "tokens", "head-size": "head_size", "kv-seq": "kv_seq",
          "past": "past"}
# What each family lacks: no token count or GEMM k for MultiHeadAttention, no L or P for the packed ops.
FOREIGN = {Op.MHA: ("tokens", "input_hidden"), Op.PA: ("kv_seq", "past"), Op.PMHA: ("kv_seq", "past")}
# Dimensions --at may hold, by their flag spelling (the namespace / geometry name as value).
HELD = {"batch": "batch", "seq": "seq", "tokens": "tokens", "heads": "heads", "head-size": "head_size",
        "v-head-size": "v_head_size", "input-hidden": "input_hidden", "kv-seq": "kv_seq", "past": "past"}
SYMBOLS = {"batch": "B", "seq": "S", "tokens": "T", "heads": "N", "head_size": "H", "v_head_size": "Hv",
           "input_hidden": "K", "kv_seq": "L", "past": "P"}
MAX_POINTS = 2000  # points drawn at most (plus the threshold points either side of a change)
DENSE_LIMIT = 4096  # ranges up to this many values are evaluated at every integer


@dataclass(frozen=True)
class Point:
    """The spec at one swept value: runtime root (None when the spec rejects the shape), the
    backends dispatch picks, and each backend's recipe root (None where it has no recipe)."""

    x: int
    runtime: int | None
    dispatched: tuple[str, ...]
    recipes: dict[str, int | None] = field(default_factory=dict)

    @property
    def key(self) -> tuple[Any, ...]:
        return self.dispatched, self.runtime is None


@dataclass(frozen=True)
class Series:
    """Everything one picture shows (see the module docstring); `as_dict` is `attnws plot --json`."""

    target: str
    configuration: str
    sweep: str
    held: dict[str, Any]
    points: tuple[Point, ...]
    estimate_bytes: int | None
    tight_bytes: int | None
    tight_verdict: str | None
    max_bytes: int | None
    max_verdict: str | None
    pairs: tuple[dict[str, Any], ...]
    backends: tuple[Backend, ...] = ()
    op: str = ""

    @property
    def estimator(self) -> str:
        """Whose AOT estimate the picture shows: ORT's, or attnws's own for MultiHeadAttention."""
        return "attnws's" if self.op == "mha" else "ORT's"

    @property
    def x(self) -> list[int]:
        return [p.x for p in self.points]

    @property
    def runtime(self) -> list[int | None]:
        return [p.runtime for p in self.points]

    def drops(self) -> list[tuple[int, int]]:
        """Return (x, x') for each consecutive pair of points where the runtime falls as x grows."""
        out = []
        for a, b in zip(self.points, self.points[1:]):
            if a.runtime is not None and b.runtime is not None and b.runtime < a.runtime:
                out.append((a.x, b.x))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "configuration": self.configuration, "sweep": self.sweep, "held": self.held,
            "x": self.x,
            "series": {
                "runtime_bytes": self.runtime,
                "dispatched": [list(p.dispatched) for p in self.points],
                "recipe_bytes": {b.value: [p.recipes.get(b.value) for p in self.points] for b in self.backends},
                "ort_estimate_bytes": self.estimate_bytes,
                "tight_bound_bytes": self.tight_bytes, "tight_bound_verdict": self.tight_verdict,
                "proven_max_bytes": self.max_bytes, "proven_max_verdict": self.max_verdict,
            },
            "drops": [list(d) for d in self.drops()],
            "pairs": list(self.pairs),
        }


def parse_at(pairs: list[str], sweep: str, target: Target) -> dict[str, int]:
    """Return the --at NAME=VALUE values by geometry name; each a dimension of the target, not the
    swept one, given once, an integer inside the target's range."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--at {pair!r}: expected NAME=VALUE, NAME one of {', '.join(HELD)}")
        if name not in HELD:
            raise UsageError(f"--at {name}: not a dimension a plot holds; known: {', '.join(HELD)}")
        dim = HELD[name]
        if dim in FOREIGN[target.op]:
            raise UsageError(f"--at {name}: {target.op.onnx_name} has no such dimension")
        if dim == SWEEPS[sweep]:
            raise UsageError(f"--at {name}: that is the swept dimension (--sweep {sweep}); it cannot also be held")
        if dim in out:
            raise UsageError(f"--at {name} is given twice")
        try:
            value = int(raw.strip())
        except ValueError:
            raise UsageError(f"--at {pair!r}: {raw!r} is not an integer") from None
        box = box_of(target, dim)
        if box is not None and value not in box:
            raise UsageError(f"--at {name}={value}: outside the target's range {box}")
        if box is None and value < 0:
            raise UsageError(f"--at {name}={value}: must be non-negative")
        out[dim] = value
    return out


def box_of(target: Target, dim: str) -> DimRange | None:
    """Return the target's declared range of a dimension (None: tokens 1..B*S, Hv = H, K = N*H)."""
    return getattr(target, dim)


def held_values(target: Target, sweep_dim: str, at: dict[str, int]) -> dict[str, int | None]:
    """Return the held dimensions: --at values, else each declared range's maximum (None where the
    dimension follows the others: tokens B*S, Hv = H, K = N*H)."""
    held: dict[str, int | None] = {}
    for dim in ("batch", "seq", "heads", "head_size", "v_head_size", "tokens", "input_hidden", "kv_seq", "past"):
        if dim == sweep_dim or dim in FOREIGN[target.op]:
            continue
        box = box_of(target, dim)
        held[dim] = at.get(dim, None if box is None else box.hi)
    return held


def sweep_range(target: Target, sweep_dim: str, held: dict[str, int | None]) -> DimRange:
    """Return the swept range: the target's (tokens without a declared range: 1..B*S; L without
    one: 1..S)."""
    box = box_of(target, sweep_dim)
    if box is not None:
        return box
    if sweep_dim == "kv_seq":
        return DimRange(1, max(1, held["seq"]))
    return DimRange(1, max(1, held["batch"] * held["seq"]))


def _dims_at(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int], x: int) -> dict[str, Any]:
    dims = {**held, sweep_dim: x}
    if sweep_dim != "tokens" and "tokens" not in at and target.tokens is not None:
        dims["tokens"] = min(target.tokens.hi, dims["batch"] * dims["seq"])  # held at the largest valid T
    return {k: v for k, v in dims.items() if v is not None}


def point(target: Target, dims: dict[str, Any], x: int, with_recipes: bool = True) -> Point:
    """Return the spec at one shape: runtime root, dispatched backends and each backend's recipe root."""
    exact = estimate_exact(target.geometry(**dims), target.config)
    runtime = exact.total_workspace_bytes if exact.ok else None
    dispatched = tuple(b.value for b in exact.backends) if exact.ok else ()
    recipes: dict[str, int | None] = {}
    if with_recipes:
        try:
            problem = runtime_problem(target.geometry(**dims))
        except WorkspaceError:
            problem = None
        runner = target.config.trt_runner is not TrtRunner.UNAVAILABLE
        for backend in family_backends(target.op):
            try:
                r = recipe(problem, backend, trt_runner_available=runner) if problem is not None else None
                recipes[backend.value] = None if r is None else root_layout(r.projection_bytes, r.attention_workspace_bytes)[1]
            except WorkspaceError:
                recipes[backend.value] = None
    return Point(x, runtime, dispatched, recipes)


def sample_xs(lo: int, hi: int, count: int) -> list[int]:
    """Return `count` integers spread evenly over lo..hi, both ends included (fewer when the range is)."""
    if hi - lo + 1 <= count:
        return list(range(lo, hi + 1))
    return sorted({lo + round(i * (hi - lo) / (count - 1)) for i in range(count)})


def sweep_points(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int],
                 max_points: int = MAX_POINTS) -> list[Point]:
    """Return the points drawn: every value when the range has at most `max_points`; else values
    spread evenly plus both sides of every change of dispatch, of validity, and of every drop of the
    runtime (found at every integer for ranges up to DENSE_LIMIT, by bisection beyond)."""
    span = sweep_range(target, sweep_dim, held)
    lo, hi = span.lo, span.hi

    def light(x: int) -> Point:
        return point(target, _dims_at(target, sweep_dim, held, at, x), x, with_recipes=False)

    if hi - lo + 1 <= max_points:
        keep = set(range(lo, hi + 1))
    elif hi - lo + 1 <= DENSE_LIMIT:
        every = [light(x) for x in range(lo, hi + 1)]
        changes = set()
        for a, b in zip(every, every[1:]):
            if a.key != b.key or (a.runtime is not None and b.runtime is not None and b.runtime < a.runtime):
                changes |= {a.x, b.x}
        keep = changes | set(sample_xs(lo, hi, max(2, max_points - len(changes))))
    else:
        xs = sample_xs(lo, hi, max_points)
        light_points = {x: light(x) for x in xs}
        changes = set()
        for a, b in zip(xs, xs[1:]):
            if light_points[a].key == light_points[b].key:
                continue
            left, right = a, b  # the first value with b's key lies in (left, right]
            while right - left > 1:
                middle = (left + right) // 2
                if light(middle).key == light_points[b].key:
                    right = middle
                else:
                    left = middle
            changes |= {right - 1, right}
        keep = set(xs) | changes
    return [point(target, _dims_at(target, sweep_dim, held, at, x), x) for x in sorted(keep)]


def line_target(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int]) -> Target:
    """Return the target restricted to the plotted line: every held dimension a point, the swept
    one its range (tokens held implicitly at B*S stay the solver's 1..B*S)."""
    changes: dict[str, Any] = {}
    for dim, value in held.items():
        if value is None:
            continue
        if dim == "tokens" and "tokens" not in at:
            continue
        changes[dim] = DimRange(value, value)
    if sweep_dim == "tokens" and target.tokens is None:
        changes["tokens"] = sweep_range(target, sweep_dim, held)
    return replace(target, **changes)


def configuration_text(target: Target, sweep_dim: str, held: dict[str, int | None], span: DimRange) -> str:
    """Return the target's configuration in one line: op, dtype, device, options and the line's dimensions."""
    config = target.config
    dtype = "fp16" if target.element_size == 2 else "fp32"
    dims = [f"{SYMBOLS[sweep_dim]} = {span.lo}..{span.hi}"]
    dims += [f"{SYMBOLS[d]} = {v}" for d, v in held.items() if v is not None]
    if held.get("tokens", 0) is None and sweep_dim != "tokens":
        dims.append("T = B*S")
    parts = [f"{target.op.onnx_name} {dtype} sm{config.device.sm}", ", ".join(dims)]
    if config.options.sdpa_kernel:
        parts.append(f"sdpa_kernel {config.options.sdpa_kernel}")
    if target.env:
        parts.append(" ".join(f"{k}={v}" for k, v in target.env))
    if not config.build.flash:
        parts.append("no Flash build")
    if not config.build.mea:
        parts.append("no MEA build")
    if not config.build.trt:
        parts.append("no TRT build")
    if config.trt_runner is not TrtRunner.AUTO:
        parts.append(f"TRT runner {config.trt_runner.value}")
    return "; ".join(parts)


def _pairs_along(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int]) -> list[dict[str, Any]]:
    """Return the solver's minimal non-monotonic pairs (one per backend transition) of the line's
    target that differ along the swept dimension, replayed on the line: `x`, `runtime_bytes` and
    `backends` are the line's at the pair's two swept values (where the tokens follow B*S the
    solver's shapes may take fewer tokens; `smaller` / `larger` and `solver_runtime_bytes` are its
    own). A pair whose drop does not hold on the line is left out."""
    from attnws.solver.counterexamples import nonmonotonic_pairs
    from attnws.solver.gateway import Limits
    from attnws.solver.session import Session

    line = line_target(target, sweep_dim, held, at)
    pairs, _status = nonmonotonic_pairs(line, Session(f"{target.name}/plot", Limits()))
    out = []
    for pair in pairs:
        if sweep_dim not in pair.differ or not set(pair.differ) <= {sweep_dim, "tokens"}:
            continue
        xs = [pair.smaller.dims[sweep_dim], pair.larger.dims[sweep_dim]]
        p, q = (point(target, _dims_at(target, sweep_dim, held, at, x), x, with_recipes=False) for x in xs)
        if p.runtime is None or q.runtime is None or q.runtime >= p.runtime:
            continue
        out.append({"x": xs, "runtime_bytes": [p.runtime, q.runtime], "backends": [list(p.dispatched), list(q.dispatched)],
                    "discontinuity": list(pair.gates), "smaller": pair.smaller.dims, "larger": pair.larger.dims,
                    "solver_runtime_bytes": [pair.smaller.runtime_bytes, pair.larger.runtime_bytes]})
    return out


def proven_values(target: Target) -> tuple[int | None, str, int | None, str]:
    """Return (tight policy root, its verdict, proven maximum runtime root, its verdict) over the
    whole target; the bytes are None unless the verdict is PROVED."""
    from attnws.solver.gateway import Verdict
    from attnws.solver.results import context
    from attnws.solver.theorems import THEOREMS
    from attnws.solver.tight import tight_policy

    tight = tight_policy(target)
    tight_bytes = tight.tight_total_bytes if tight.proof.verdict is Verdict.PROVED else None
    result = THEOREMS["tightness"](context(target))
    max_bytes = result.details.get("max_runtime_bytes") if result.verdict is Verdict.PROVED else None
    return tight_bytes, tight.proof.verdict.value, max_bytes, result.verdict.value


def compute_series(target: Target, sweep: str, at: dict[str, int] | None = None, *, proofs: bool = True,
                   max_points: int = MAX_POINTS, progress: Callable[[str], None] = lambda _: None) -> Series:
    """Return the series of `attnws plot` for the target swept over `sweep` (a key of SWEEPS), the
    other dimensions at `at` or their maximum; `proofs=False` skips the solver (no tight bound,
    proven maximum or pairs)."""
    if sweep not in SWEEPS:
        raise UsageError(f"--sweep {sweep}: expected one of {', '.join(SWEEPS)}")
    at = dict(at or {})
    sweep_dim = SWEEPS[sweep]
    if sweep_dim in FOREIGN[target.op]:
        raise UsageError(f"--sweep {sweep}: {target.op.onnx_name} has no such dimension")
    if sweep_dim == "past" and not target.with_past:
        raise UsageError("--sweep past: the target has no past_key / past_value (with_past)")
    held = held_values(target, sweep_dim, at)
    span = sweep_range(target, sweep_dim, held)
    progress(f"plot: evaluating the spec over {sweep} {span}")
    points = sweep_points(target, sweep_dim, held, at, max_points)
    estimate = estimate_geometry(target.max_geometry(), target.config)
    tight_bytes = max_bytes = None
    tight_verdict = max_verdict = None
    pairs: list[dict[str, Any]] = []
    if proofs:
        progress(f"plot: proving the tight bound and the maximum of {target.name}")
        tight_bytes, tight_verdict, max_bytes, max_verdict = proven_values(target)
        progress(f"plot: searching non-monotonic pairs along {sweep}")
        pairs = _pairs_along(target, sweep_dim, held, at)
    return Series(
        target=target.name, configuration=configuration_text(target, sweep_dim, held, span), sweep=sweep,
        held={k: v for k, v in held.items() if v is not None}, points=tuple(points),
        estimate_bytes=estimate.total_workspace_bytes if estimate.ok else None,
        tight_bytes=tight_bytes, tight_verdict=tight_verdict, max_bytes=max_bytes, max_verdict=max_verdict,
        pairs=tuple(pairs), backends=family_backends(target.op), op=target.op.value,
    )
