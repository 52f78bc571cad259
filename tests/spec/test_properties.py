"""Properties over drawn targets and shapes: containment, max-not-sum aggregation, dispatch totality
and the safety of ORT's AOT estimate."""

from __future__ import annotations

from hypothesis import assume, given, strategies as st

from attnws.spec import (
    CONCRETE,
    Backend,
    WorkspaceError,
    aggregate,
    dispatch,
    estimate_exact,
    estimate_geometry,
    overlapping_views,
    recipe,
    runtime_problem,
    validate_recipe,
    views,
)
from attnws.spec.containment import misaligned
from attnws.spec.recipe import unsized_routes

from ..strategies import geometries_in, targets


def built_problem(target, g):
    try:
        return runtime_problem(g)
    except WorkspaceError:
        return None


@given(st.data())
def test_every_recipe_that_builds_is_contained_disjoint_and_aligned(data):
    target = data.draw(targets())
    problem = built_problem(target, data.draw(geometries_in(target)))
    assume(problem is not None)
    for backend in Backend:
        try:
            r = recipe(problem, backend, config=target.config)
        except WorkspaceError:
            continue
        validate_recipe(CONCRETE, r)
        assert overlapping_views(r) == []
        assert misaligned(r) == []
        sizes = dict(r.allocations())
        for v in views(r):
            assert 0 <= v.offset and v.end <= sizes[v.allocation]
        viewed = {v.allocation for v in views(r)}
        assert all(name in viewed for name, size in sizes.items() if size), "an allocation no view uses"


@given(st.data())
def test_aggregate_is_the_maximum_of_its_routes_never_less(data):
    target = data.draw(targets())
    problem = built_problem(target, target.max_geometry())
    assume(problem is not None)
    routes = data.draw(st.sets(st.sampled_from(list(Backend)), min_size=1))
    try:
        agg = aggregate(problem, sorted(routes, key=list(Backend).index))
    except WorkspaceError:
        return
    for r in agg.routes:
        assert r.attention_workspace_bytes <= agg.attention_workspace_bytes
    assert agg.attention_workspace_bytes == max(r.attention_workspace_bytes for r in agg.routes)
    assert agg.total_workspace_bytes == agg.attention_workspace_offset_bytes + agg.attention_workspace_bytes
    assert agg.attention_workspace_offset_bytes % 256 == 0
    assert agg.attention_workspace_offset_bytes - agg.projection_bytes in range(256)


@given(st.data())
def test_dispatch_returns_a_backend_whose_recipe_builds_or_a_typed_error(data):
    target = data.draw(targets())
    problem = built_problem(target, data.draw(geometries_in(target)))
    assume(problem is not None)
    outcome = dispatch(problem, target.config)
    assert outcome.empty or outcome.backends or outcome.failure_kind == "no_route"
    for backend in outcome.backends:
        try:
            recipe(problem, backend, trt_runner_available=True, config=target.config)
        except WorkspaceError as error:
            unsized = backend in unsized_routes(target.op)  # a route no recipe states: ORT's Unavailable
            assert error.status in ("invalid_argument", "overflow") or (unsized and error.status == "unavailable")


@given(st.data())
def test_runtime_workspace_never_exceeds_the_aot_estimate_of_enclosing_bounds(data):
    target = data.draw(targets())
    bound = estimate_geometry(target.max_geometry(), target.config)
    assume(bound.ok)
    g = data.draw(geometries_in(target))
    runtime = estimate_exact(g, target.config)
    assume(runtime.ok)
    assert runtime.total_workspace_bytes <= bound.total_workspace_bytes
    assert set(runtime.backends) <= {v.backend for v in bound.reachability if v.reachable}
