"""The checks bite on the results too: a wrong kernel result fails the reference, a read of bytes no
kernel wrote is poisoned by the NaN sentinel, and the byte checks' gap arithmetic is exact."""

from __future__ import annotations

import pytest

import numpy as np

from attnws.kernels import backends, validate_shape
from attnws.kernels.allocator import UNTAGGED, AllocationRecord
from attnws.kernels.checks import gaps
from attnws.kernels.validate import untagged_count
from attnws.kernels.inputs import make_inputs
from attnws.kernels.reference import checked_tokens, reference_output
from attnws.spec import runtime_problem

from kernel_cases import BIAS_ROUTES, ROUTES


def test_wrong_softmax_scale_fails_the_reference(monkeypatch):
    monkeypatch.setattr(backends, "scale", lambda p: 1.0)
    report = validate_shape(*ROUTES["pmha-fp16-flash-direct"][:2])
    assert report.failures == ("reference",)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("route", ["pa-fp32-unfused-padded-width4", "pmha-fp16-trt-interleaved-bias"])
def test_skipped_materialization_reads_sentinel_nan(monkeypatch, route):
    monkeypatch.setattr(backends, "materialize", lambda *args: None)
    report = validate_shape(*ROUTES[route][:2])
    assert report.failures == ("reference",) and report.max_error != report.max_error  # NaN


@pytest.mark.parametrize("size, spans, expected", [
    (10, [], [(0, 10)]),
    (10, [(0, 10)], []),
    (10, [(2, 4), (4, 6)], [(0, 2), (6, 10)]),
    (10, [(6, 8), (0, 3)], [(3, 6), (8, 10)]),
    (10, [(0, 5), (3, 7)], [(7, 10)]),
], ids=["no-views", "covered", "adjacent", "unsorted", "overlapping"])
def test_gaps(size, spans, expected):
    assert gaps(size, spans) == expected


def test_sampled_reference_rows_equal_the_full_reference_rows():
    geometry = BIAS_ROUTES["pmha-fp16-mea-bias-broadcast-heads"][0]
    problem = runtime_problem(geometry)
    host = make_inputs(problem)
    sample = checked_tokens(problem, 4)
    full = reference_output(problem, host, np.arange(problem.token_count))
    assert len(sample) == 4 and np.array_equal(reference_output(problem, host, sample), full[sample])


def test_capped_reference_checks_that_many_rows():
    report = validate_shape(*BIAS_ROUTES["pmha-fp16-mea-bias-broadcast-heads"][:2], reference_tokens=4)
    assert report.reference_tokens == 4 and report.passed


class ObservedAllocator:
    """What a GPU run's allocator exposes: its own records and what the memory manager saw."""

    def __init__(self, observed):
        self.observed = observed

    def records(self):
        return (AllocationRecord("input:query", 64, 64, 1, 4), AllocationRecord("attention", 0, 512, 2, 3))


@pytest.mark.parametrize("observed, expected", [
    (None, None),
    ([("input:query", 64), ("attention", 512)], 0),
    ([("input:query", 64), (UNTAGGED, 8), ("attention", 512)], 1),
    ([("input:query", 64)], 1),
], ids=["simulator", "all-tagged", "one-escaped", "one-unseen"])
def test_untagged_count(observed, expected):
    assert untagged_count(ObservedAllocator(observed)) == expected
