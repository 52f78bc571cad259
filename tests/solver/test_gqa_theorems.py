"""GroupQueryAttention through the shared theorems: the encoding agrees with the concrete spec
shape by shape, ORT's own estimate is proved safe and its planted Flash bug (#32453's warning:
sizing Flash at the longest key length) refuted, the proven maximum is the brute-force maximum
of a small box, the kernel contract holds and its planted recipe bugs are refuted, #32453's
key-length drop is found by the shared findings search, and Flash's falling split count refutes
`route_monotonicity` with a replayed pair."""

from __future__ import annotations

import itertools

import pytest

from attnws.solver.counterexamples import nonmonotonic_pairs
from attnws.solver.encode import encode, evaluate
from attnws.solver.gateway import Limits, Verdict
from attnws.solver.session import Session
from attnws.solver.theorems import THEOREMS, context
from attnws.solver.tight import pattern_maximum
from attnws.spec.backends import flash
from attnws.spec.dispatch import dispatch
from attnws.spec.estimate import estimate_exact, runtime_problem
from attnws.spec.errors import WorkspaceError
from attnws.spec.gqa import estimate, recipe
from attnws.spec.options import RuntimeConfig
from attnws.spec.target import DimRange, Pattern

from tests.gqa_targets import gqa_target

LIMITS = Limits()
FLASH_ENV = {"ORT_ENABLE_XQA": "0", "ORT_DISABLE_FLASH_DECODE": "1"}
PAIR = gqa_target("pair", 2, 2, 64, 16384, DimRange(1, 1), DimRange(1, 1), DimRange(13800, 13900),
                  RuntimeConfig.make(env=FLASH_ENV), max_total_seq=16384)
# Smooth softmax rules the unfused route out and the variables XQA and MEA: ORT sizes Flash alone.
FLASH_ONLY = gqa_target("flash-only", 2, 2, 64, 16384, DimRange(1, 1), DimRange(1, 1), DimRange(1, 16384),
                        RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0", "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}),
                        smooth_softmax=True, max_total_seq=16384)
SMALL = gqa_target("small", 4, 2, 64, 96, DimRange(1, 2), DimRange(1, 3), DimRange(1, 96), RuntimeConfig.make(),
                   max_total_seq=96)
MEA_BOX = gqa_target("mea", 8, 2, 64, 256, DimRange(1, 2), DimRange(1, 4), DimRange(1, 256),
                     RuntimeConfig.make(sm=75), max_total_seq=256)  # sm75: MEA runs everything
WINDOWED = gqa_target("windowed", 8, 2, 64, 64, DimRange(1, 1), DimRange(1, 8), DimRange(1, 512), RuntimeConfig.make(),
                      window=64, sliding_window_cache=True)


def _runs(box):
    """Every valid shape of the box with its backend and bytes, from the concrete spec."""
    found = {}
    for b, s, t in itertools.product(range(box.batch.lo, box.batch.hi + 1), range(box.seq.lo, box.seq.hi + 1),
                                     range(box.total_seq.lo, box.total_seq.hi + 1)):
        g = box.geometry(batch=b, seq=s, total_seq=t, heads=box.heads.hi, head_size=box.head_size.hi,
                         kv_heads=box.kv_heads.hi, past=box.past.hi)
        try:
            problem = runtime_problem(g)
        except WorkspaceError:
            continue
        exact = estimate_exact(g, box.config)
        found[(b, s, t)] = (dispatch(problem, box.config).backends, exact.total_workspace_bytes if exact.ok else None)
    return found


def _theorem(name, box):
    return THEOREMS[name](context(box, LIMITS))


def test_the_encoding_agrees_with_the_concrete_spec_on_every_shape_of_a_small_box():
    enc = encode(SMALL)
    runs = _runs(SMALL)
    assert len(runs) > 50
    for (b, s, t), (backends, workspace) in runs.items():
        model = {"batch": b, "seq": s, "total_seq": t}
        assert evaluate(enc.valid, enc.shape, model) is True
        picked = [backend for backend, route in enc.routes.items() if evaluate(route.selected, enc.shape, model)]
        assert picked == list(backends)
        assert evaluate(enc.runtime_bytes, enc.shape, model) == workspace


def test_the_proven_maximum_is_the_brute_force_maximum():
    runs = _runs(SMALL)
    result = _theorem("tightness", SMALL)
    best = max(w for _, w in runs.values() if w is not None)
    assert result.verdict is Verdict.PROVED and result.details["max_runtime_bytes"] == best
    witness = result.details["witness"]
    assert runs[(witness["batch"], witness["seq"], witness["total_seq"])][1] == best
    decode = pattern_maximum(SMALL, Pattern("decode", (("seq", DimRange(1, 1)),)), LIMITS)
    assert decode.details["max_runtime_bytes"] == max(w for (_, s, _), (_, w) in runs.items() if s == 1)


def test_ort_estimate_is_safe_and_sizing_flash_at_the_longest_key_length_is_refuted(monkeypatch):
    """The planted estimator bug: Flash's envelope evaluates the heuristic at the longest key
    length instead of taking the split count's ceiling; the drop below 13,825 keys breaks it."""
    def at_longest(d, p, kv, sm_count, window, fast):
        rows, blocks = estimate.flash_backend.split_rows(d, p.batch_size, p.kv_num_heads if fast else p.num_heads,
                                                         p.sequence_length), flash.key_blocks(d, p.head_size, kv)
        return estimate.flash_regions(d, p, flash.split_count(d, rows, blocks, sm_count))

    assert _theorem("safe_bound", FLASH_ONLY).verdict is Verdict.PROVED
    monkeypatch.setattr(estimate, "flash_envelope", at_longest)
    result = _theorem("safe_bound", FLASH_ONLY)
    assert result.verdict is Verdict.REFUTED
    shape = result.counterexample
    assert shape["runtime_bytes"] > shape["bound_bytes"] and shape["backends"] == ["flash"]


def test_an_estimate_ort_does_not_declare_is_vacuous():
    unset = gqa_target("unset", 4, 2, 64, 96, DimRange(1, 2), DimRange(1, 3), DimRange(1, 96), RuntimeConfig.make())
    result = _theorem("safe_bound", unset)
    assert result.verdict is Verdict.VACUOUS and not result.expected
    assert "gqa_workspace_max_total_sequence_length" in result.details["estimate_message"]


def test_the_32453_drop_is_found_by_the_shared_search():
    pairs, status = nonmonotonic_pairs(PAIR, Session("pair", LIMITS))
    assert status.state == "found"
    assert [(p.smaller.dims["total_seq"], p.larger.dims["total_seq"]) for p in pairs] == [(13824, 13825)]
    assert pairs[0].smaller.runtime_bytes > pairs[0].larger.runtime_bytes


def test_flash_s_falling_split_count_refutes_route_monotonicity():
    result = _theorem("route_monotonicity", PAIR)
    ce = result.counterexample
    assert result.verdict is Verdict.REFUTED and ce["backend"] == "flash" and ce["dimension"] == "total_seq"
    assert (ce["smaller"]["total_seq"], ce["larger"]["total_seq"]) == (13824, 13825)
    assert ce["smaller"]["bytes"] > ce["larger"]["bytes"]


@pytest.mark.parametrize("box", [MEA_BOX, WINDOWED, SMALL], ids=lambda b: b.name)
def test_the_recipes_hold_the_kernels_buffers(box):
    assert _theorem("kernel_contract", box).verdict is Verdict.PROVED


def test_k_v_expansion_with_kv_heads_rows_is_refuted(monkeypatch):
    """The planted bug: MEA's expanded K/V sized with the Nk KV heads instead of the N query heads."""
    monkeypatch.setattr(recipe, "expanded_kv_bytes", lambda d, p, capacity: d.mul(
        p.qkv_element_size, p.batch_size, p.kv_num_heads, capacity, p.head_size, what="planted"))
    result = _theorem("kernel_contract", MEA_BOX)
    assert result.verdict is Verdict.REFUTED
    assert any("Ungroup" in v for v in result.counterexample["failing"])


def test_staging_without_the_new_tokens_is_refuted(monkeypatch):
    """The planted bug: windowed staging sized with C rows instead of C + S."""
    monkeypatch.setattr(recipe, "staged_cache_bytes", lambda d, p, staged, row: d.mul(
        p.batch_size, p.kv_num_heads, p.present_kv_cache_capacity, row, what="planted"))
    result = _theorem("kernel_contract", WINDOWED)
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["seq"] > 1
    assert any("CopyKvCacheRows" in v for v in result.counterexample["failing"])
