"""GroupQueryAttention proofs over a box (`attnws.solver.gqa_proofs`): the encoding agrees with
the concrete spec shape by shape, ORT's estimate is proved safe, the proven maximum is the
brute-force maximum of a small box, and an estimator that sizes Flash at the longest key length
(the bug #32453 warns of) is refuted with a replayed shape."""

from __future__ import annotations

import itertools

import z3

from attnws.solver.gateway import Limits, Verdict
from attnws.solver import gqa_proofs
from attnws.solver.gqa_proofs import encode, maximum, runtime_bytes, safe_bound
from attnws.spec.backends import flash
from attnws.spec.errors import WorkspaceError
from attnws.spec.gqa import estimate
from attnws.spec.options import RuntimeConfig
from attnws.spec.target import DimRange

from tests.gqa_targets import gqa_target

LIMITS = Limits(rlimit=200_000_000)
NO_XQA = RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0"})
PAIR = gqa_target("pair", 2, 2, 64, 16384, DimRange(1, 1), DimRange(1, 1), DimRange(1, 16384), NO_XQA,
                  max_total_seq=16384)
# Smooth softmax rules the unfused route out and the variables XQA and MEA: ORT sizes Flash alone.
FLASH_ONLY = gqa_target("flash-only", 2, 2, 64, 16384, DimRange(1, 1), DimRange(1, 1), DimRange(1, 16384),
                        RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0", "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}),
                        smooth_softmax=True, max_total_seq=16384)
SMALL = gqa_target("small", 4, 2, 64, 96, DimRange(1, 2), DimRange(1, 3), DimRange(1, 96), RuntimeConfig.make(),
                   max_total_seq=96)


def _eval(term, values):
    """The value of a term (or a Python bool / int) at the given dimension values."""
    if isinstance(term, (bool, int)):
        return term
    result = z3.simplify(z3.substitute(term, *values))
    return z3.is_true(result) if z3.is_bool(result) else result.as_long()


def _replay_all(box):
    found = {}
    for b, s, t in itertools.product(range(box.batch.lo, box.batch.hi + 1), range(box.seq.lo, box.seq.hi + 1),
                                     range(box.total_seq.lo, box.total_seq.hi + 1)):
        try:
            found[(b, s, t)] = runtime_bytes(box, {"batch": b, "seq": s, "total_seq": t})
        except WorkspaceError:
            continue
    return found


def test_the_encoding_agrees_with_the_concrete_spec_on_every_shape_of_a_small_box():
    enc = encode(SMALL)
    runs = _replay_all(SMALL)
    assert len(runs) > 50
    for (b, s, t), (backend, workspace, _) in runs.items():
        values = [(enc.variables["batch"], z3.IntVal(b)), (enc.variables["seq"], z3.IntVal(s)),
                  (enc.variables["total_seq"], z3.IntVal(t))]
        picked = [c for c in enc.cases if _eval(c.picked, values)]
        assert [c.backend for c in picked] == [backend]
        if workspace is not None:
            assert _eval(picked[0].workspace, values) == workspace


def test_the_proven_maximum_is_the_brute_force_maximum():
    runs = _replay_all(SMALL)
    best = max(w for _, w, _ in runs.values() if w is not None)
    found = maximum(SMALL, LIMITS)
    assert found.bytes == best
    assert runs[tuple(found.witness[k] for k in ("batch", "seq", "total_seq"))][1] == best
    decode = maximum(SMALL, LIMITS, {"seq": DimRange(1, 1)})
    assert decode.bytes == max(w for (b, s, t), (_, w, _) in runs.items() if s == 1 and w is not None)


def test_ort_estimate_is_safe_over_the_key_lengths():
    result = safe_bound(PAIR, LIMITS)
    assert result.verdict is Verdict.PROVED and result.ort_bytes > 0


def test_sizing_flash_at_the_longest_key_length_is_refuted(monkeypatch):
    """The planted estimator bug: Flash's envelope evaluates the heuristic at the longest key
    length instead of taking the split count's ceiling; the drop below 13,825 keys breaks it."""
    def at_longest(d, p, kv, sm_count, window, fast):
        rows, blocks = estimate.flash_backend.split_rows(d, p.batch_size, p.kv_num_heads if fast else p.num_heads,
                                                         p.sequence_length), flash.key_blocks(d, p.head_size, kv)
        return estimate.flash_regions(d, p, flash.split_count(d, rows, blocks, sm_count))

    assert safe_bound(FLASH_ONLY, LIMITS).verdict is Verdict.PROVED
    monkeypatch.setattr(estimate, "flash_envelope", at_longest)
    result = safe_bound(FLASH_ONLY, LIMITS)
    assert result.verdict is Verdict.REFUTED
    shape = result.counterexample
    assert shape["bytes"] > result.ort_bytes and shape["backend"] == "flash"


def test_an_estimate_ort_does_not_declare_is_vacuous():
    unset = gqa_target("unset", 4, 2, 64, 96, DimRange(1, 2), DimRange(1, 3), DimRange(1, 96), RuntimeConfig.make())
    result = safe_bound(unset, LIMITS)
    assert result.verdict is Verdict.VACUOUS and "gqa_workspace_max_total_sequence_length" in result.vacuous_because
    assert gqa_proofs.ort_bound(unset)[0] is None


# -- the kernel contract: the recipes against what the kernels touch -----------------------------
from attnws.solver.gqa_proofs import kernel_contract  # noqa: E402
from attnws.spec.gqa import recipe  # noqa: E402

MEA_BOX = gqa_target("mea", 8, 2, 64, 256, DimRange(1, 2), DimRange(1, 4), DimRange(1, 256),
                     RuntimeConfig.make(sm=75), max_total_seq=256)  # sm75: MEA runs everything
WINDOWED = gqa_target("windowed", 8, 2, 64, 64, DimRange(1, 1), DimRange(1, 8), DimRange(1, 512), RuntimeConfig.make(),
                      window=64, sliding_window_cache=True)


def test_the_recipes_hold_the_kernels_buffers():
    for box in (MEA_BOX, WINDOWED, SMALL):
        assert kernel_contract(box, LIMITS).verdict is Verdict.PROVED, box.name


def test_k_v_expansion_with_kv_heads_rows_is_refuted(monkeypatch):
    """The planted bug: MEA's expanded K/V sized with the Nk KV heads instead of the N query heads."""
    monkeypatch.setattr(recipe, "expanded_kv_bytes", lambda d, p, capacity: d.mul(
        p.qkv_element_size, p.batch_size, p.kv_num_heads, capacity, p.head_size, what="planted"))
    result = kernel_contract(MEA_BOX, LIMITS)
    assert result.verdict is Verdict.REFUTED
    assert any("Ungroup" in v for v in result.counterexample["violations"])


def test_staging_without_the_new_tokens_is_refuted(monkeypatch):
    """The planted bug: windowed staging sized with C rows instead of C + S."""
    monkeypatch.setattr(recipe, "staged_cache_bytes", lambda d, p, staged, row: d.mul(
        p.batch_size, p.kv_num_heads, p.present_kv_cache_capacity, row, what="planted"))
    result = kernel_contract(WINDOWED, LIMITS)
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["seq"] > 1
    assert any("CopyKvCacheRows" in v for v in result.counterexample["violations"])
