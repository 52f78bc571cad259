"""A target as one symbolic problem: the spec's own builders, dispatch gates and recipes,
evaluated over Z3 integers with `SymbolicDomain`.

`encode(target)` makes a Z3 integer for every dimension whose range is not a point (points stay
Python ints), builds the problem with the spec's `runtime_problem` (ORT's positional input shapes
through the builder), then evaluates `cascade_gates`, every route's `recipe` and the spec's
`root_layout`. Nothing here restates a formula of the spec.

Units: every *_bytes term is bytes; dimensions are counts. All terms are Z3 Int or Python int.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import z3

from attnws.spec.aggregate import root_layout
from attnws.spec.dispatch import cascade_gates, output_is_empty, runner_validity
from attnws.spec.families import DIMENSIONS, op_dimensions
from attnws.spec.runtime_failures import NO_ROUTE, route_failures
from attnws.spec.errors import WorkspaceError
from attnws.spec.estimate import runtime_problem
from attnws.spec.hints import Geometry
from attnws.spec.layout import Recipe
from attnws.spec.options import TrtRunner
from attnws.spec.problem import Backend
from attnws.spec.recipe import recipe, unsized_routes
from attnws.spec.target import Target

from .domain import Obligation, SymbolicDomain, choose, conj, disj, holds_all, is_symbolic, negate

@dataclass(frozen=True)
class Shape:
    """The target's dimensions as ints (point ranges) or Z3 Ints, and the box constraints on them.

    `dims` has every name of DIMENSIONS; v_head_size and input_hidden are None where the target
    leaves them to their defaults (Hv = H, input_hidden = N * H).
    """

    target: Target
    dims: dict[str, Any]
    box: Any

    @property
    def variables(self) -> list[Any]:
        """Return the Z3 variables, in DIMENSIONS order."""
        return [self.dims[n] for n in DIMENSIONS if is_symbolic(self.dims[n])]

    def geometry(self) -> Geometry:
        """Return the target's geometry over these (possibly symbolic) dimensions."""
        dims = {k: v for k, v in self.dims.items() if v is not None}
        hv = dims.pop("v_head_size", None)
        g = self.target.geometry(**dims, **({} if is_symbolic(hv) else {"v_head_size": hv}))
        return replace(g, v_head_size=hv) if is_symbolic(hv) else g


def _dimension(name: str, lo: int, hi: int, suffix: str) -> tuple[Any, Any]:
    if lo == hi:
        return lo, True
    var = z3.Int(name + suffix)
    return var, z3.And(var >= lo, var <= hi)


def symbolic_shape(target: Target, suffix: str = "") -> Shape:
    """Return the target's box: one Z3 Int per non-point dimension (named dim + suffix).

    Tokens without a declared range are any T in [1, B * S], as `Target.contains` reads them
    (MultiHeadAttention has no token count: its kv_seq and past take their defaults, L = S, P = 0).
    """
    dims: dict[str, Any] = {}
    box: list[Any] = []
    for name in DIMENSIONS:
        declared = target.hv if name == "v_head_size" and target.v_head_size is not None else getattr(target, name)
        if declared is None:
            dims[name] = None
            continue
        dims[name], bound = _dimension(name, declared.lo, declared.hi, suffix)
        box.append(bound)
    if dims["tokens"] is None and "tokens" in op_dimensions(target.op):
        padded = dims["batch"] * dims["seq"]
        tokens = z3.Int("tokens" + suffix) if is_symbolic(padded) or padded > 1 else 1
        dims["tokens"] = tokens
        box.append(conj(tokens >= 1, tokens <= padded))
    return Shape(target, dims, conj(*box))


@dataclass(frozen=True)
class Route:
    """One backend at the symbolic problem: when dispatch picks it, its recipe, and whether the
    recipe succeeds there (`ok`, guarded by `selected`). `unsized` says why no recipe states the
    workspace of a route ORT runs ('' for every route that has one): such a route succeeds where
    it is picked, and its shapes are left out of every bound (`Encoding.sized`)."""

    backend: Backend
    selected: Any
    recipe: Recipe | None
    obligations: tuple[Obligation, ...]
    total_bytes: Any
    unsized: str = ""

    @property
    def ok(self) -> Any:
        """The recipe's checks, each guarded by the dispatch choice (False if it cannot build)."""
        if self.unsized:
            return True
        if self.recipe is None:
            return negate(self.selected)
        return holds_all(self.obligations)


@dataclass(frozen=True)
class Encoding:
    """The symbolic runtime of a target (see the module docstring).

    `valid`: the shape lies in the box and the builder accepts it. `empty`: ORT returns before
    allocating. `routes`: every backend of the cascade. `no_route`: the cascade ends with no
    backend (ORT's run fails; only GroupQueryAttention's cascade can). `ok`: a backend is picked
    and its recipe succeeds. `sized`: the picked route has a recipe (not one of the family's
    `UNSIZED_ROUTES`). `runtime_bytes`: what the runtime allocates (0 when empty; the max over
    both TRT-runner outcomes when the runner is unknown), meaningful where `valid`, `ok` and
    `sized` hold. `failures`: per kind of `attnws.spec.runtime_failures` (and `no_route`),
    dispatch picks a route and ORT's run then fails there (an error after the workspace is
    allocated, or no route at all); `failure`: any of them.
    """

    shape: Shape
    problem: Any
    build_obligations: tuple[Obligation, ...]
    valid: Any
    empty: Any
    routes: dict[Backend, Route]
    runtime_bytes: Any
    failures: dict[str, Any] = field(default_factory=dict)
    no_route: Any = False

    @property
    def failure(self) -> Any:
        return disj(*self.failures.values())

    @property
    def ok(self) -> Any:
        return conj(negate(self.no_route), *(r.ok for r in self.routes.values()))

    @property
    def sized(self) -> Any:
        return conj(*(negate(r.selected) for r in self.routes.values() if r.unsized))

    @property
    def measured(self) -> Any:
        """The shape is valid, its dispatched route runs and a recipe states its bytes: where
        `runtime_bytes` is what ORT allocates."""
        return conj(self.valid, self.ok, self.sized)

    def unsized_routes(self) -> dict[Backend, str]:
        """Return the routes without a recipe, each with why."""
        return {b: r.unsized for b, r in self.routes.items() if r.unsized}

    def route_obligations(self) -> list[Obligation]:
        """Return every recipe obligation of every route (guarded by its selection)."""
        return [o for r in self.routes.values() for o in r.obligations]


def _runner_outcomes(d: Any, p: Any, target: Target) -> list[Any]:
    if target.config.trt_runner is TrtRunner.UNKNOWN:
        return [True, False]
    return [runner_validity(d, p, target.config)]


def _selections(d: Any, p: Any, target: Target, empty: Any) -> list[dict[Backend, Any]]:
    """Per TRT-runner outcome: the condition under which the cascade picks each backend."""
    outcomes = []
    for runner in _runner_outcomes(d, p, target):
        taken: list[Any] = [empty]
        chosen: dict[Backend, Any] = {}
        for backend, gates in cascade_gates(d, p, target.config, runner):
            eligible = conj(*(g.cond for g in gates))
            chosen[backend] = conj(negate(disj(*taken)), eligible)
            taken.append(eligible)
        outcomes.append(chosen)
    return outcomes


def route_recipe(d: SymbolicDomain, p: Any, backend: Backend, guard: Any, config: Any,
                 route_gates: bool = True) -> tuple[Recipe | None, tuple[Obligation, ...]]:
    """Evaluate the spec's recipe for backend under guard (with or without its route gates, as
    the runtime or ORT's bounds aggregate sizes it); None when it raises unconditionally."""
    start = d.mark()
    with d.assuming(guard):
        try:
            result = recipe(p, backend, trt_runner_available=True, route_gates=route_gates, d=d, config=config)
        except WorkspaceError:
            return None, tuple(d.since(start))
    return result, tuple(d.since(start))


def recipe_root_bytes(d: Any, r: Recipe) -> Any:
    """Return the root bytes of one recipe: the spec's `root_layout` total, align256(projection)
    + attention (PMHA: projection 0), in the given domain."""
    return root_layout(r.projection_bytes, r.attention_workspace_bytes, d)[1]


@dataclass(frozen=True)
class Build:
    """The builder evaluated over the target's box: the problem (None when the builder raises
    for every shape), its obligations, and the domain to evaluate more spec code in."""

    shape: Shape
    domain: SymbolicDomain
    problem: Any
    obligations: tuple[Obligation, ...]

    @property
    def valid(self) -> Any:
        """The shape lies in the box and the builder accepts it."""
        return False if self.problem is None else conj(self.shape.box, holds_all(self.obligations))


def build(target: Target, suffix: str = "") -> Build:
    """Return the builder evaluated symbolically over the target (variables named dim + suffix)."""
    d = SymbolicDomain()
    shape = symbolic_shape(target, suffix)
    try:
        p = runtime_problem(shape.geometry(), d)
    except WorkspaceError:
        p = None
    return Build(shape, d, p, tuple(d.obligations))


def encode(target: Target, suffix: str = "") -> Encoding:
    """Return the symbolic runtime of the target (shape variables named dim + suffix)."""
    built = build(target, suffix)
    d, p = built.domain, built.problem
    if p is None:
        return Encoding(built.shape, None, built.obligations, False, False, {}, 0)
    empty = output_is_empty(d, p)
    outcomes = _selections(d, p, target, empty)
    routes: dict[Backend, Route] = {}
    unsized = unsized_routes(target.op)
    for backend in outcomes[0]:
        selected = disj(*(chosen[backend] for chosen in outcomes))
        if backend in unsized:
            routes[backend] = Route(backend, selected, None, (), 0, unsized[backend])
            continue
        r, obligations = route_recipe(d, p, backend, selected, target.config)
        total: Any = 0
        if r is not None:
            start = d.mark()
            with d.assuming(selected):
                total = recipe_root_bytes(d, r)
            obligations += tuple(d.since(start))
        routes[backend] = Route(backend, selected, r, obligations, total)
    per_outcome = [
        _sum_selected([(chosen[b], routes[b].total_bytes) for b in chosen]) for chosen in outcomes
    ]
    runtime = per_outcome[0] if len(per_outcome) == 1 else d.max_(*per_outcome)
    failures: dict[str, Any] = {}
    for backend, route in routes.items():
        for f in route_failures(d, p, target.config, backend):
            failures[f.kind] = disj(failures.get(f.kind, False), conj(route.selected, f.cond))
    no_route = disj(*(conj(negate(empty), *(negate(chosen[b]) for b in chosen)) for chosen in outcomes))
    failures[NO_ROUTE] = no_route
    return Encoding(built.shape, p, built.obligations, built.valid, empty, routes, runtime,
                    {kind: cond for kind, cond in failures.items() if cond is not False}, no_route)


def _sum_selected(pairs: list[tuple[Any, Any]]) -> Any:
    """Return the value whose condition holds (conditions are mutually exclusive), else 0."""
    value: Any = 0
    for cond, bytes_ in reversed(pairs):
        value = choose(cond, bytes_, value)
    return value


def corner_models(shape: Shape) -> list[dict[str, int]]:
    """Return a model per corner of the shape's box (every symbolic dimension at the low or high
    end of its declared range; a token count without one at 1 or B * S): candidate extremes to
    try before a search."""
    ends: list[tuple[str, tuple[int, ...]]] = []
    for name in DIMENSIONS:
        var = shape.dims[name]
        declared = getattr(shape.target, "hv" if name == "v_head_size" else name, None)
        if is_symbolic(var) and declared is not None:
            ends.append((var.decl().name(), tuple(dict.fromkeys((declared.lo, declared.hi)))))
    models = [dict(zip((n for n, _ in ends), values)) for values in product(*(e for _, e in ends))]
    tokens = shape.dims.get("tokens")
    if is_symbolic(tokens) and tokens.decl().name() not in dict(ends):
        name = tokens.decl().name()
        models = [{**m, name: t} for m in models
                  for t in dict.fromkeys((1, evaluate(shape.dims["batch"] * shape.dims["seq"], shape, m)))]
    return models


def one_dimension_apart(small: Shape, large: Shape) -> list[tuple[str, Any, Any, list[Any]]]:
    """Return, per symbolic dimension, (name, its variable in small, in large, equalities tying
    every other symbolic dimension of the two shapes): pairs of shapes differing in one dimension."""
    out = []
    for dim in DIMENSIONS:
        a, b = small.dims[dim], large.dims[dim]
        if is_symbolic(a):
            same = [small.dims[n] == large.dims[n] for n in DIMENSIONS if n != dim and is_symbolic(small.dims[n])]
            out.append((dim, a, b, same))
    return out


def concrete_dims(shape: Shape, model: dict[str, int]) -> dict[str, int | None]:
    """Return the dimensions of the shape under a model (Z3 variables replaced by values)."""
    out: dict[str, int | None] = {}
    names = op_dimensions(shape.target.op)
    for name, value in shape.dims.items():
        if name not in names:
            continue
        out[name] = model.get(value.decl().name(), 0) if is_symbolic(value) else value
    return out


def concrete_geometry(target: Target, dims: dict[str, int | None]) -> Geometry:
    """Return the concrete geometry of the target at the given dimensions."""
    return target.geometry(**{k: v for k, v in dims.items() if v is not None})


def evaluate(term: Any, shape: Shape, model: dict[str, int]) -> Any:
    """Return a term's Python value (int or bool) under a model of the shape's variables."""
    if not is_symbolic(term):
        return term
    subst = [(v, z3.IntVal(model.get(v.decl().name(), 0))) for v in shape.variables]
    value = z3.simplify(z3.substitute(term, *subst))
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    return value.as_long()
