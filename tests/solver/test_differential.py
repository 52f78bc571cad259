"""Differential test: the Z3 encoding evaluated at concrete shapes equals the concrete spec.

Shapes come from the same declared targets the solver quantifies over (tests/strategies.py):
validity (the builder accepts), success of the dispatched recipe, the dispatch choice and the
runtime bytes and the run-time launch failure must all agree with `runtime_problem` / `dispatch` /
`estimate_exact`.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from hypothesis import given, settings, strategies as st

from attnws.solver.contract import kernel_conditions
from attnws.solver.domain import is_symbolic
from attnws.solver.encode import Encoding, encode, evaluate
from attnws.solver.gateway import Verdict
from attnws.solver.ledger import committed_targets
from attnws.solver.results import context
from attnws.solver.theorems import THEOREMS
from attnws.spec.dispatch import dispatch
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import WorkspaceError
from attnws.spec.estimate import estimate_exact, runtime_problem
from attnws.spec.families import DIMENSIONS
from attnws.spec.recipe import recipe
from attnws.spec.target import Target
from tests.strategies import geometries_in, targets

TARGETS = {t.name: t for t in committed_targets()}


@lru_cache(maxsize=None)
def _encoding(name: str) -> Encoding:
    return encode(TARGETS[name])


def _model(enc: Encoding, g) -> dict[str, int]:
    derived = {"v_head_size": g.hv, "tokens": g.t, "kv_seq": g.l}
    return {enc.shape.dims[n].decl().name(): derived[n] if n in derived else getattr(g, n)
            for n in DIMENSIONS if is_symbolic(enc.shape.dims[n])}


def assert_agrees(target: Target, enc: Encoding, g) -> None:
    model = _model(enc, g)
    at = lambda term: evaluate(term, enc.shape, model)  # noqa: E731
    try:
        problem = runtime_problem(g)
    except WorkspaceError:
        assert at(enc.valid) is False
        return
    assert at(enc.valid) is True
    exact = estimate_exact(g, target.config)
    outcome = dispatch(problem, target.config)
    assert {b for b, r in enc.routes.items() if at(r.selected)} == set(outcome.backends)
    assert at(enc.failure) == bool(outcome.failure)
    if at(enc.sized):
        assert at(enc.ok) == exact.ok, exact.message
    else:  # a route no recipe sizes (GroupQueryAttention's cuDNN): it runs, and ORT's recipe says Unavailable
        assert at(enc.ok) and exact.error == "unavailable", exact.message
    if exact.ok:
        assert at(enc.runtime_bytes) == exact.total_workspace_bytes


@pytest.mark.parametrize("name", sorted(TARGETS))
@settings(max_examples=60)
@given(data=st.data())
def test_committed_targets_agree_with_the_spec(name, data):
    target = TARGETS[name]
    assert_agrees(target, _encoding(name), data.draw(geometries_in(target)))


@settings(max_examples=40)
@given(target=targets(), data=st.data())
def test_random_targets_agree_with_the_spec(target, data):
    assert_agrees(target, encode(target), data.draw(geometries_in(target)))


def failing_kernel_conditions(target: Target, g) -> list[str]:
    """Return the kernel-contract conditions the concrete dispatched recipe breaks at g."""
    try:
        problem = runtime_problem(g)
    except WorkspaceError:
        return []
    broken = []
    for backend in dispatch(problem, target.config).backends:
        try:
            r = recipe(problem, backend, trt_runner_available=True, config=target.config)
        except WorkspaceError:
            continue
        broken += [name for name, holds in kernel_conditions(CONCRETE, problem, r, target) if not holds]
    return broken


@settings(max_examples=25)
@given(target=targets(), data=st.data())
def test_a_proved_kernel_contract_holds_at_every_drawn_shape(target, data):
    """Soundness of the symbolic evaluation of the footprint: a shape breaking a condition
    concretely means the theorem cannot be PROVED on its target."""
    broken = failing_kernel_conditions(target, data.draw(geometries_in(target)))
    if broken:
        assert THEOREMS["kernel_contract"](context(target)).verdict is not Verdict.PROVED, broken
