"""Every backend x dtype x layout on tiny shapes: ORT's dispatch picks the expected route, and the
validator's checks all pass on it."""

from __future__ import annotations

import pytest

from attnws.kernels import validate_shape
from attnws.spec import Backend, Op, recipe, runtime_problem
from attnws.spec.hints import Geometry

from kernel_cases import BIAS_ROUTES, ROUTES, SM80, pmha, separate


def assert_valid(geometry, config, backend: str, direct: bool) -> None:
    report = validate_shape(geometry, config)
    assert report.backend == backend
    assert report.passed, report.as_dict()
    assert recipe(runtime_problem(geometry), Backend(backend)).no_qkv_workspace == direct
    assert report.allocated_bytes == report.recipe_bytes


@pytest.mark.parametrize("geometry, config, backend, direct", ROUTES.values(), ids=ROUTES.keys())
def test_route_passes_every_check(geometry, config, backend, direct):
    assert_valid(geometry, config, backend, direct)


@pytest.mark.parametrize("geometry, config, backend, direct", BIAS_ROUTES.values(), ids=BIAS_ROUTES.keys())
def test_attention_bias_broadcast_passes(geometry, config, backend, direct):
    assert_valid(geometry, config, backend, direct)


def test_pa_allocates_projection_then_attention_both_live():
    geometry, config, _, _ = ROUTES["pa-fp16-trt-interleaved"]
    report = validate_shape(geometry, config)
    projection, attention = [r for r in report.allocations if r.purpose in ("projection", "attention")]
    assert (projection.purpose, attention.purpose) == ("projection", "attention")
    assert projection.opened < attention.opened < attention.closed < projection.closed


def test_direct_trt_allocates_no_workspace():
    report = validate_shape(*ROUTES["pmha-fp16-trt-direct"][:2])
    assert report.recipe_allocations == ()
    assert not [r for r in report.allocations if r.purpose in ("projection", "attention")]


def test_empty_output_runs_nothing_and_allocates_nothing():
    report = validate_shape(pmha(2, 32, tokens=0), SM80)
    assert report.backend is None and report.allocations == () and report.passed


@pytest.mark.parametrize("backend", ["unfused", "mea", "trt"])
def test_forced_backend_runs_that_backend(backend):
    geometry = Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=32, tokens=5)
    report = validate_shape(geometry, SM80, backend)
    assert report.backend == backend and report.passed, report.as_dict()


def test_full_batch_without_padding_passes():
    report = validate_shape(pmha(2, 8, tokens=8), SM80, "unfused")
    assert report.passed, report.as_dict()


def test_unfused_context_over_q_reaching_v_is_caught():
    """ORT writes the context [B, N, S, Hv] over Q (temp_output = qkv): with Hv > 2H it runs into V,
    which the same GEMM reads."""
    report = validate_shape(separate(pmha(4, 4, v_head_size=12)), SM80, "unfused")
    assert report.overlapping == (("v", "context"),) and "overlapping buffers" in report.failures
