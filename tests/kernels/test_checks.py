"""The checks bite on the results too: a wrong kernel result fails the reference, a read of bytes no
kernel wrote is poisoned by the NaN sentinel, and the memory manager's count is exact."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attnws.kernels import allocator, validate, validate_shape
from attnws.kernels.allocation_observers import OBSERVERS, observe
from attnws.kernels.allocation_checks import untagged_count
from attnws.kernels.allocator import GUARD_BYTES, UNTAGGED, AllocationRecord, Allocator
from attnws.kernels.packed import layouts, routes
from attnws.kernels.packed.inputs import make_inputs
from attnws.kernels.packed.reference import reference_output
from attnws.kernels.reference_check import checked_rows
from attnws.spec import Backend, runtime_problem

from kernel_cases import BIAS_ROUTES, ROUTES


def test_wrong_softmax_scale_fails_the_reference_and_flashs_lse(monkeypatch):
    monkeypatch.setattr(routes, "softmax_scale", lambda head_size: 1.0)
    report = validate_shape(*ROUTES["pmha-fp16-flash-direct"][:2])
    assert report.failures == ("reference", "lse") and report.lse.max_error > report.lse.tolerance


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("route", ["pa-fp32-unfused-padded-width4", "pmha-fp16-trt-interleaved-bias"])
def test_skipped_materialization_reads_sentinel_nan(monkeypatch, route):
    monkeypatch.setattr(layouts, "launch_materialize", lambda plan: None)
    report = validate_shape(*ROUTES[route][:2])
    assert report.failures == ("incomplete writes", "reference") and report.max_error != report.max_error  # NaN


def test_sampled_reference_rows_equal_the_full_reference_rows():
    geometry = BIAS_ROUTES["pmha-fp16-mea-bias-broadcast-heads"][0]
    problem = runtime_problem(geometry)
    host = make_inputs(problem)
    sample = checked_rows(problem.token_count, 4)
    full = reference_output(problem, host, np.arange(problem.token_count), Backend.MEA)
    assert len(sample) == 4 and np.array_equal(reference_output(problem, host, sample, Backend.MEA), full[sample])


def test_capped_reference_checks_that_many_rows():
    report = validate_shape(*BIAS_ROUTES["pmha-fp16-mea-bias-broadcast-heads"][:2], reference_tokens=4)
    assert report.reference_tokens == 4 and report.passed


class ObservedAllocator:
    """What a GPU run's allocator exposes: its own records and what the memory manager saw."""

    def __init__(self, observed):
        self.observed = observed

    def records(self):
        return (AllocationRecord("input:query", 64, 0, 1, 4), AllocationRecord("attention", 512, GUARD_BYTES, 2, 3))


@pytest.mark.parametrize("observed, expected", [
    (None, None),
    ([("input:query", 64), ("attention", 512)], 0),
    ([("input:query", 64), (UNTAGGED, 8), ("attention", 512)], 1),
    ([("input:query", 64)], 1),
], ids=["simulator", "all-tagged", "one-escaped", "one-unseen"])
def test_untagged_count(observed, expected):
    assert untagged_count(ObservedAllocator(observed)) == expected


def test_recipe_the_footprint_does_not_fit_is_not_launched(monkeypatch):
    real = validate.recipe

    def short(*args, **kwargs):
        r = real(*args, **kwargs)
        return replace(r, attention_workspace_bytes=r.interleaved_qkv_bytes - 2)

    monkeypatch.setattr(validate, "recipe", short)
    report = validate_shape(*ROUTES["pmha-fp16-trt-interleaved-bias"][:2])
    assert report.failures == ("undersized",) and report.undersized == ("qkv_interleaved",)
    assert report.stages == () and report.allocations == ()


def test_the_memory_manager_reports_reach_the_innermost_active_allocator(monkeypatch):
    """What `RecordingMemoryManager.memalloc` reports (on a GPU) is heard by the innermost running
    allocator only, and by none once it has exited."""
    monkeypatch.setattr(allocator, "memory_manager_active", lambda: True)
    with Allocator() as outer:
        observe(8)
        with Allocator() as inner:
            observe(16)
        observe(32)
    observe(64)
    assert outer.observed == [(UNTAGGED, 8), (UNTAGGED, 32)] and inner.observed == [(UNTAGGED, 16)]
    assert OBSERVERS == []
