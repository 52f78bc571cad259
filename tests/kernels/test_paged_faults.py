"""Planted faults in PagedAttention's kernels and recipe that the one harness must report, each held
to the check's report (not to pytest failing): a decode kernel writing one split row past its
partial buffers, a gather writing one row too many, a recipe request one element too small or too
large, the combine writing Flash's LSE in padded tiles, a step that leaves its tokens out of the
cache. Each request is its own guarded allocation, so an overrun lands in that request's guard
band, which the harness measures.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import cuda

from attnws.kernels import validate_shape
from attnws.kernels.backends import flash_split
from attnws.kernels.paged import decode_route, mea_route, routes
from attnws.spec.paged.recipe import Allocation

from tests.kernels.test_paged_routes import CASES


def test_a_decode_kernel_writing_one_split_past_its_partials_is_a_stray_write(monkeypatch):
    """One more split than the recipe's: T * N * H floats past `decode_partial_out` (256 bytes here,
    the guard band), T * N past the max and sum."""
    g, config, _, _ = CASES["decode-empty-split"]
    real = decode_route.launch_split_kv
    monkeypatch.setattr(decode_route, "launch_split_kv", lambda plan: real(replace(plan, splits=plan.splits + 1)))
    report = validate_shape(g, config)
    assert report.status == "failed" and {"stray writes", "guard bands"} <= set(report.failures)
    stray = {s.allocation: s for s in report.measurement.stray}
    assert set(stray) == {"decode_partial_out", "decode_partial_max", "decode_partial_sum"}
    assert stray["decode_partial_out"].first_offset == 2 * 4 * g.tokens * g.heads * g.head_size  # the request's end
    assert stray["decode_partial_out"].nbytes == 4 * g.tokens * g.heads * g.head_size


def test_a_decode_kernel_striding_one_element_off_is_a_stray_and_an_incomplete_write(monkeypatch):
    g, config, _, _ = CASES["decode-one-split"]
    real = decode_route.launch_split_kv
    monkeypatch.setattr(decode_route, "launch_split_kv",
                        lambda plan: real(replace(plan, partial_out=plan.partial_out[1:])))
    report = validate_shape(g, config)
    assert {"stray writes", "incomplete writes"} <= set(report.failures)
    assert [(s.allocation, s.first_offset, s.nbytes) for s in report.measurement.stray] == [
        ("decode_partial_out", 4 * g.tokens * g.heads * g.head_size, 4)]
    # Its first element is left unwritten (the output row reading it turns NaN: an incomplete write too,
    # where the NaN rounds to the sentinel's bytes).
    incomplete = {(i.buffer, i.written, i.expected) for i in report.measurement.incomplete}
    assert ("decode_partial_out", 127, 128) in incomplete


def test_a_gather_writing_one_row_too_many_is_a_stray_write(monkeypatch):
    """The last sequence's key length one longer: the gather writes row B * L of both requests."""
    g, config, _, _ = CASES["mea-prefill"]
    real = mea_route.gather_and_expand

    def one_more(plan):
        past = plan.past_seqlens.copy_to_host()
        past[-1] += 1
        real(replace(plan, past_seqlens=cuda.to_device(past)))

    monkeypatch.setattr(mea_route, "gather_and_expand", one_more)
    report = validate_shape(g, config)
    row = 2 * g.heads * g.head_size
    assert report.status == "failed" and {"stray writes", "guard bands"} <= set(report.failures)
    assert {(s.allocation, s.first_offset, s.nbytes) for s in report.measurement.stray} == {
        (name, g.batch * g.kv_len * row, row) for name in ("gathered_key", "gathered_value")}


def shrunk(monkeypatch, name: str, delta: int) -> None:
    """Make the recipe the validator sizes carve the request `name` `delta` bytes larger."""
    import attnws.kernels.validate as validate

    real = validate.recipe

    def edited(p, backend, **kwargs):
        r = real(p, backend, **kwargs)
        return replace(r, buffers=tuple(Allocation(b.name, b.nbytes + delta, b.device_sized) if b.name == name else b
                                        for b in r.buffers))

    monkeypatch.setattr(validate, "recipe", edited)


def test_a_request_one_element_too_small_is_undersized_and_nothing_runs(monkeypatch):
    g, config, _, _ = CASES["decode-two-splits-metadata"]
    shrunk(monkeypatch, "decode_partial_sum", -4)
    report = validate_shape(g, config)
    assert report.status == "failed" and report.undersized == ("decode_partial_sum",)
    assert report.outside_regions.failures == ("decode_partial_sum",)
    assert report.stages == () and report.allocations == ()


def test_a_request_one_element_too_large_is_oversized(monkeypatch):
    """ORT sizes each request for the one buffer it holds: a request beyond it is no documented slack."""
    g, config, _, _ = CASES["flash-decode"]
    shrunk(monkeypatch, "softmax_lse", 4)
    report = validate_shape(g, config)
    assert report.failures == ("oversized",) and report.slack.failures == ("softmax_lse",)
    assert [(o.allocation, o.nbytes - o.footprint_bytes, o.slack_bytes) for o in report.oversized] == [
        ("softmax_lse", 4, 0)]
    assert report.spare_bytes == 4


def test_the_combine_writing_padded_lse_tiles_past_the_varlen_lse_is_a_stray_write(monkeypatch):
    """ORT's varlen Flash writes the combined LSE unpadded, [N, T]; the kvcache API's padded tiles
    (16 rows a block here) run past the T * N floats of `softmax_lse`."""
    g, config, _, _ = CASES["flash-split-decode"]
    real = flash_split.launch_combine
    monkeypatch.setattr(flash_split, "launch_combine", lambda plan: real(replace(plan, unpadded_lse=False)))
    report = validate_shape(g, config)
    rows = g.batch * g.heads
    assert [(s.allocation, s.first_offset, s.nbytes) for s in report.measurement.stray] == [
        ("softmax_lse", 4 * rows, 4 * (16 - rows))]


def test_a_step_that_leaves_its_tokens_out_of_the_cache_fails_the_cache_and_the_reference(monkeypatch):
    """Without ReshapeAndCache the new positions keep the NaN the route's inputs hold there: the
    decode kernel reads them (a NaN split poisons its row) and the cache check finds the slots."""
    g, config, _, _ = CASES["decode-one-split"]
    real = routes.prepare

    def without_update(*args):
        prepared = real(*args)
        return replace(prepared, cache_update=replace(prepared.cache_update, enqueue=lambda: None))

    monkeypatch.setattr(routes, "prepare", without_update)
    report = validate_shape(g, config)
    assert {"present cache", "reference"} <= set(report.failures)
    assert report.present_cache.failures and np.isnan(report.max_error)
