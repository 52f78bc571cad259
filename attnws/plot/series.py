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
relation gives (T anywhere in 1..B*S), a dimension the model fixes (GroupQueryAttention's N, H, Nk
and P) only at its value and is never swept, and a batch or seq sweep starts where B*S holds the
tokens. With a total sequence length T (the key length), S is held at min(its maximum, T) unless
--at holds it, so a T sweep draws S = T up to S's maximum (the prompts); where T must cover the
new tokens (a cache that is not windowed: S <= T), a held S starts a T sweep and a seq sweep
stops at T.
A backend is drawn where dispatch picks it on the line or ORT's estimate counts it reachable;
the others are listed with the spec's reason (`not_drawn`). A point where dispatch picks a route
no recipe sizes (GroupQueryAttention's cuDNN) has no bytes, never 0 B: `no_bytes` gives those runs
with why, as it gives the runs of shapes ORT rejects. `route_changes` are the points where dispatch
switches backend, `drops` where the runtime falls as x grows (Flash's split-KV count among them:
`Point.route` says the split count). `compare_series` overlays the same line under several runtime
configurations (`--compare KEY=V1,V2`).

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
from attnws.spec.devices import MAX_SM_COUNT, default_sm_count
from attnws.spec.dispatch import dispatch
from attnws.spec.errors import InvalidArgument, UsageError, WorkspaceError
from attnws.spec.estimate import estimate_exact, estimate_geometry, runtime_problem
from attnws.spec.options import RuntimeConfig, TrtRunner
from attnws.spec.reachability import RouteReachability
from attnws.spec.problem import Backend, Op
from attnws.spec.families import DIMENSION_LABELS, DIMENSIONS, family_backends, family_of, op_dimensions, op_fields
from attnws.spec.recipe import recipe, unsized_routes
from attnws.spec.hints import Geometry
from attnws.spec.target import PATTERN_DIMS, DimRange, Pattern, Target

SWEEPS = {"seq": "seq", "batch": "batch", "tokens": "tokens", "head-size": "head_size", "kv-seq": "kv_seq",
          "past": "past", "total-seq": "total_seq", "kv-len": "kv_len"}
# What each operator lacks (no token count or GEMM k for MultiHeadAttention, no L or P for the packed
# operators): the dimensions only other operators have.
FOREIGN = {op: tuple(d for d in DIMENSIONS if d not in op_dimensions(op)) for op in Op}
# The dimensions the model fixes (GroupQueryAttention's N, H, Nk and the cache's capacity P): a
# target declares them exact; a plot holds them there and never sweeps them.
FIXED = {op: tuple(op_fields(op).FIXED_DIMENSIONS[op]) for op in Op}
# Dimensions --at may hold, by their flag spelling (the namespace / geometry name as value).
HELD = {"batch": "batch", "seq": "seq", "tokens": "tokens", "heads": "heads", "head-size": "head_size",
        "v-head-size": "v_head_size", "input-hidden": "input_hidden", "kv-seq": "kv_seq", "past": "past",
        "kv-heads": "kv_heads", "total-seq": "total_seq", "kv-len": "kv_len", "block-size": "block_size",
        "max-blocks": "max_blocks"}
FLAGS = {dim: name for name, dim in HELD.items()}
# One short name per dimension, the families' own (T is the packed token count, and GroupQueryAttention's
# total sequence length: no operator has both).
SYMBOLS = dict(DIMENSION_LABELS)
MAX_POINTS = 2000  # points drawn at most (plus the threshold points either side of a change)
DENSE_LIMIT = 4096  # ranges up to this many values are evaluated at every integer
# --compare KEY=V1,V2,...: the runtime configuration keys (a target file's spelling), at most this many values.
COMPARE_KEYS = ("sm", "sm_count", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_build", "trt_runner")
# The keys that change only some backends: compared on an operator without one of them, every
# configuration would draw the same line.
COMPARE_BACKENDS = {"flash_build": ("flash",), "mea_build": ("mea",), "trt_build": ("trt", "trt_cross"),
                    "trt_runner": ("trt", "trt_cross")}
MAX_COMPARED = 6
PROVEN_MAXIMUM = "proven maximum"  # tight_policy's method when its root is the proven maximum
_BOOLEANS = {"on": True, "true": True, "1": True, "yes": True, "off": False, "false": False, "0": False, "no": False}


@dataclass(frozen=True)
class Point:
    """The spec at one swept value: runtime root (None when the spec rejects the shape, its route
    fails, or dispatch picks a route no recipe sizes), the backends dispatch picks (that route
    too), each backend's recipe root (None where it has no recipe), the dispatched route in words
    beyond its backend (`route`: Flash's fast decode and split count; '' for nothing more) and,
    where the runtime is None, why (`missing`)."""

    x: int
    runtime: int | None
    dispatched: tuple[str, ...]
    recipes: dict[str, int | None] = field(default_factory=dict)
    route: str = ""
    missing: str = ""

    @property
    def key(self) -> tuple[Any, ...]:
        """What the line keeps both sides of where it changes: the route (backends and their words)
        and whether the point has bytes."""
        return self.dispatched, self.runtime is None, self.route


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
    proven maximum runtime root (None unless PROVED) and its verdict; and the routes every bound
    leaves out (`left_out`: a route no recipe sizes that some valid shape takes -> why and a
    minimal such shape; empty when none)."""

    tight_bytes: int | None
    tight_verdict: str
    tight_method: str
    tight_witness: dict[str, Any] | None
    max_bytes: int | None
    max_verdict: str
    left_out: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Series:
    """Everything one picture shows (see the module docstring); `as_dict` is `attnws plot --json`.
    `drawn` names the backends whose recipe is drawn; `not_drawn` gives each other backend of the
    operator with why it is left out (the spec's reachability reason). `tight_method` says how the
    tight policy's root was found (see `Proven`); `patterns` are the target's memory patterns on
    this line. `estimate_message` says why ORT's estimate is unavailable (None when it is not);
    `left_out` names the routes the proofs leave out (see `Proven`), `pair_search` how the
    solver's pair search ended. Every proof field is None for a series computed without proofs."""

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
    estimate_message: str | None = None
    left_out: dict[str, Any] | None = None
    pair_search: dict[str, Any] | None = None

    @property
    def tight_is_maximum(self) -> bool:
        """Whether the tight policy's root is the proven maximum (one line in the picture)."""
        return self.tight_method == PROVEN_MAXIMUM and self.tight_bytes is not None

    @property
    def estimator(self) -> str:
        """Whose AOT estimate the picture shows: ORT's, or attnws's own where ORT has none
        (MultiHeadAttention, PagedAttention): the family's `estimate.WHOSE`."""
        return family_of(Op(self.op)).estimate.WHOSE

    @property
    def x(self) -> list[int]:
        return [p.x for p in self.points]

    @property
    def runtime(self) -> list[int | None]:
        return [p.runtime for p in self.points]

    def drops(self) -> list[tuple[int, int]]:
        """Return (x, x') for each consecutive pair of points where the runtime falls as x grows."""
        return [(a.x, b.x) for a, b in self.drop_points()]

    def drop_points(self) -> list[tuple[Point, Point]]:
        """Return each consecutive pair of points where the runtime falls as x grows."""
        return [(a, b) for a, b in zip(self.points, self.points[1:])
                if a.runtime is not None and b.runtime is not None and b.runtime < a.runtime]

    def route_changes(self) -> list[tuple[Point, Point]]:
        """Return each consecutive pair of points, both with a route, where dispatch switches backend."""
        return [(a, b) for a, b in zip(self.points, self.points[1:])
                if a.dispatched and b.dispatched and a.dispatched != b.dispatched]

    def no_bytes(self) -> list[dict[str, Any]]:
        """Return the runs of consecutive points without a runtime: `x` (first and last), the route
        dispatch picks there (`dispatched`: a route no recipe sizes; [] where ORT rejects the shape
        or no route runs) and why (`why`: the first point's reason)."""
        runs: list[dict[str, Any]] = []
        previous: Point | None = None
        for p in self.points:
            if p.runtime is None:
                if previous is not None and previous.runtime is None and runs[-1]["dispatched"] == list(p.dispatched):
                    runs[-1]["x"][1] = p.x
                else:
                    runs.append({"x": [p.x, p.x], "dispatched": list(p.dispatched), "why": p.missing})
            previous = p
        return runs

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "configuration": self.configuration, "sweep": self.sweep, "held": self.held,
            "x": self.x,
            "series": {
                "runtime_bytes": self.runtime,
                "dispatched": [list(p.dispatched) for p in self.points],
                "route_text": [p.route for p in self.points],
                "recipe_bytes": {b.value: [p.recipes.get(b.value) for p in self.points] for b in self.backends},
                "ort_estimate_bytes": self.estimate_bytes, "ort_estimate_unavailable": self.estimate_message,
                "tight_bound_bytes": self.tight_bytes, "tight_bound_verdict": self.tight_verdict,
                "tight_method": self.tight_method, "tight_witness": self.tight_witness,
                "proven_max_bytes": self.max_bytes, "proven_max_verdict": self.max_verdict,
                "left_out": self.left_out,
            },
            "drawn_backends": list(self.drawn),
            "not_drawn": dict(self.not_drawn),
            "drops": [list(d) for d in self.drops()],
            "route_changes": [{"x": [a.x, b.x], "from": list(a.dispatched), "to": list(b.dispatched)}
                              for a, b in self.route_changes()],
            "no_bytes": self.no_bytes(),
            "pairs": list(self.pairs),
            "pair_search": self.pair_search,
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
    swept one, given once, an integer inside the target's range (a dimension the model fixes: its
    value). A dimension the target leaves implicit may only be held where its relation puts it
    (Hv = H, K = N*H, L = S, P = 0: such a value is dropped, the relation holds it), T anywhere in
    1..B*S, and S at most T where the key length covers the new tokens."""
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
    if has_key_length(target) and sweep_dim not in ("seq", "total_seq"):
        total = out.get("total_seq", target.total_seq.hi)
        if key_covers_query(target) and "seq" in out and out["seq"] > total:
            raise UsageError(f"--at seq={out['seq']}: S <= T on a cache that is not windowed (ORT: total_sequence_"
                             f"length must be at least the new tokens), and T = {total} on this line; hold a "
                             "smaller S or a larger T (--at total-seq)")
        if "seq" not in out and total < target.seq.lo:
            why = ("S <= T on a cache that is not windowed" if key_covers_query(target)
                   else "S is held at min(its maximum, T) unless --at seq holds it")
            raise UsageError(f"--at total-seq={total}: below the target's least S = {target.seq.lo} ({why})")
    return out


def has_key_length(target: Target) -> bool:
    """Return whether the target declares a total sequence length T (the key length)."""
    return getattr(target, "total_seq", None) is not None


def key_covers_query(target: Target) -> bool:
    """Return whether every valid shape of the target has S <= T: a total sequence length T over a
    cache that is not windowed, which ORT checks as "total_sequence_length must be at least
    kv_sequence_length"."""
    return has_key_length(target) and not getattr(target, "sliding_window_cache", False)


def seq_follows(target: Target, sweep_dim: str | None, at: dict[str, int]) -> bool:
    """Return whether S follows the swept T on the line, S = min(its maximum, T): a range of S that
    --at does not hold (a windowed cache too, whose prompts are S = T as well)."""
    return sweep_dim == "total_seq" and "seq" not in at and has_key_length(target) and not target.seq.exact


def box_of(target: Target, dim: str) -> DimRange | None:
    """Return the target's declared range of a dimension (None: tokens 1..B*S, Hv = H, K = N*H,
    L = S, P = 0)."""
    return getattr(target, dim)


def held_values(target: Target, sweep_dim: str, at: dict[str, int]) -> dict[str, int | None]:
    """Return the held dimensions: --at values, else each declared range's maximum (None where the
    dimension follows the others: Hv = H, K = N*H, L = S, P = 0, the tokens, which are B*S or,
    for a declared range, min(its maximum, B*S), and S on a T sweep where S <= T: min(its maximum,
    T)); with a total sequence length, S is held at min(its maximum, the held T)."""
    held: dict[str, int | None] = {}
    for dim in op_dimensions(target.op):
        if dim == sweep_dim:
            continue
        box = box_of(target, dim)
        held[dim] = at.get(dim, None if box is None or dim == "tokens" else box.hi)
    if seq_follows(target, sweep_dim, at):
        held["seq"] = None
    elif has_key_length(target) and sweep_dim not in ("seq", "total_seq") and "seq" not in at:
        held["seq"] = min(target.seq.hi, held["total_seq"])
    return held


def sweep_range(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int]) -> DimRange:
    """Return the swept range inside the target's box: the declared range; tokens at most B*S
    (1..B*S without a declared range); a batch or seq sweep of a packed operator from where B*S
    holds the tokens (the --at value, else the declared range's minimum, else 1). A sweep of L or P
    the target leaves implicit (L = S, P = 0) is refused, as is an empty range."""
    symbol = SYMBOLS[sweep_dim]
    box = box_of(target, sweep_dim)
    if key_covers_query(target) and sweep_dim == "seq":
        total = held["total_seq"]
        if box.lo > total:
            raise UsageError(f"--sweep seq: no S in {box} is at most T = {total} on this line (S <= T on a cache that "
                             "is not windowed); hold a larger T (--at total-seq)")
        return DimRange(box.lo, min(box.hi, total))
    if sweep_dim == "total_seq" and (key_covers_query(target) or seq_follows(target, sweep_dim, at)):
        least = at.get("seq", target.seq.lo)  # S follows T from the least S up, or is held
        if least > box.hi:
            raise UsageError(f"--sweep total-seq: no T in {box} covers S = {least} new tokens (S <= T on a cache "
                             "that is not windowed)")
        return DimRange(max(box.lo, least), box.hi)
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
    if seq_follows(target, sweep_dim, at):
        dims["seq"] = min(target.seq.hi, x)  # held at the largest S the key length covers
    if sweep_dim != "tokens" and "tokens" not in at and target.tokens is not None:
        dims["tokens"] = min(target.tokens.hi, dims["batch"] * dims["seq"])  # held at the largest valid T
    return {k: v for k, v in dims.items() if v is not None}


def point(target: Target, dims: dict[str, Any], x: int, with_recipes: bool = True) -> Point:
    """Return the spec at one shape: runtime root, dispatched backends, the route in words and each
    backend's recipe root; without a runtime, why, and the route dispatch picks when no recipe
    sizes it."""
    g = target.geometry(**dims)
    exact = estimate_exact(g, target.config)
    if exact.ok:
        route = "; ".join(text for r in exact.routes if (text := r.route_text()))
        out = Point(x, exact.total_workspace_bytes, tuple(b.value for b in exact.backends), route=route)
    else:
        dispatched, why = unsized_dispatch(target, g)
        out = Point(x, None, dispatched, missing=why or exact.message or exact.status)
    if not with_recipes:
        return out
    try:
        problem = runtime_problem(g)
    except WorkspaceError:
        problem = None
    runner = target.config.trt_runner is not TrtRunner.UNAVAILABLE
    for backend in family_backends(target.op):
        try:
            r = (recipe(problem, backend, trt_runner_available=runner, config=target.config)
                 if problem is not None else None)
            out.recipes[backend.value] = None if r is None else root_layout(r.projection_bytes,
                                                                            r.attention_workspace_bytes)[1]
        except WorkspaceError:
            out.recipes[backend.value] = None
    return out


def unsized_dispatch(target: Target, g: Geometry) -> tuple[tuple[str, ...], str]:
    """Return the backends dispatch picks for a shape without a runtime, and why they have no bytes,
    when they are routes no recipe sizes (cuDNN's GroupQueryAttention route); else ((), '')."""
    unsized = unsized_routes(target.op)
    if not unsized:
        return (), ""
    try:
        picked = dispatch(runtime_problem(g), target.config).backends
    except WorkspaceError:
        return (), ""
    if not picked or any(b not in unsized for b in picked):
        return (), ""
    return tuple(b.value for b in picked), unsized[picked[0]]


def sample_xs(lo: int, hi: int, count: int) -> list[int]:
    """Return `count` integers spread evenly over lo..hi, both ends included (fewer when the range is)."""
    if hi - lo + 1 <= count:
        return list(range(lo, hi + 1))
    return sorted({lo + round(i * (hi - lo) / (count - 1)) for i in range(count)})


def sweep_points(target: Target, sweep_dim: str, held: dict[str, int | None], at: dict[str, int], span: DimRange,
                 max_points: int = MAX_POINTS) -> list[Point]:
    """Return the points drawn over `span`: every value when it has at most `max_points`; else values
    spread evenly plus both sides of every change of the route (its backends and split count), of
    validity, and of every drop of the runtime (found at every integer for ranges up to
    DENSE_LIMIT; beyond, by halving each gap between two spread values whose route differs until
    every change in it lies between neighbours)."""
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
        known = {x: light(x) for x in xs}
        changes = set()
        gaps = list(zip(xs, xs[1:]))
        while gaps:
            left, right = gaps.pop()
            if known[left].key == known[right].key:
                continue
            if right - left == 1:
                changes |= {left, right}
                continue
            middle = (left + right) // 2
            known[middle] = light(middle)
            gaps += [(left, middle), (middle, right)]
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
    the line's dimensions, the operator's own flags in words (GroupQueryAttention's rotary, window,
    session bound and SM count), then each option that differs from ORT's defaults."""
    dtype = "bf16" if getattr(target, "bf16", False) else "fp16" if target.element_size == 2 else "fp32"
    parts = [f"{target.op.onnx_name} {dtype}", f"sm{target.config.device.sm}",
             line_text(target, sweep_dim, held, span), *op_fields(target.op).target_words(target),
             *options_text(target)]
    return "; ".join(parts)


def line_text(target: Target, sweep_dim: str, held: dict[str, int | None], span: DimRange) -> str:
    """Return the line's dimensions: the swept range, the held values and the implicit relations."""
    dims = [f"{SYMBOLS[sweep_dim]} = {span.lo}..{span.hi}"]
    dims += [f"{SYMBOLS[d]} = {v}" for d, v in held.items() if v is not None]
    if sweep_dim == "total_seq" and "seq" in held and held["seq"] is None:
        dims.append(f"S = min({target.seq.hi}, T)")
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
                 span: DimRange) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return the solver's minimal non-monotonic pairs (one per backend transition) of the line's
    target that differ along the swept dimension, replayed on the line: `x`, `runtime_bytes` and
    `backends` are the line's at the pair's two swept values (where the tokens follow B*S, or S
    follows T, the solver's shapes may differ there; `smaller` / `larger` and
    `solver_runtime_bytes` are its own). A pair whose drop does not hold on the line is left out.
    Also return how the search ended (`SearchStatus.as_dict`)."""
    from attnws.solver.counterexamples import nonmonotonic_pairs
    from attnws.solver.gateway import Limits
    from attnws.solver.session import Session

    line = line_target(target, sweep_dim, held, span)
    pairs, status = nonmonotonic_pairs(line, Session(f"{target.name}/plot", Limits()))
    follows = {sweep_dim, "tokens"} | ({"seq"} if seq_follows(target, sweep_dim, at) else set())
    out = []
    for pair in pairs:
        if sweep_dim not in pair.differ or not set(pair.differ) <= follows:
            continue
        xs = [pair.smaller.dims[sweep_dim], pair.larger.dims[sweep_dim]]
        p, q = (point(target, _dims_at(target, sweep_dim, held, at, x), x, with_recipes=False) for x in xs)
        if p.runtime is None or q.runtime is None or q.runtime >= p.runtime:
            continue
        out.append({"x": xs, "runtime_bytes": [p.runtime, q.runtime], "backends": [list(p.dispatched), list(q.dispatched)],
                    "discontinuity": list(pair.gates), "smaller": pair.smaller.dims, "larger": pair.larger.dims,
                    "solver_runtime_bytes": [pair.smaller.runtime_bytes, pair.larger.runtime_bytes]})
    return out, status.as_dict()


def proven_values(target: Target, ctx: Any = None) -> Proven:
    """Return the tight policy and the proven maximum runtime root over the whole target (see
    `Proven`). When the tight policy is the proven maximum, that is the maximum (the same search,
    PROVED); otherwise the `tightness` theorem is asked for it. `ctx`: the target's solver context
    when the caller has one (its searches are then shared)."""
    from attnws.solver.gateway import Verdict
    from attnws.solver.results import context
    from attnws.solver.theorems import THEOREMS
    from attnws.solver.tight import tight_policy

    ctx = ctx or context(target)
    tight = tight_policy(target, ctx=ctx)
    left_out = ctx.unsized_details(ctx.session("plot_left_out")).get("left_out", {})
    proved = tight.proof.verdict is Verdict.PROVED
    tight_bytes = tight.tight_total_bytes if proved else None
    if proved and tight.method == PROVEN_MAXIMUM:
        return Proven(tight_bytes, tight.proof.verdict.value, tight.method, tight.witness, tight_bytes,
                      Verdict.PROVED.value, left_out)
    result = THEOREMS["tightness"](ctx)
    max_bytes = result.details.get("max_runtime_bytes") if result.verdict is Verdict.PROVED else None
    return Proven(tight_bytes, tight.proof.verdict.value, tight.method, tight.witness if proved else None,
                  max_bytes, result.verdict.value, left_out)


LINE_DIMS = {"batch": lambda g: g.batch, "seq": lambda g: g.seq, "tokens": lambda g: g.t,
             "kv_seq": lambda g: g.l, "past": lambda g: g.past,
             "total_seq": lambda g: g.total_seq}  # a pattern's dimensions at a shape


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
                  proofs: bool = True, progress: Callable[[str], None] = lambda _: None,
                  whole: Any = None) -> tuple[PatternLine, ...]:
    """Return each memory pattern of the target on the line, with its proven maximum when `proofs`
    (`whole`: the target's solver context, which lends a maximum it already found)."""
    out = []
    for pattern in target.patterns:
        x_range = pattern_range(target, pattern, sweep_dim, held, at, span)
        line = PatternLine(pattern.name, pattern.as_dict(), x_range)
        if proofs:
            from attnws.solver.gateway import Verdict
            from attnws.solver.tight import pattern_maximum

            progress(f"plot: proving the largest workspace of memory pattern {pattern.name}")
            result = pattern_maximum(target, pattern, whole=whole)
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
    if sweep_dim in FIXED[target.op]:
        raise UsageError(f"--sweep {sweep}: {target.op.onnx_name}'s {sweep_dim} is fixed by the model "
                         f"({SYMBOLS[sweep_dim]} = {box_of(target, sweep_dim)}); sweep one of "
                         f"{', '.join(sweeps_of(target.op))}")
    if sweep_dim == "past" and not target.with_past:
        raise UsageError("--sweep past: the target has no past_key / past_value (with_past)")
    held = held_values(target, sweep_dim, at)
    span = sweep_range(target, sweep_dim, held, at)
    progress(f"plot: evaluating the spec over {sweep} {span}")
    points = sweep_points(target, sweep_dim, held, at, span, max_points)
    estimate = estimate_geometry(target.max_geometry(), target.config)
    proved: dict[str, Any] = {}  # without proofs every proof field stays None
    pairs: list[dict[str, Any]] = []
    ctx = None
    if proofs:
        from attnws.solver.results import context

        progress(f"plot: proving the tight policy (the maximum) of {target.name}")
        ctx = context(target)
        proven = proven_values(target, ctx)
        proved = {"tight_bytes": proven.tight_bytes, "tight_verdict": proven.tight_verdict,
                  "tight_method": proven.tight_method, "tight_witness": proven.tight_witness,
                  "max_bytes": proven.max_bytes, "max_verdict": proven.max_verdict, "left_out": proven.left_out}
        progress(f"plot: searching non-monotonic pairs along {sweep}")
        pairs, proved["pair_search"] = _pairs_along(target, sweep_dim, held, at, span)
    patterns = pattern_lines(target, sweep_dim, held, at, span, proofs, progress, whole=ctx)
    drawn, not_drawn = drawn_backends(target.op, points, estimate.reachability)
    return Series(
        target=target.name, configuration=configuration_text(target, sweep_dim, held, span), sweep=sweep,
        held={k: v for k, v in held.items() if v is not None}, points=tuple(points),
        estimate_bytes=estimate.total_workspace_bytes if estimate.ok else None,
        estimate_message=None if estimate.ok else estimate.message or estimate.status,
        pairs=tuple(pairs), backends=family_backends(target.op), op=target.op.value, drawn=drawn, not_drawn=not_drawn,
        patterns=patterns, **proved,
    )


def sweeps_of(op: Op) -> list[str]:
    """Return the --sweep values the operator takes: its dimensions that vary, not the fixed ones."""
    return [name for name, dim in SWEEPS.items() if dim not in FOREIGN[op] and dim not in FIXED[op]]


def held_of(op: Op) -> list[str]:
    """Return the --at names the operator takes: its dimensions (a fixed one only at its value)."""
    return [name for name, dim in HELD.items() if dim not in FOREIGN[op]]


def pattern_dims_of(op: Op) -> list[str]:
    """Return the dimensions a memory pattern of the operator may narrow (its own that vary from run
    to run; the family's `PATTERN_DIMS` where it names them)."""
    own = getattr(op_fields(op), "PATTERN_DIMS", PATTERN_DIMS)
    return [dim for dim in PATTERN_DIMS if dim not in FOREIGN[op] and dim in own and dim not in FIXED[op]]


def compare_keys_of(op: Op) -> list[str]:
    """Return the --compare keys the operator takes (a build or runner key only with its backend)."""
    backends = {b.value for b in family_backends(op)}
    return [key for key in COMPARE_KEYS if key not in COMPARE_BACKENDS or backends & set(COMPARE_BACKENDS[key])]


def by_operators(taken: Callable[[Op], list[str]]) -> str:
    """Return the names some operator takes, grouped by the operators that take them, for a flag's
    help: "seq, batch (every operator); tokens (PA, PMHA); total-seq (GQA)"."""
    groups: dict[tuple[Op, ...], list[str]] = {}
    names = dict.fromkeys(name for op in Op for name in taken(op))
    for name in names:
        groups.setdefault(tuple(op for op in Op if name in taken(op)), []).append(name)
    def owners(ops: tuple[Op, ...]) -> str:
        return "every operator" if ops == tuple(Op) else ", ".join(op.value.upper() for op in ops)

    return "; ".join(f"{', '.join(group)} ({owners(ops)})" for ops, group in groups.items())


def drawn_backends(op: Op, points: list[Point], verdicts: tuple[RouteReachability, ...]
                   ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Return the backends whose recipe is drawn, and each other backend of the operator with why
    not. Drawn: dispatch picks it somewhere on the line, or ORT's estimate counts it reachable (its
    recipe explains the estimate), and it has a recipe somewhere on the line. Left out: the spec's
    reachability reason (fp16 only, no kernel for the device, not built, disabled), why no recipe
    sizes it (cuDNN's GroupQueryAttention route), or that dispatch never picks it here; a backend
    that is no route of the operator (no recipe anywhere, no verdict) is not named."""
    picked = {b for p in points for b in p.dispatched}
    verdict = {v.backend.value: v for v in verdicts}
    unsized = unsized_routes(op)
    drawn: list[str] = []
    not_drawn: list[tuple[str, str]] = []
    for backend in family_backends(op):
        name = backend.value
        has_recipe = any(p.recipes.get(name) is not None for p in points)
        reachable = name in picked or (name in verdict and verdict[name].reachable)
        if reachable and has_recipe:
            drawn.append(name)
        elif reachable:
            not_drawn.append((name, unsized.get(backend) or "no recipe at any point of this line"))
        elif name in verdict:
            not_drawn.append((name, verdict[name].reason or "dispatch never picks it"))
        elif has_recipe:
            not_drawn.append((name, "dispatch never picks it on this line"))
    return tuple(drawn), tuple(not_drawn)


def parse_compare(text: str, target: Target) -> tuple[str, tuple[tuple[str, Target], ...]]:
    """Return `--compare KEY=V1,V2,...` as the key and, per value, its label and the target under
    that configuration (the target's other settings kept; an env value NAME=VALUE sets one variable
    over the target's environment; each sm at its default SM count, as --sm sets it). KEY: sm,
    sm_count, sdpa_kernel, env, flash_build, mea_build, trt_build, trt_runner (dashes accepted; a
    build or runner key only for an operator with that backend); 2 to MAX_COMPARED distinct
    configurations."""
    key, sep, raw = text.partition("=")
    key = key.strip().replace("-", "_")
    if not sep or key not in COMPARE_KEYS:
        raise UsageError(f"--compare {text!r}: expected KEY=V1,V2,... with KEY one of {', '.join(COMPARE_KEYS)} "
                         "(e.g. --compare sm=80,90)")
    backends = {b.value for b in family_backends(target.op)}
    if key in COMPARE_BACKENDS and not backends & set(COMPARE_BACKENDS[key]):
        raise UsageError(f"--compare {key}: {target.op.onnx_name} has no {' or '.join(COMPARE_BACKENDS[key])} route, "
                         "so every configuration would draw the same line")
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


COMPARE_EXAMPLES = {"sm": "80,90", "sm_count": "108,132", "sdpa_kernel": "0,2",
                    "env": "ORT_DISABLE_FLASH_ATTENTION=0,ORT_DISABLE_FLASH_ATTENTION=1",
                    "flash_build": "on,off", "mea_build": "on,off", "trt_build": "on,off", "trt_runner": "auto,unknown"}


def _settings_of(target: Target) -> dict[str, Any]:
    """Return the target's runtime settings by `--compare` key (env a fresh dict of its own), as
    `RuntimeConfig.make` takes them back."""
    config = target.config
    return {"sm": config.device.sm, "sm_count": config.device.sm_count, "sdpa_kernel": config.options.sdpa_kernel,
            "env": dict(target.env), "flash_build": config.build.flash, "mea_build": config.build.mea,
            "trt_build": config.build.trt, "trt_runner": config.trt_runner.value}


def configured(target: Target, key: str, value: str) -> tuple[str, Target]:
    """Return the label and the target with one runtime setting replaced (see parse_compare)."""
    settings = _settings_of(target)
    try:
        if key in ("sm", "sm_count", "sdpa_kernel"):
            number = parse_integer(value)
            if number is None:
                raise UsageError(f"{value!r} is not a non-negative integer (ASCII digits)")
            if key == "sm":
                settings.update(sm=check_sm(number), sm_count=None)  # each sm at its default SM count
            elif key == "sm_count":
                if not 0 < number <= MAX_SM_COUNT:
                    raise UsageError(f"{number} is not a multiprocessor count (1 to {MAX_SM_COUNT:,})")
                settings["sm_count"] = number
            else:
                settings[key] = check_sdpa_kernel(number)
            label = setting_label(key, number)
        elif key == "env":
            settings["env"].update(parse_env([value]))
            label = value
        elif key == "trt_runner":
            if value not in [r.value for r in TrtRunner]:
                raise UsageError(f"{value!r}: expected one of {', '.join(r.value for r in TrtRunner)}")
            settings[key], label = value, setting_label(key, value)
        else:
            if value.lower() not in _BOOLEANS:
                raise UsageError(f"{value!r}: expected on or off")
            settings[key] = _BOOLEANS[value.lower()]
            label = setting_label(key, settings[key])
        return label, replace(target, config=RuntimeConfig.make(**settings), env=tuple(sorted(settings["env"].items())))
    except (UsageError, InvalidArgument) as error:
        raise UsageError(f"--compare {key}={value}: {error}") from None


def setting_label(key: str, value: Any) -> str:
    """Return how `--compare` names a configuration by its setting of `key` (not env, named by its
    NAME=VALUE): "sm90", "132 SMs", "sdpa_kernel 2", "TRT runner unknown", "flash build off"."""
    if key == "sm":
        return f"sm{value}"
    if key == "sm_count":
        return f"{value} SMs"
    if key == "sdpa_kernel":
        return f"sdpa_kernel {value}"
    if key == "trt_runner":
        return f"TRT runner {value}"
    return f"{key.split('_')[0]} build {'on' if value else 'off'}"


def own_setting(target: Target, key: str, labels: tuple[str, ...]) -> str:
    """Return the target's own setting of the compared `key`, named as `setting_label` names a
    compared one ("sm90"; an sm with other than its default SM count says it, "sm80, 132 SMs"); for
    env, each variable the compared `labels` set ("ORT_DISABLE_FLASH_ATTENTION unset")."""
    config = target.config
    if key == "env":
        env = dict(target.env)
        names = dict.fromkeys(label.partition("=")[0].strip() for label in labels)
        return ", ".join(f"{name}={env[name]}" if name in env else f"{name} unset" for name in names)
    if key == "sm":
        count = config.device.sm_count
        return setting_label(key, config.device.sm) + ("" if count == default_sm_count(config.device.sm)
                                                       else f", {count} SMs")
    return setting_label(key, _settings_of(target)[key])


def compare_series(key: str, variants: tuple[tuple[str, Target], ...], sweep: str, at: dict[str, int] | None = None,
                   *, proofs: bool = True, progress: Callable[[str], None] = lambda _: None) -> Comparison:
    """Return one line of each configuration (`parse_compare`'s variants), the same dimensions held."""
    series = []
    for label, variant in variants:
        progress(f"plot: {label}")
        series.append(compute_series(variant, sweep, at, proofs=proofs, progress=progress))
    return Comparison(key, tuple(label for label, _ in variants), tuple(series))
