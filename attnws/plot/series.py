"""The series `attnws plot` draws: workspace bytes along one swept dimension of a target.

Pure computation, no drawing: the spec gives, at every swept value x (the other dimensions held at
their maximum or at the values given), each backend's recipe root where the recipe exists, the
backend(s) dispatch picks and the runtime root ORT allocates (`estimate_exact`); ORT's AOT estimate
at the target's maximum geometry; and, from the solver, the tight policy's root and the proven
maximum over the whole target (when PROVED) and the replayed non-monotonic pairs along the line.
Bytes throughout; None where a quantity does not exist (no recipe, a shape the spec rejects, an
undecided proof).

Every plotted shape lies inside the target's box: `--at` values are range-checked, a dimension the
target leaves implicit (Hv = H, K = N*H, L = S, P = 0, 1 <= T <= B*S) may only be held at what its
relation gives (T anywhere in 1..B*S), and a batch or seq sweep starts where B*S holds the tokens.
A backend is drawn where dispatch picks it on the line or ORT's estimate counts it reachable;
the others are listed with the spec's reason (`not_drawn`). `compare_series` overlays the same
line under several runtime configurations (`--compare KEY=V1,V2`).

The tight policy is the proven maximum over the target (`tight_policy`'s method "proven maximum",
the `tightness` search; the proven maximum is then that same value) or, when the maximum is
undecided, the route-dropping bound (then the `tightness` theorem is asked on its own). Each memory
pattern of the target (`Target.patterns`, `--pattern`) gets its proven maximum over its own box
(`pattern_maximum`, PROVED only) and the part of the line inside that box (`x_range`: the swept
values whose shape lies in the pattern's box; None when the line does not meet it).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable

from attnws.spec.command_line import check_sdpa_kernel, check_sm, name_value, parse_env, parse_integer
from attnws.spec.aggregate import root_layout
from attnws.spec.errors import InvalidArgument, UsageError, WorkspaceError
from attnws.spec.estimate import estimate_exact, estimate_geometry, runtime_problem
from attnws.spec.options import RuntimeConfig, TrtRunner
from attnws.spec.reachability import RouteReachability
from attnws.spec.problem import Backend, Op
from attnws.spec.families import DIMENSIONS, family_backends, op_dimensions
from attnws.spec.recipe import recipe
from attnws.spec.target import DimRange, Pattern, Target

SWEEPS = {"seq": "seq", "batch": "batch", "tokens": "tokens", "head-size": "head_size", "kv-seq": "kv_seq",
          "past": "past"}
# What each operator lacks (no token count or GEMM k for MultiHeadAttention, no L or P for the packed
# operators): the dimensions only other operators have.
FOREIGN = {op: tuple(d for d in DIMENSIONS if d not in op_dimensions(op)) for op in Op}
# Dimensions --at may hold, by their flag spelling (the namespace / geometry name as value).
HELD = {"batch": "batch", "seq": "seq", "tokens": "tokens", "heads": "heads", "head-size": "head_size",
        "v-head-size": "v_head_size", "input-hidden": "input_hidden", "kv-seq": "kv_seq", "past": "past"}
FLAGS = {dim: name for name, dim in HELD.items()}
SYMBOLS = {"batch": "B", "seq": "S", "tokens": "T", "heads": "N", "head_size": "H", "v_head_size": "Hv",
           "input_hidden": "K", "kv_seq": "L", "past": "P"}
MAX_POINTS = 2000  # points drawn at most (plus the threshold points either side of a change)
DENSE_LIMIT = 4096  # ranges up to this many values are evaluated at every integer
# --compare KEY=V1,V2,...: the runtime configuration keys (a target file's spelling), at most this many values.
COMPARE_KEYS = ("sm", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_build", "trt_runner")
MAX_COMPARED = 6
PROVEN_MAXIMUM = "proven maximum"  # tight_policy's method when its root is the proven maximum
_BOOLEANS = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}


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
class PatternLine:
    """One memory pattern on the line: its box (dimension -> "lo..hi"), the verdict of its
    `pattern_maximum` (None without proofs), the proven maximum, its witness shape and the ratio
    estimate / maximum (each None unless PROVED), why it is not PROVED (`reason`), and the swept
    values inside its box on this line (`x_range`, lo and hi; None: the line does not meet it)."""

    name: str
    dims: dict[str, str]
    x_range: tuple[int, int] | None
    verdict: str | None = None
    max_bytes: int | None = None
    ratio: float | None = None
    witness: dict[str, Any] | None = None
    reason: str | None = None

    @property
    def box(self) -> str:
        """The pattern's box in symbols: "S = 1", "P = 0..4095"."""
        parts = []
        for dim, text in self.dims.items():
            lo, _, hi = text.partition("..")
            parts.append(f"{SYMBOLS[dim]} = {lo if lo == hi else text}")
        return ", ".join(parts)

    @property
    def unproved(self) -> str:
        """Why the pattern has no proven maximum: undecided, or its verdict and reason."""
        if self.verdict is None:
            return "maximum not proved (no proofs)"
        why = f": {self.reason}" if self.reason else ""
        return f"maximum undecided{why}" if self.verdict == "UNKNOWN" else f"no proven maximum ({self.verdict}{why})"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dims": self.dims, "verdict": self.verdict, "max_runtime_bytes": self.max_bytes,
                "ratio": self.ratio, "witness": self.witness, "reason": self.reason,
                "x_range": None if self.x_range is None else list(self.x_range)}


@dataclass(frozen=True)
class Proven:
    """What the solver proves over the whole target: the tight policy's root (None unless its
    proof is PROVED), its verdict, how it was found (`method`: "proven maximum", "route-dropping
    bound", or "the estimate" when nothing smaller is proved) and the shape that needs it; the
    proven maximum runtime root (None unless PROVED) and its verdict."""

    tight_bytes: int | None
    tight_verdict: str
    tight_method: str
    tight_witness: dict[str, Any] | None
    max_bytes: int | None
    max_verdict: str


@dataclass(frozen=True)
class Series:
    """Everything one picture shows (see the module docstring); `as_dict` is `attnws plot --json`.
    `drawn` names the backends whose recipe is drawn; `not_drawn` gives each other backend of the
    operator with why it is left out (the spec's reachability reason). `tight_method` says how the
    tight policy's root was found (see `Proven`); `patterns` are the target's memory patterns on
    this line. Every proof field is None for a series computed without proofs."""

    target: str
    configuration: str
    sweep: str
    held: dict[str, Any]
    points: tuple[Point, ...]
    estimate_bytes: int | None
    tight_bytes: int | None = None
    tight_verdict: str | None = None
    max_bytes: int | None = None
    max_verdict: str | None = None
    pairs: tuple[dict[str, Any], ...] = ()
    backends: tuple[Backend, ...] = ()
    op: str = ""
    drawn: tuple[str, ...] = ()
    not_drawn: tuple[tuple[str, str], ...] = ()
    tight_method: str | None = None
    tight_witness: dict[str, Any] | None = None
    patterns: tuple[PatternLine, ...] = ()

    @property
    def tight_is_maximum(self) -> bool:
        """Whether the tight policy's root is the proven maximum (one line in the picture)."""
        return self.tight_method == PROVEN_MAXIMUM and self.tight_bytes is not None

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
                "tight_method": self.tight_method, "tight_witness": self.tight_witness,
                "proven_max_bytes": self.max_bytes, "proven_max_verdict": self.max_verdict,
            },
            "drawn_backends": list(self.drawn),
            "not_drawn": dict(self.not_drawn),
            "drops": [list(d) for d in self.drops()],
            "pairs": list(self.pairs),
            "patterns": [p.as_dict() for p in self.patterns],
        }


@dataclass(frozen=True)
class Comparison:
    """One line under several runtime configurations (`--compare KEY=V1,V2`): each configuration's
    label and series, in the order given."""

    key: str
    labels: tuple[str, ...]
    series: tuple[Series, ...]

    def as_dict(self) -> dict[str, Any]:
        first = self.series[0]
        return {"target": first.target, "sweep": first.sweep, "held": first.held, "compare": self.key,
                "configurations": [{"label": label, **s.as_dict()} for label, s in zip(self.labels, self.series)]}


def parse_at(pairs: list[str], sweep: str, target: Target) -> dict[str, int]:
    """Return the --at NAME=VALUE values by geometry name; each a dimension of the target, not the
    swept one, given once, an integer inside the target's range. A dimension the target leaves
    implicit may only be held where its relation puts it (Hv = H, K = N*H, L = S, P = 0: such a
    value is dropped, the relation holds it) and T anywhere in 1..B*S."""
    out: dict[str, int] = {}
    for pair in pairs:
        name, raw = name_value(pair, "--at", f"NAME=VALUE, NAME one of {', '.join(HELD)}")
        if name not in HELD:
            raise UsageError(f"--at {name}: not a dimension a plot holds; known: {', '.join(HELD)}")
        dim = HELD[name]
        if dim in FOREIGN[target.op]:
            raise UsageError(f"--at {name}: {target.op.onnx_name} has no such dimension")
        if dim == SWEEPS.get(sweep):
            raise UsageError(f"--at {name}: that is the swept dimension (--sweep {sweep}); it cannot also be held")
        if dim in out:
            raise UsageError(f"--at {name} is given twice")
        value = parse_integer(raw.strip())
        if value is None:
            raise UsageError(f"--at {pair!r}: {raw!r} is not a non-negative integer (ASCII digits)")
        box = box_of(target, dim)
        if box is not None and value not in box:
            raise UsageError(f"--at {name}={value}: outside the target's range {box}")
        out[dim] = value
    return _check_relations(target, SWEEPS.get(sweep), out)


def _check_relations(target: Target, sweep_dim: str | None, at: dict[str, int]) -> dict[str, int]:
    """Return `at` without the implicit dimensions held where their relation puts them; raise a
    usage error for one held elsewhere, or for tokens outside 1..B*S on the line."""
    out = dict(at)

    def on_line(dim: str) -> int | None:  # the value a declared dimension takes on the line (None: swept)
        return None if dim == sweep_dim else out.get(dim, box_of(target, dim).hi)

    ties = []
    if target.v_head_size is None:
        ties.append(("v_head_size", "Hv = H", on_line("head_size")))
    own = op_dimensions(target.op)
    if target.input_hidden is None and "input_hidden" in own:
        h = on_line("head_size")
        ties.append(("input_hidden", "K = N*H", None if h is None else on_line("heads") * h))
    if target.kv_seq is None and "kv_seq" in own:
        ties.append(("kv_seq", "L = S", on_line("seq")))
    if target.past is None and "past" in own:
        ties.append(("past", "P = 0", 0))
    for dim, relation, value in ties:
        if dim not in out:
            continue
        given, flag = out.pop(dim), FLAGS[dim]
        if given == value:
            continue
        why = f"the target declares no {dim} range, so it ties {relation}"
        if value is None:
            raise UsageError(f"--at {flag}={given}: {why}, and the sweep moves it; drop --at {flag}")
        raise UsageError(f"--at {flag}={given}: {why}: {SYMBOLS[dim]} = {value} on this line; drop --at {flag}"
                         + ("" if dim == "past" else " or hold the dimension it follows"))
    if "tokens" in out:
        padded = out.get("batch", target.batch.hi) * out.get("seq", target.seq.hi)
        if not 1 <= out["tokens"] <= padded:
            raise UsageError(f"--at tokens={out['tokens']}: outside 1..B*S = 1..{padded} on this line "
                             "(a packed batch holds at most B*S tokens)")
    return out


def box_of(target: Target, dim: str) -> DimRange | None:
    """Return the target's declared range of a dimension (None: tokens 1..B*S, Hv = H, K = N*H,
    L = S, P = 0)."""
    return getattr(target, dim)


def held_values(target: Target, sweep_dim: str, at: dict[str, int]) -> dict[str, int | None]:
    """Return the held dimensions: --at values, else each declared range's maximum (None where the
    dimension follows the others: Hv = H, K = N*H, L = S, P = 0, and the tokens, which are B*S or,
    for a declared range, min(its maximum, B*S))."""
    held: dict[str, int | None] = {}
    for dim in ("batch", "seq", "heads", "head_size", "v_head_size", "tokens", "input_hidden", "kv_seq", "past"):
        if dim == sweep_dim or dim in FOREIGN[target.op]:
            continue
        box = box_of(target, dim)
        held[dim] = at.get(dim, None if box is None or dim == "tokens" else box.hi)
    return held


def sweep_range(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int]) -> DimRange:
    """Return the swept range inside the target's box: the declared range; tokens at most B*S
    (1..B*S without a declared range); a batch or seq sweep of a packed operator from where B*S
    holds the tokens (the --at value, else the declared range's minimum, else 1). A sweep of L or P
    the target leaves implicit (L = S, P = 0) is refused, as is an empty range."""
    symbol = SYMBOLS[sweep_dim]
    box = box_of(target, sweep_dim)
    if sweep_dim == "kv_seq" and box is None:
        raise UsageError("--sweep kv-seq: the target declares no kv_seq range, so L = S on every shape; "
                         "sweep seq, or declare a kv_seq range (--kv-seq)")
    if sweep_dim == "past" and box is None:
        raise UsageError("--sweep past: the target declares no past range, so P = 0 on every shape; "
                         "declare one (--past N, or \"past\" in the target file)")
    if sweep_dim == "tokens":
        padded = held["batch"] * held["seq"]
        lo, hi = (1, padded) if box is None else (box.lo, min(box.hi, padded))
        if lo > hi:
            raise UsageError(f"--sweep tokens: no token count of the target fits B*S = {padded} on this line")
        return DimRange(lo, hi)
    if "tokens" not in op_dimensions(target.op):
        return box
    least = at.get("tokens", 1 if target.tokens is None else target.tokens.lo)  # the fewest tokens a shape has
    if sweep_dim not in ("batch", "seq"):
        if held["batch"] * held["seq"] < least:
            raise UsageError(f"--sweep {FLAGS[sweep_dim]}: B*S = {held['batch'] * held['seq']} on this line "
                             f"holds no T >= {least} (a packed batch holds at most B*S tokens)")
        return box
    other = held["seq" if sweep_dim == "batch" else "batch"]
    lo = box.lo if least == 0 else None if other == 0 else max(box.lo, -(-least // other))
    if lo is None or lo > box.hi:
        raise UsageError(f"--sweep {sweep_dim}: no {symbol} in {box} gives B*S >= T = {least} with "
                         f"{SYMBOLS['seq' if sweep_dim == 'batch' else 'batch']} = {other} on this line")
    return DimRange(lo, box.hi)


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


def sweep_points(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int], span: DimRange,
                 max_points: int = MAX_POINTS) -> list[Point]:
    """Return the points drawn over `span`: every value when it has at most `max_points`; else values
    spread evenly plus both sides of every change of dispatch, of validity, and of every drop of the
    runtime (found at every integer for ranges up to DENSE_LIMIT, by bisection beyond)."""
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


def line_target(target: Target, sweep_dim: str, held: dict[str, int | None], span: DimRange) -> Target:
    """Return the target restricted to the plotted line: every held dimension a point, the swept
    one its range on the line (tokens that follow B*S keep the target's own rule); without the
    target's memory patterns, whose boxes the line need not contain."""
    changes: dict[str, Any] = {dim: DimRange(value, value) for dim, value in held.items() if value is not None}
    changes[sweep_dim] = span
    return replace(target, patterns=(), **changes)


def configuration_text(target: Target, sweep_dim: str, held: dict[str, int | None], span: DimRange) -> str:
    """Return the target's configuration in one line, "; " between its parts: op and dtype, device,
    the line's dimensions, then each option that differs from ORT's defaults."""
    dtype = "fp16" if target.element_size == 2 else "fp32"
    parts = [f"{target.op.onnx_name} {dtype}", f"sm{target.config.device.sm}",
             line_text(target, sweep_dim, held, span), *options_text(target)]
    return "; ".join(parts)


def line_text(target: Target, sweep_dim: str, held: dict[str, int | None], span: DimRange) -> str:
    """Return the line's dimensions: the swept range, the held values and the implicit relations."""
    dims = [f"{SYMBOLS[sweep_dim]} = {span.lo}..{span.hi}"]
    dims += [f"{SYMBOLS[d]} = {v}" for d, v in held.items() if v is not None]
    own = op_dimensions(target.op)
    if "tokens" in own and sweep_dim != "tokens" and held.get("tokens") is None:
        dims.append("T = B*S" if target.tokens is None else f"T = min({target.tokens.hi}, B*S)")
    if "kv_seq" in own and target.kv_seq is None:
        dims.append("L = S")
    if target.with_past and target.past is None:
        dims.append("P = 0")
    return ", ".join(dims)


def options_text(target: Target) -> list[str]:
    """Return the runtime options that differ from ORT's defaults, one phrase each."""
    config = target.config
    parts = []
    if config.options.sdpa_kernel:
        parts.append(f"sdpa_kernel {config.options.sdpa_kernel}")
    parts += [f"{k}={v}" for k, v in target.env]
    if not config.build.flash:
        parts.append("no Flash build")
    if not config.build.mea:
        parts.append("no MEA build")
    if not config.build.trt:
        parts.append("no TRT build")
    if config.trt_runner is not TrtRunner.AUTO:
        parts.append(f"TRT runner {config.trt_runner.value}")
    return parts


def _pairs_along(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int],
                 span: DimRange) -> list[dict[str, Any]]:
    """Return the solver's minimal non-monotonic pairs (one per backend transition) of the line's
    target that differ along the swept dimension, replayed on the line: `x`, `runtime_bytes` and
    `backends` are the line's at the pair's two swept values (where the tokens follow B*S the
    solver's shapes may take fewer tokens; `smaller` / `larger` and `solver_runtime_bytes` are its
    own). A pair whose drop does not hold on the line is left out."""
    from attnws.solver.counterexamples import nonmonotonic_pairs
    from attnws.solver.gateway import Limits
    from attnws.solver.session import Session

    line = line_target(target, sweep_dim, held, span)
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


def proven_values(target: Target) -> Proven:
    """Return the tight policy and the proven maximum runtime root over the whole target (see
    `Proven`). When the tight policy is the proven maximum, that is the maximum (the same search,
    PROVED); otherwise the `tightness` theorem is asked for it."""
    from attnws.solver.gateway import Verdict
    from attnws.solver.results import context
    from attnws.solver.theorems import THEOREMS
    from attnws.solver.tight import tight_policy

    tight = tight_policy(target)
    proved = tight.proof.verdict is Verdict.PROVED
    tight_bytes = tight.tight_total_bytes if proved else None
    if proved and tight.method == PROVEN_MAXIMUM:
        return Proven(tight_bytes, tight.proof.verdict.value, tight.method, tight.witness, tight_bytes,
                      Verdict.PROVED.value)
    result = THEOREMS["tightness"](context(target))
    max_bytes = result.details.get("max_runtime_bytes") if result.verdict is Verdict.PROVED else None
    return Proven(tight_bytes, tight.proof.verdict.value, tight.method, tight.witness if proved else None,
                  max_bytes, result.verdict.value)


LINE_DIMS = {"batch": lambda g: g.batch, "seq": lambda g: g.seq, "tokens": lambda g: g.t,
             "kv_seq": lambda g: g.l, "past": lambda g: g.past}  # a pattern's dimensions at a shape


def pattern_range(target: Target, pattern: Pattern, sweep_dim: str, held: dict[str, int | None],
                  at: dict[str, int], span: DimRange) -> tuple[int, int] | None:
    """Return the first and last swept value whose shape lies in the pattern's box, or None when
    none does. Every dimension a pattern sets grows with the swept value along the line (the swept
    one, the tokens or L that follow B*S or S, the held ones constant), so those values are one
    interval: from the first x meeting every lower end to the last x within every upper end."""

    def values(x: int) -> list[tuple[int, DimRange]]:
        g = target.geometry(**_dims_at(target, sweep_dim, held, at, x))
        return [(LINE_DIMS[dim](g), r) for dim, r in pattern.dims]

    def first(predicate: Callable[[int], bool]) -> int | None:  # the least x with predicate (monotone) true
        if not predicate(span.hi):
            return None
        lo, hi = span.lo, span.hi
        while lo < hi:
            middle = (lo + hi) // 2
            lo, hi = (lo, middle) if predicate(middle) else (middle + 1, hi)
        return lo

    start = first(lambda x: all(v >= r.lo for v, r in values(x)))
    above = first(lambda x: any(v > r.hi for v, r in values(x)))
    end = span.hi if above is None else above - 1
    if start is None or end < start:
        return None
    return start, end


def pattern_lines(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int], span: DimRange,
                  proofs: bool = True, progress: Callable[[str], None] = lambda _: None) -> tuple[PatternLine, ...]:
    """Return each memory pattern of the target on the line, with its proven maximum when `proofs`."""
    out = []
    for pattern in target.patterns:
        x_range = pattern_range(target, pattern, sweep_dim, held, at, span)
        line = PatternLine(pattern.name, pattern.as_dict(), x_range)
        if proofs:
            from attnws.solver.gateway import Verdict
            from attnws.solver.tight import pattern_maximum

            progress(f"plot: proving the largest workspace of memory pattern {pattern.name}")
            result = pattern_maximum(target, pattern)
            details = result.details
            if result.verdict is Verdict.PROVED:
                line = replace(line, verdict=result.verdict.value, max_bytes=details["max_runtime_bytes"],
                               ratio=details.get("ratio"), witness=details.get("witness"))
            else:
                line = replace(line, verdict=result.verdict.value,
                               reason=result.reason or result.vacuous_because or None)
        out.append(line)
    return tuple(out)


def compute_series(target: Target, sweep: str, at: dict[str, int] | None = None, *, proofs: bool = True,
                   max_points: int = MAX_POINTS, progress: Callable[[str], None] = lambda _: None) -> Series:
    """Return the series of `attnws plot` for the target swept over `sweep` (a key of SWEEPS), the
    other dimensions at `at` (as `parse_at` returns them) or their maximum; `proofs=False` skips the
    solver (no tight policy, proven maximum, pairs or pattern maxima; the patterns' ranges stay)."""
    if sweep not in SWEEPS:
        raise UsageError(f"--sweep {sweep}: expected one of {', '.join(SWEEPS)}")
    at = dict(at or {})
    sweep_dim = SWEEPS[sweep]
    if sweep_dim in FOREIGN[target.op]:
        raise UsageError(f"--sweep {sweep}: {target.op.onnx_name} has no such dimension")
    if sweep_dim == "past" and not target.with_past:
        raise UsageError("--sweep past: the target has no past_key / past_value (with_past)")
    held = held_values(target, sweep_dim, at)
    span = sweep_range(target, sweep_dim, held, at)
    progress(f"plot: evaluating the spec over {sweep} {span}")
    points = sweep_points(target, sweep_dim, held, at, span, max_points)
    estimate = estimate_geometry(target.max_geometry(), target.config)
    proved: dict[str, Any] = {}  # without proofs every proof field stays None
    pairs: list[dict[str, Any]] = []
    if proofs:
        progress(f"plot: proving the tight policy (the maximum) of {target.name}")
        proven = proven_values(target)
        proved = {"tight_bytes": proven.tight_bytes, "tight_verdict": proven.tight_verdict,
                  "tight_method": proven.tight_method, "tight_witness": proven.tight_witness,
                  "max_bytes": proven.max_bytes, "max_verdict": proven.max_verdict}
        progress(f"plot: searching non-monotonic pairs along {sweep}")
        pairs = _pairs_along(target, sweep_dim, held, at, span)
    patterns = pattern_lines(target, sweep_dim, held, at, span, proofs, progress)
    drawn, not_drawn = drawn_backends(target.op, points, estimate.reachability)
    return Series(
        target=target.name, configuration=configuration_text(target, sweep_dim, held, span), sweep=sweep,
        held={k: v for k, v in held.items() if v is not None}, points=tuple(points),
        estimate_bytes=estimate.total_workspace_bytes if estimate.ok else None,
        pairs=tuple(pairs), backends=family_backends(target.op), op=target.op.value, drawn=drawn, not_drawn=not_drawn,
        patterns=patterns, **proved,
    )


def drawn_backends(op: Op, points: list[Point], verdicts: tuple[RouteReachability, ...]
                   ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Return the backends whose recipe is drawn, and each other backend of the operator with why
    not. Drawn: dispatch picks it somewhere on the line, or ORT's estimate counts it reachable (its
    recipe explains the estimate), and it has a recipe somewhere on the line. Left out: the spec's
    reachability reason (fp16 only, no kernel for the device, not built, disabled), or that
    dispatch never picks it here; a backend that is no route of the operator (no recipe anywhere,
    no verdict) is not named."""
    picked = {b for p in points for b in p.dispatched}
    verdict = {v.backend.value: v for v in verdicts}
    drawn: list[str] = []
    not_drawn: list[tuple[str, str]] = []
    for backend in family_backends(op):
        name = backend.value
        has_recipe = any(p.recipes.get(name) is not None for p in points)
        reachable = name in picked or (name in verdict and verdict[name].reachable)
        if reachable and has_recipe:
            drawn.append(name)
        elif reachable:
            not_drawn.append((name, "no recipe at any point of this line"))
        elif name in verdict:
            not_drawn.append((name, verdict[name].reason or "dispatch never picks it"))
        elif has_recipe:
            not_drawn.append((name, "dispatch never picks it on this line"))
    return tuple(drawn), tuple(not_drawn)


def parse_compare(text: str, target: Target) -> tuple[str, tuple[tuple[str, Target], ...]]:
    """Return `--compare KEY=V1,V2,...` as the key and, per value, its label and the target under
    that configuration (the target's other settings kept; an env value NAME=VALUE sets one variable
    over the target's environment). KEY: sm, sdpa_kernel, env, flash_build, mea_build, trt_build,
    trt_runner (dashes accepted); 2 to MAX_COMPARED distinct configurations."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or key not in COMPARE_KEYS:
        raise UsageError(f"--compare {text!r}: expected KEY=V1,V2,... with KEY one of {', '.join(COMPARE_KEYS)} "
                         "(e.g. --compare sm=80,90)")
    values = [v.strip() for v in raw.split(",")]
    if any(not v for v in values) or len(values) < 2:
        raise UsageError(f"--compare {text}: give two or more comma-separated values (e.g. {key}="
                         f"{COMPARE_EXAMPLES[key]})")
    if len(values) > MAX_COMPARED:
        raise UsageError(f"--compare {text}: at most {MAX_COMPARED} configurations fit one picture")
    variants = tuple(configured(target, key, value) for value in values)
    seen: dict[Any, str] = {}
    for value, (_label, variant) in zip(values, variants):
        same = (variant.config, variant.env)
        if same in seen:
            raise UsageError(f"--compare {key}: {seen[same]} and {value} give the same configuration")
        seen[same] = value
    return key, variants


COMPARE_EXAMPLES = {"sm": "80,90", "sdpa_kernel": "0,2",
                    "env": "ORT_DISABLE_FLASH_ATTENTION=0,ORT_DISABLE_FLASH_ATTENTION=1",
                    "flash_build": "on,off", "mea_build": "on,off", "trt_build": "on,off", "trt_runner": "auto,unknown"}


def configured(target: Target, key: str, value: str) -> tuple[str, Target]:
    """Return the label and the target with one runtime setting replaced (see parse_compare)."""
    config = target.config
    settings: dict[str, Any] = {
        "sm": config.device.sm, "sdpa_kernel": config.options.sdpa_kernel, "env": dict(target.env),
        "flash_build": config.build.flash, "mea_build": config.build.mea, "trt_build": config.build.trt,
        "trt_runner": config.trt_runner.value,
    }
    try:
        if key in ("sm", "sdpa_kernel"):
            number = parse_integer(value)
            if number is None:
                raise UsageError(f"{value!r} is not a non-negative integer (ASCII digits)")
            settings[key] = (check_sm if key == "sm" else check_sdpa_kernel)(number)
            label = f"sm{value}" if key == "sm" else f"sdpa_kernel {value}"
        elif key == "env":
            settings["env"].update(parse_env([value]))
            label = value
        elif key == "trt_runner":
            if value not in [r.value for r in TrtRunner]:
                raise UsageError(f"{value!r}: expected one of {', '.join(r.value for r in TrtRunner)}")
            settings[key], label = value, f"TRT runner {value}"
        else:
            if value.lower() not in _BOOLEANS:
                raise UsageError(f"{value!r}: expected on or off")
            settings[key] = _BOOLEANS[value.lower()]
            label = f"{key.split('_')[0]} build {'on' if settings[key] else 'off'}"
        return label, replace(target, config=RuntimeConfig.make(**settings), env=tuple(sorted(settings["env"].items())))
    except (UsageError, InvalidArgument) as error:
        raise UsageError(f"--compare {key}={value}: {error}") from None


def compare_series(key: str, variants: tuple[tuple[str, Target], ...], sweep: str, at: dict[str, int] | None = None,
                   *, proofs: bool = True, progress: Callable[[str], None] = lambda _: None) -> Comparison:
    """Return one line of each configuration (`parse_compare`'s variants), the same dimensions held."""
    series = []
    for label, variant in variants:
        progress(f"plot: {label}")
        series.append(compute_series(variant, sweep, at, proofs=proofs, progress=progress))
    return Comparison(key, tuple(label for label, _ in variants), tuple(series))
