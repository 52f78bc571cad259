"""Quality: planted bugs in MultiHeadAttention's workspace recipes, each caught by a theorem.

Every `Mutation` (tests/quality/mutations.py) patches `attnws.spec.mha.recipe`, which both the
runtime and ORT's estimate read: a bug there moves the two together, so the bound theorems cannot
see it. The independent statement of what the kernels touch (`attnws.spec.mha.footprint`, through
the `kernel_contract` theorem) must: each mutant is REFUTED by kernel_contract on a small target
where the real spec PROVES it. Kill rate 100%.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from attnws.spec.backends import mea
from attnws.spec.problem import Backend
from attnws.spec.target import target_from_dict

from tests.quality.kill_rate import RESULTS, record
from tests.quality.mutations import Mutation, accumulator_from_128, run_mutation

SUITE = "mha spec and solver"
mha_recipe = importlib.import_module("attnws.spec.mha.recipe")


def _target(name: str, **fields: Any):
    base = {"name": name, "op": "mha", "dtype": "fp16", "batch": "1..4", "heads": "2..2", "head_size": "64..64",
            "sm": 80}
    return target_from_dict({**base, **fields})


UNFUSED = _target("mha-unfused", seq="1..128", kv_seq="1..128", mask="2d_key_padding")
PAST = _target("mha-past-unfused", dtype="fp32", seq="1..64", kv_seq="1..64", past="0..64", with_past=True,
               with_present=True, qkv_bias=True)
RUNNER = _target("mha-runner", seq="1..128", qkv_bias=True, mask="1d_key_seq_len")
CROSS = _target("mha-cross", seq="1..64", kv_seq="1..128", qkv_bias=True, sm=75)
MEA_WIDE_V = _target("mha-mea-wide-v", batch="1..2", seq="1..64", kv_seq="1..64", heads="1..1",
                     v_head_size="128..128", qkv_bias=True)


def _per_backend(name: str, backend: Backend, replacement: Any) -> Any:
    """Return a plant replacing mha recipe function `name` by `replacement(original, *args)` for
    `backend` (the route given as the function's third argument) and leaving the others alone."""
    original = getattr(mha_recipe, name)

    def mutated(d: Any, p: Any, route: Backend, *rest: Any) -> Any:
        if route is backend:
            return replacement(original, d, p, route, *rest)
        return original(d, p, route, *rest)

    return lambda mp: mp.setattr(mha_recipe, name, mutated)


def _both(*plants: Any) -> Any:
    def plant(mp: Any) -> None:
        for one in plants:
            one(mp)

    return plant


def _one_scores_region(original, d, p, route):
    return mha_recipe.scores_bytes(d, p)


def _scores_view_only(original, d, p, route, offset):
    return [v for v in original(d, p, route, offset) if v.name == "scores"]


def _scores_by_l(mp: Any) -> None:
    mp.setattr(mha_recipe, "scores_used_bytes", lambda d, p: d.mul(
        p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.kv_sequence_length, what="scores by L"))


def _no_offsets(original, d, p, route, *rest):
    return [] if rest else 0


def _kv_offsets_over_q_offsets(original, d, p, route, offset):
    views = original(d, p, route, offset)
    q = next(v for v in views if v.name == "q_sequence_offsets")
    return [type(v)(v.name, v.allocation, q.offset, v.nbytes) if v.name == "kv_sequence_offsets" else v
            for v in views]


def _kv_copies_by_t(mp: Any) -> None:
    def qkv_bytes(d, p):
        t = p.total_sequence_length
        per_head = d.add(d.mul(d.add(p.sequence_length, t, what="S + T"), p.qk_head_size, what="(S + T) * H"),
                         d.mul(t, p.v_head_size, what="T * Hv"), what="per head")
        return d.mul(p.element_size, p.batch_size, p.num_heads, per_head, what="qkv by T")

    mp.setattr(mha_recipe, "qkv_bytes", qkv_bytes)


def _accumulator_from_128(mp: Any) -> None:
    mp.setattr(mea, "accumulator_bytes", accumulator_from_128)


def _direct_rule(rule: Any) -> Any:
    original = mha_recipe.no_qkv_workspace
    return lambda mp: mp.setattr(mha_recipe, "no_qkv_workspace", lambda p, backend: rule(p, backend, original))


MHA_MUTATIONS = [
    Mutation("unfused-one-scratch-region", "the unfused recipe forgets the second S x T region (softmax output)",
             _both(_per_backend("scratch_bytes", Backend.UNFUSED, _one_scores_region),
                   _per_backend("_scratch_views", Backend.UNFUSED, _scores_view_only)), UNFUSED),
    Mutation("unfused-scores-by-l", "the unfused S x T regions sized with L instead of T = P + L", _scores_by_l, PAST),
    Mutation("runner-without-offsets", "the fused runner's recipe drops the sequence offsets region",
             _both(_per_backend("scratch_bytes", Backend.TRT, _no_offsets),
                   _per_backend("_scratch_views", Backend.TRT, _no_offsets)), RUNNER),
    Mutation("cross-without-offsets", "the cross-attention recipe drops both sequence offset regions",
             _both(_per_backend("scratch_bytes", Backend.TRT_CROSS, _no_offsets),
                   _per_backend("_scratch_views", Backend.TRT_CROSS, _no_offsets)), CROSS),
    Mutation("cross-kv-offsets-over-q", "the kv sequence offsets placed over the q offsets",
             _per_backend("_scratch_views", Backend.TRT_CROSS, _kv_offsets_over_q_offsets), CROSS),
    Mutation("kv-copies-by-t", "the K and V copies reserved with T = P + L rows instead of L", _kv_copies_by_t, PAST),
    Mutation("mha-accumulator-from-128", "MEA's float32 accumulator for Hv >= 128 instead of Hv > 128",
             _accumulator_from_128, MEA_WIDE_V),
    Mutation("unfused-reads-inputs", "the unfused route is taken to read separate Q, K, V without copies",
             _direct_rule(lambda p, backend, original: original(p, backend) or backend is Backend.UNFUSED), UNFUSED),
    Mutation("past-bias-ignored", "with past and a bias, K and V are taken to need no copy for MEA or unfused",
             _direct_rule(lambda p, backend, original: original(p, backend) or (
                 p.has_past and backend in (Backend.MEA, Backend.UNFUSED))), PAST),
]


@pytest.mark.parametrize("mutation", MHA_MUTATIONS, ids=[m.name for m in MHA_MUTATIONS])
def test_mha_mutation_is_caught_by_the_kernel_contract(mutation, monkeypatch):
    kill = run_mutation(mutation, monkeypatch)
    caught = any(r.theorem == "kernel_contract" for r in kill.killers)
    record(SUITE, mutation.name, caught)
    for result in kill.killers:
        print(f"{mutation.name}: {result.theorem} {result.verdict.value}, "
              f"{result.counterexample or result.vacuous_because}")
    assert caught, f"{mutation.name} ({mutation.description}) survived kernel_contract; killers: " \
                   f"{[r.theorem for r in kill.killers]}"


def test_mha_kill_rate_is_100_percent():
    assert len(MHA_MUTATIONS) >= 8
    missing = [m.name for m in MHA_MUTATIONS if m.name not in RESULTS.get(SUITE, {})]
    if missing:
        pytest.skip(f"run with the whole module to report the kill rate (not run: {missing})")
    assert all(RESULTS[SUITE].values())
