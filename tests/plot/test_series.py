"""The plotted series against the spec: every drawn value is the spec's at that shape, the drops of
the runtime line are the solver's non-monotonic pairs, and sampling keeps every threshold."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnws.spec.command_line import load_target_arg
from attnws.plot.series import SWEEPS, Series, compute_series, parse_at
from attnws.spec.families import family_backends
from attnws.spec.aggregate import root_layout
from attnws.spec.dispatch import dispatch
from attnws.spec.errors import WorkspaceError
from attnws.spec.estimate import estimate_exact, runtime_problem
from attnws.spec.recipe import recipe
from attnws.spec.target import DEFAULT_TARGET, DimRange, Target

CASES = [  # (target, sweep): thresholds along seq, a head-size sweep, a runner-unknown target, tokens sampled
    ("bert-base-pmha-fp32-sm80", "seq"), ("bert-base-pmha-fp16-sm80", "batch"), ("pa-fp16-sm86-odd-heads", "seq"),
    ("small-head-pmha-fp16-sm80-trt-regime", "seq"), ("pa-fp16-sm80-head-bound-1032", "head-size"),
    ("bert-base-pa-fp16-sm80-runner-unknown", "seq"), ("vit-b16-pa-fp16-sm80-attn-bias", "seq"),
    ("bert-base-pmha-fp16-sm80", "tokens"), ("long-seq-pmha-fp32-sm80", "seq"),
]


def target(name: str) -> Target:
    return DEFAULT_TARGET if name == "default" else load_target_arg(name)


@lru_cache(maxsize=None)
def series(name: str, sweep: str, proofs: bool = False) -> Series:
    return compute_series(target(name), sweep, proofs=proofs)


def dims_at(t: Target, sweep: str, x: int) -> dict[str, int]:
    """The shape of one swept value, stated here: the other dimensions at their declared maximum."""
    dims = {d: getattr(t, d).hi for d in ("batch", "seq", "heads", "head_size") if d != SWEEPS[sweep]}
    for d in ("v_head_size", "input_hidden", "tokens"):
        if getattr(t, d) is not None and d != SWEEPS[sweep]:
            dims[d] = getattr(t, d).hi
    dims[SWEEPS[sweep]] = x
    return dims


@settings(max_examples=60)
@given(case=st.sampled_from(CASES), data=st.data())
def test_every_plotted_value_is_the_spec_at_that_shape(case, data):
    name, sweep = case
    t, s = target(name), series(*case)
    point = data.draw(st.sampled_from(s.points))
    g = t.geometry(**dims_at(t, sweep, point.x))
    exact = estimate_exact(g, t.config)
    assert point.runtime == (exact.total_workspace_bytes if exact.ok else None)
    try:
        problem = runtime_problem(g)
    except WorkspaceError:
        assert point.runtime is None and all(v is None for v in point.recipes.values())
        return
    outcome = dispatch(problem, t.config)
    if exact.ok:
        assert point.dispatched == tuple(b.value for b in outcome.backends)
    for backend in family_backends(t.op):
        try:
            r = recipe(problem, backend)
            expected = root_layout(r.projection_bytes, r.attention_workspace_bytes)[1]
        except WorkspaceError:
            expected = None
        assert point.recipes[backend.value] == expected, (backend, point.x)


@pytest.mark.parametrize("name, sweep", CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_sampling_keeps_every_threshold_and_at_most_about_2000_points(name, sweep):
    s = series(name, sweep)
    xs = s.x
    assert xs == sorted(set(xs)) and len(xs) <= 2100
    for a, b in zip(s.points, s.points[1:]):
        if a.dispatched != b.dispatched or (a.runtime is None) != (b.runtime is None):
            assert b.x == a.x + 1, f"dispatch changes between {a.x} and {b.x} but the values between are not drawn"


def test_a_long_sweep_is_sampled_to_about_2000_points_with_its_ends():
    s = series("bert-base-pmha-fp16-sm80", "tokens")
    assert s.x[0] == 1 and s.x[-1] == 32 * 512 and 1900 <= len(s.x) <= 2100


def test_the_single_threshold_target_drops_exactly_at_the_solver_pair_255_to_256():
    s = series("bert-base-pmha-fp32-sm80", "seq", proofs=True)
    assert s.drops() == [(255, 256)]
    assert [tuple(p["x"]) for p in s.pairs] == s.drops()
    pair = s.pairs[0]
    assert pair["backends"] == [["unfused"], ["mea"]]
    by_x = {p.x: p.runtime for p in s.points}
    assert pair["runtime_bytes"] == [by_x[255], by_x[256]]
    assert s.estimate_bytes == 1_912_602_624 and s.max_bytes == 549_918_720 and s.max_verdict == "PROVED"
    # the tight policy is the proven maximum, needed at the last unfused S
    assert s.tight_bytes == s.max_bytes and s.tight_method == "proven maximum" and s.tight_is_maximum
    assert s.tight_witness["seq"] == 255 and s.tight_witness["backends"] == ["unfused"]


@pytest.mark.parametrize("name, sweep", [c for c in CASES if c[1] != "tokens"], ids=lambda v: str(v))
def test_the_solver_pairs_are_the_first_drop_of_each_backend_transition(name, sweep):
    """nonmonotonic_pairs reports one minimal pair per (backend at p, backend at q): along the line
    that is the first drop of each transition; a single-threshold line has exactly one."""
    s = series(name, sweep, proofs=True)
    at = {p.x: p for p in s.points}
    first: dict[tuple, tuple[int, int]] = {}
    for a, b in s.drops():
        first.setdefault((at[a].dispatched, at[b].dispatched), (a, b))
    assert sorted(tuple(p["x"]) for p in s.pairs) == sorted(first.values())
    for pair in s.pairs:
        assert pair["runtime_bytes"] == [at[pair["x"][0]].runtime, at[pair["x"][1]].runtime]


def test_the_default_target_never_leaves_0_bytes_under_ort_456_mib():
    s = series("default", "seq", proofs=True)
    assert set(s.runtime) == {0} and s.drops() == [] and s.pairs == ()
    assert s.estimate_bytes == 478_150_656 and s.tight_bytes == 0 and s.max_bytes == 0
    assert s.tight_method == "proven maximum" and s.patterns == ()


def test_at_holds_a_dimension_and_the_json_lists_every_series():
    s = compute_series(DEFAULT_TARGET, "seq", {"batch": 4}, proofs=False)
    assert s.held["batch"] == 4
    doc = s.as_dict()
    assert set(doc) == {"target", "configuration", "sweep", "held", "x", "series", "drawn_backends", "not_drawn",
                        "drops", "route_changes", "no_bytes", "pairs", "pair_search", "patterns"}
    assert {"tight_bound_bytes", "tight_bound_verdict", "tight_method", "tight_witness", "proven_max_bytes",
            "proven_max_verdict", "route_text", "ort_estimate_unavailable", "left_out"} <= set(doc["series"])
    assert doc["patterns"] == [] and doc["pair_search"] is None and doc["series"]["left_out"] is None
    assert doc["no_bytes"] == [] and doc["route_changes"] == [] and doc["series"]["ort_estimate_unavailable"] is None
    assert doc["series"]["route_text"] == [""] * len(doc["x"])  # TRT's route says nothing beyond its name
    assert set(doc["series"]["recipe_bytes"]) == {b.value for b in family_backends(DEFAULT_TARGET.op)}
    assert all(len(v) == len(doc["x"]) for v in doc["series"]["recipe_bytes"].values())
    assert len(doc["series"]["runtime_bytes"]) == len(doc["x"])


@pytest.mark.parametrize("name, drawn, not_drawn", [
    ("default", ("trt", "mea", "unfused"), {"flash": "packed QKV needs S >= 513, S bound = 512"}),
    ("bert-base-pmha-fp32-sm80", ("mea", "unfused"),
     {"trt": "needs fp16, element size = 4", "flash": "needs fp16, element size = 4"}),
    ("bert-large-pmha-fp16-sm90", ("flash", "mea", "unfused"),
     {"trt": "no supported TRT kernel on sm90 for S in [1, 1024] and head sizes <= 64"}),
])
def test_only_backends_that_can_run_are_drawn_the_others_say_why(name, drawn, not_drawn):
    """A backend is drawn where dispatch picks it on the line or the estimate counts it reachable
    (MEA and unfused explain the default target's 456 MiB though TRT takes every shape); TRT at fp32
    or on sm90 never runs and is named with the spec's reason instead of drawn at 0 B."""
    s = series(name, "seq")
    assert s.drawn == drawn and dict(s.not_drawn) == not_drawn
    picked = {b for p in s.points for b in p.dispatched}
    assert picked <= set(s.drawn)


def test_a_packed_attention_series_does_not_name_flash_which_it_has_not():
    s = series("bert-base-pa-fp16-sm75", "seq")
    assert "flash" not in s.drawn and "flash" not in dict(s.not_drawn)


def test_an_implicit_dimension_held_at_its_relation_is_the_same_line():
    """Hv = H on a target without a v_head_size range: --at v-head-size=64 (= H) draws the line
    without it; the same for L = S and P = 0."""
    whisper = target("mha-whisper-decoder-cross-fp16-sm75")
    assert parse_at(["v-head-size=64"], "seq", whisper) == {}
    encoder = target("mha-bert-encoder-fp16-sm80")
    assert parse_at(["kv-seq=64", "seq=64"], "batch", encoder) == {"seq": 64}
    plain = compute_series(whisper, "seq", parse_at(["v-head-size=64", "kv-seq=8"], "seq", whisper), proofs=False)
    assert plain.as_dict() == compute_series(whisper, "seq", {"kv_seq": 8}, proofs=False).as_dict()


def test_a_sweep_of_batch_or_seq_starts_where_b_times_s_holds_the_held_tokens():
    """T <= B*S: with T = 1000 held at B = 4 the seq sweep starts at S = 250, the first valid shape."""
    t = target("bert-base-pmha-fp32-sm80")
    s = compute_series(t, "seq", parse_at(["tokens=1000", "batch=4"], "seq", t), proofs=False)
    assert s.x[0] == 250 and s.x[-1] == 512 and all(p.runtime is not None for p in s.points)
    assert s.configuration.endswith("S = 250..512, B = 4, N = 12, H = 64, T = 1000")


def test_declared_tokens_follow_b_times_s_up_to_their_maximum_and_the_title_says_so():
    t = replace(target("bert-base-pmha-fp16-sm80"), tokens=DimRange(64, 4096))
    s = compute_series(t, "seq", proofs=False)
    assert s.x[0] == 2 and "T = min(4096, B*S)" in s.configuration  # B = 32: S = 1 holds 32 < 64 tokens
    for p in s.points:
        assert t.contains(t.geometry(batch=32, seq=p.x, heads=12, head_size=64, tokens=min(4096, 32 * p.x)))


def test_the_line_names_the_relations_it_holds():
    past = replace(target("mha-bert-encoder-fp16-sm80"), with_past=True, with_present=True)
    assert "L = S, P = 0" in compute_series(past, "seq", proofs=False).configuration
