"""ORT 1.31.1's own GroupQueryAttention estimate (`attnws.spec.gqa.estimate`): the bounds cases
of `group_query_attention_workspace_estimate_test.cc` (index id 68383314842,
`tests/data/ort-gqa-golden.json`) and the aggregate's contract: the maximum over the routes,
never below a route's complete recipe inside the bounds."""

from __future__ import annotations

import itertools

import pytest

from attnws.spec.errors import InvalidArgument, Unavailable, WorkspaceOverflow
from attnws.spec.gqa.estimate import FAST_DECODE, Bounds, aggregate_for_bounds, level1
from attnws.spec.gqa.problem import GqaWorkspaceProblem, HeadSinkStorage
from attnws.spec.gqa.recipe import Route, complete
from attnws.spec.problem import Backend

ROUTES = frozenset({Backend.XQA, Backend.UNFUSED})


def bounds(**changes):
    base = dict(qkv_element_size=2, cache_element_size=2, batch_size_bound=2, sequence_length_bound=4, num_heads=8,
                kv_num_heads=2, head_size_bound=64, present_kv_cache_capacity_bound=256, routes=ROUTES, sm_count=108)
    return Bounds(**{**base, **changes})


def test_routes_aggregate_with_max():
    both = aggregate_for_bounds(bounds(head_sink=HeadSinkStorage.DYNAMIC_CONVERSION))
    alone = [aggregate_for_bounds(bounds(routes=frozenset({r}), head_sink=HeadSinkStorage.DYNAMIC_CONVERSION))
             for r in ROUTES]
    assert both.total_workspace_bytes == max(a.total_workspace_bytes for a in alone)


@pytest.mark.parametrize("changes", [dict(head_sink_may_be_prepacked=True, head_sink=HeadSinkStorage.DYNAMIC_CONVERSION),
                                     dict(head_sink=HeadSinkStorage.PREPACKED_FP32)])
def test_prepacked_head_sink_lifetimes(changes):
    result = aggregate_for_bounds(bounds(**changes))
    assert (result.persistent_prepack_bytes, result.initialization_scratch_bytes) == (32, 16)


def test_reachable_cudnn_is_unavailable():
    with pytest.raises(Unavailable, match="no graph-free workspace oracle"):
        aggregate_for_bounds(bounds(routes=frozenset({Backend.UNFUSED, Backend.CUDNN})))
    assert aggregate_for_bounds(bounds(routes=frozenset({Backend.UNFUSED}))).total_workspace_bytes > 0


def test_overflow_and_the_windowed_int32_bound():
    huge = 2**31 - 1
    with pytest.raises(WorkspaceOverflow):
        aggregate_for_bounds(bounds(batch_size_bound=huge, sequence_length_bound=huge, num_heads=huge, kv_num_heads=1,
                                    head_size_bound=huge, present_kv_cache_capacity_bound=huge,
                                    routes=frozenset({Backend.UNFUSED})))
    with pytest.raises(InvalidArgument, match="Windowed GQA effective KV length bound must fit int32."):
        aggregate_for_bounds(bounds(sequence_length_bound=2, present_kv_cache_capacity_bound=huge,
                                    is_windowed_kv_cache=True, routes=frozenset({Backend.UNFUSED})))


def test_invalid_bounds_and_no_route():
    with pytest.raises(InvalidArgument, match="incomplete or invalid"):
        aggregate_for_bounds(bounds(num_heads=6, kv_num_heads=4))
    with pytest.raises(Unavailable, match="No GQA backend route can be sized."):
        aggregate_for_bounds(bounds(routes=frozenset()))
    with pytest.raises(Unavailable, match="No XQA head geometry"):
        aggregate_for_bounds(bounds(head_size_bound=56, routes=frozenset({Backend.XQA})))


def test_windowed_bound_uses_the_staged_extent():
    """#32602: a windowed prompt stages C + S rows; ORT's test sizes unfused at T = 260 for C 256, S 4."""
    b = bounds(is_windowed_kv_cache=True, local_window_size=256, routes=frozenset({Backend.UNFUSED}))
    p = GqaWorkspaceProblem(2, 2, 2, 4, 8, 2, 64, 256, is_windowed_kv_cache=True)
    run = complete(p, Route(Backend.UNFUSED, total_sequence_length=1_000_000))
    assert run.preparation.effective_kv_cache_capacity == 260
    assert run.backend.region("scores").nbytes == 2 * 8 * 4 * 260 * 4
    assert aggregate_for_bounds(b).total_workspace_bytes >= run.total_workspace_bytes


def test_the_aggregate_covers_every_concrete_route_inside_the_bounds():
    """The contract ORT's sweep checked (#32617), here over a small box: every reachable route
    at every shape inside the bounds needs at most the aggregate."""
    b = bounds(routes=frozenset({Backend.FLASH, FAST_DECODE, Backend.MEA, Backend.UNFUSED}),
               sequence_length_bound=3, present_kv_cache_capacity_bound=600, head_size_bound=64)
    total = aggregate_for_bounds(b).total_workspace_bytes
    for batch, seq, cap, first in itertools.product((1, 2), (1, 2, 3), (1, 300, 513, 600), (False, True)):
        p = GqaWorkspaceProblem(2, 2, batch, seq, 8, 2, 64, cap, is_first_prompt=first)
        for kv in {1, cap // 2 + 1, cap}:
            routes = [Route(Backend.FLASH, total_sequence_length=kv), Route(Backend.MEA),
                      Route(Backend.UNFUSED, total_sequence_length=kv)]
            if not first:
                routes.append(Route(Backend.FLASH, total_sequence_length=kv, fast_decode=True))
            for route in routes:
                assert complete(p, route).total_workspace_bytes <= total, (batch, seq, cap, first, kv, route)


def test_level1_reports_workspace_only_when_ok_and_nonzero():
    ok = aggregate_for_bounds(bounds(head_sink=HeadSinkStorage.PREPACKED_FP32))
    assert level1(ok).runtime_workspace_bytes == ok.total_workspace_bytes
    assert level1(ok).persistent_prepack_bytes == 32
    assert level1(Unavailable("cuDNN")) is None
