"""MultiHeadAttention's Flash side allocations (the softmax LSE and the split-KV accumulators ORT
takes beside the workspace) against hand-worked numbers and ORT's own test expectations, and the
estimate note's bound over every shape up to a maximum.

Sources (docs/research/multihead-attention.md, "Flash side allocations"):
- MHA: onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc @ 541d5daff6b39db7204fc4bb43c92df5b95f0a46
  calls get_softmax_lse_size(S, B, N) and get_num_splits_and_buffer_sizes(B, S, T, N, H, SMs),
  then one GetScratchBuffer each for the LSE, the LSE accumulator and the output accumulator.
- FLASH: onnxruntime/contrib_ops/cuda/bert/flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03
  LSE 4*B*N*S; block_n 256 (H <= 64), 128 (H <= 128), 64; key blocks ceil(T / block_n); query
  blocks B*N*ceil(S/64), 1 split when >= 0.8f * SMs; else the smallest eligible count in
  1..min(128, SMs, key blocks) whose wave efficiency is >= 0.85 * the best; accumulators only
  when splits > 1: 4*splits*B*S*N and 4*splits*B*S*N*round32(H).
- GQA_TEST: test_cases/group_query_attention_workspace_xqa_flash_test.cc (index id 58001277336),
  ORT's asserted split counts for GQA's regular Flash route, which calls the same function with
  the same arguments (B, S, T, N query heads, H, SMs) as MultiHeadAttention.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import z3

from attnws.solver.domain import SymbolicDomain
from attnws.spec import Backend, RuntimeConfig
from attnws.spec.estimate import estimate_for_node
from attnws.spec.mha import recipe as mha_recipe
from attnws.spec.mha.estimate import note
from attnws.spec.mha.recipe import side_allocation_bound, side_allocations

from .helpers import mha_problem


def decode(b, s, n, h, t, past=0):
    """A problem with B, S, N, H and key length T = past + L (L = t - past new keys)."""
    return mha_problem(b=b, s=s, l=t - past, n=n, h=h, past=past or None)


def fields(side):
    return side.splits, side.softmax_lse_bytes, side.softmax_lse_accum_bytes, side.out_accum_bytes, side.total_bytes


# (B, S, N, H, T, past, SMs) -> (splits, LSE, LSE accumulator, output accumulator, total), by hand.
HAND = {
    # 13,824 keys / 256 = 54 blocks; 2 query blocks < 86.4; eff(c) = (2c / 108) / ceil(...) = c / 54
    # for c <= 54, best 1.0 at c = 54; counts 46..53 are not eligible (ceil(54 / c) = 2 = ceil(54 / (c - 1))),
    # so the first eligible count reaching 0.85 is 54.
    "B1 S1 N2 H64 T13824 sm108 splits 54": (
        (1, 1, 2, 64, 13824, 0, 108),
        (54, 4 * 1 * 2 * 1, 4 * 54 * 1 * 1 * 2, 4 * 54 * 1 * 1 * 2 * 64, 8 + 432 + 27648)),
    # One key more: 55 blocks. Eligible above 27 are only 28 (ceil 2 vs 3) and 55 (1 vs 2):
    # eff(28) = 56 / 108 = 0.519 is the best, eff(55) = (110 / 108) / 2 = 0.509; 0.85 * 0.519 = 0.441
    # needs c >= 24 (c / 54), and 24..27 are not eligible (ceil(55 / c) = 3 for 19..27), so 28.
    "B1 S1 N2 H64 T13825 sm108 splits 28": (
        (1, 1, 2, 64, 13825, 0, 108),
        (28, 8, 4 * 28 * 2, 4 * 28 * 2 * 64, 8 + 224 + 14336)),
    # A past: T = 2047 + 1 = 2048 keys, H 128 -> block 128, 16 blocks; 8 query blocks. Eligible:
    # 1, 2, 3, 4, 6, 8, 16; eff = 8c / 108 up to c = 13: 6 -> 0.444, 8 -> 0.593, 16 -> (128 / 108) / 2
    # = 0.593; 0.85 * 0.593 = 0.504, so 8 (6 falls short).
    "B1 S1 N8 H128 P2047 L1 sm108 splits 8": (
        (1, 1, 8, 128, 2048, 2047, 108),
        (8, 4 * 8, 4 * 8 * 8, 4 * 8 * 8 * 128, 32 + 256 + 32768)),
    # H 72 rounds to 96 in the output accumulator; block 128, ceil(1000 / 128) = 8 blocks; 4 query
    # blocks; eligible 1, 2, 3, 4, 8 with eff 4c / 108; best 32 / 108 at 8, 0.85 of it needs c >= 6.8: 8.
    "B1 S1 N4 H72 T1000 sm108 splits 8, round32(72) = 96": (
        (1, 1, 4, 72, 1000, 0, 108),
        (8, 4 * 4, 4 * 8 * 4, 4 * 8 * 4 * 96, 16 + 128 + 12288)),
    # 2 * 32 * ceil(128 / 64) = 128 query blocks >= 86.4: one split, no accumulators.
    "B2 S128 N32 H128 T4096 sm108 one split": (
        (2, 128, 32, 128, 4096, 0, 108),
        (1, 4 * 2 * 32 * 128, 0, 0, 32768)),
    # One key block (256 keys at H 64): the loop only tries 1.
    "B1 S1 N1 H64 T256 sm108 one block, one split": (
        (1, 1, 1, 64, 256, 0, 108),
        (1, 4, 0, 0, 4)),
}


@pytest.mark.parametrize("shape, expected", HAND.values(), ids=HAND.keys())
def test_side_allocations_match_the_hand_worked_numbers(shape, expected):
    b, s, n, h, t, past, sms = shape
    side = side_allocations(decode(b, s, n, h, t, past), sms)
    assert fields(side) == expected
    assert side.total_bytes == sum(expected[1:4])


# GQA_TEST's asserted split counts and bytes: (B, S, N, H, T, SMs) -> splits, (LSE, LSE acc, out acc).
ORT_SPLITS = {
    "HandCalculatedOneAndMultipleSplitRecipes one split": ((2, 3, 8, 64, 128, 108), 1, (192, 0, 0)),
    "HandCalculatedOneAndMultipleSplitRecipes 16 splits": ((1, 1, 2, 64, 4096, 108), 16, (8, 128, 8192)),
    "DoubleThresholdBoundaryMatchesRuntime (float 0.85 gives 17)": ((1, 1, 1, 64, 24577, 24), 20, None),
    "OriginalMaximumKvLengthIsNotMonotonic T 13824": ((1, 1, 2, 64, 13824, 108), 54, None),
    "OriginalMaximumKvLengthIsNotMonotonic T 13825": ((1, 1, 2, 64, 13825, 108), 28, None),
}


@pytest.mark.parametrize("shape, splits, nbytes", ORT_SPLITS.values(), ids=ORT_SPLITS.keys())
def test_mha_replays_orts_split_expectations(shape, splits, nbytes):
    b, s, n, h, t, sms = shape
    side = side_allocations(decode(b, s, n, h, t), sms)
    assert side.splits == splits
    if nbytes is not None:
        assert (side.softmax_lse_bytes, side.softmax_lse_accum_bytes, side.out_accum_bytes) == nbytes


def test_the_key_length_is_past_plus_new():
    # T = P + L: 2,047 past keys and 1 new split 8 ways (above); the 1 new key alone is one block.
    assert side_allocations(decode(1, 1, 8, 128, 2048, past=2047), 108).splits == 8
    assert side_allocations(decode(1, 1, 8, 128, 1), 108).splits == 1


def test_the_bound_at_the_longer_key_covers_the_shorter_keys_more_splits():
    # At the maximum T 13,825 the heuristic picks 28, but T 13,824 picks 54: the bound takes the cap
    # min(128, 108, ceil(13825 / 256) = 55) = 55 over min(1 * 1 * 2, 64 * (87 - 1)) = 2 LSE rows
    # (0.8f * 108 = 86.4, so 87 query blocks is the first that never splits).
    bound = side_allocation_bound(decode(1, 1, 2, 64, 13825), 108)
    assert fields(bound) == (55, 8, 4 * 55 * 2, 4 * 55 * 2 * 64, 8 + 440 + 28160)
    assert bound.total_bytes >= side_allocations(decode(1, 1, 2, 64, 13824), 108).total_bytes == 28088


def test_the_bound_counts_only_the_lse_rows_a_split_problem_can_have():
    # B 8, S 2048, N 32: 524,288 LSE rows, but a split problem has under 87 query blocks of at most
    # 64 rows: 64 * 86 = 5,504 rows. H 128, T 4096: 32 key blocks, so at most 32 splits.
    bound = side_allocation_bound(decode(8, 2048, 32, 128, 4096), 108)
    assert fields(bound) == (32, 4 * 8 * 32 * 2048, 4 * 32 * 5504, 4 * 32 * 5504 * 128,
                             2097152 + 704512 + 90177536)
    # The most rows a splitting problem has: 86 query blocks of 64 rows (B 1, N 1, S 5,504).
    widest = side_allocations(decode(1, 5504, 1, 128, 4096), 108)
    assert widest.splits > 1 and widest.out_accum_bytes <= bound.out_accum_bytes


@pytest.mark.parametrize("shape", [(4, 512, 16, 128, 16384, 1), (1, 1, 2, 64, 256, 108)],
                         ids=["one SM: 0.8f * 1 rounds up to 1 query block, never split", "one key block at most"])
def test_a_bound_with_no_split_has_no_accumulators(shape):
    b, s, n, h, t, sms = shape
    bound = side_allocation_bound(decode(b, s, n, h, t), sms)
    assert fields(bound) == (1, 4 * b * n * s, 0, 0, 4 * b * n * s)


def uncovered(bound_of, maximum, sms, keys):
    """Return the first problem up to `maximum` (B, S, N, H, T) whose side allocations exceed
    bound_of(maximum) in some field, trying the key lengths `keys` (None when every one is covered)."""
    b_max, s_max, n_max, h_max, t_max = maximum
    bound = fields(bound_of(decode(*maximum), sms))
    heads = [h for h in (8, 32, 64, 72, 128, 136, 192, 256) if h <= h_max]
    queries = sorted({1, 2, 63, 64, 65, 128, 129, 320, 384, 385, s_max})
    for b, s, n, h, t in itertools.product(range(1, b_max + 1), queries, range(1, n_max + 1), heads, keys):
        if s <= s_max and t <= t_max and any(x > y for x, y in zip(fields(side_allocations(decode(b, s, n, h, t),
                                                                                           sms)), bound)):
            return b, s, n, h, t
    return None


KEYS = sorted({*range(1, 13826, 97), 13824, 13825})


# The last box has more LSE rows (2 * 400 * 3) than a split problem on 8 SMs can have: 64 * (7 - 1)
# = 384 (0.8f * 8 = 6.4), which B 1, S 384, N 1 reaches in 6 query blocks.
@pytest.mark.parametrize("maximum, sms", [((2, 65, 2, 136, 13825), 108), ((1, 130, 3, 64, 13825), 24),
                                          ((2, 400, 3, 72, 13825), 8)],
                         ids=["B2 S65 N2 H136 T13825 sm108", "B1 S130 N3 H64 T13825 sm24", "B2 S400 N3 H72 T13825 sm8"])
def test_every_shape_up_to_the_maximum_has_at_most_the_bound(maximum, sms):
    assert uncovered(side_allocation_bound, maximum, sms, KEYS) is None


def test_the_coverage_check_catches_a_bound_read_off_the_heuristic_at_the_maximum():
    """The planted bug: the bound runs the heuristic at the maximum (28 splits at T 13,825), which
    the shorter key's 54 splits exceed."""
    found = uncovered(side_allocations, (1, 1, 2, 64, 13825), 108, [13824, 13825])
    assert found is not None and found[4] == 13824


def test_the_solver_evaluates_the_same_formulas_over_a_symbolic_key_length():
    total = z3.Int("T")
    symbolic = replace(decode(1, 1, 2, 64, 13825), kv_sequence_length=total)
    sym = SymbolicDomain()
    exact, bound = side_allocations(symbolic, 108, sym), side_allocation_bound(symbolic, 108, sym)
    for t in (4096, 13824, 13825):
        def at(term):
            return z3.simplify(z3.substitute(z3.IntVal(term) if isinstance(term, int) else term,
                                             (total, z3.IntVal(t)))).as_long()
        assert [at(x) for x in fields(exact)] == list(fields(side_allocations(decode(1, 1, 2, 64, t), 108)))
        assert [at(x) for x in fields(bound)] == list(fields(side_allocation_bound(decode(1, 1, 2, 64, t), 108)))


def test_the_note_states_the_bound_in_bytes_outside_the_workspace():
    text = note(decode(1, 1, 2, 64, 13825), RuntimeConfig.make(sm=80), [Backend.FLASH], "")
    assert "outside the workspace" in text and "upper bound" in text and "not covered" not in text
    assert "at most 55 splits on 108 SMs" in text
    assert "is 28,608 B (LSE 8 B, LSE accumulator 440 B, output accumulator 28,160 B)" in text


def test_a_node_estimate_without_a_split_says_so():
    # B 2, S 8, N 4, H 8, T 8 on an A100 (108 SMs): one key block, so no shape splits; LSE 4 * 2 * 4 * 8.
    est = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, [(2, 8, 32)] * 3)
    assert est.ok and Backend.FLASH in est.backends
    assert "softmax LSE (4 * B * N * S: 256 B at the maximum)" in est.note
    assert "no shape up to the maximum splits the key/value sequence (no accumulators)" in est.note


def test_the_side_allocations_are_not_in_the_workspace_recipe():
    # attention_impl.cu: Flash's workspace is qkv only, and NoQkvWorkspace holds for separate Q, K, V
    # without a bias, so ORT allocates no workspace at all, while the side buffers take 28,088 B.
    p = decode(1, 1, 2, 64, 13824)
    assert mha_recipe.recipe(p, Backend.FLASH).attention_workspace_bytes == 0
    assert side_allocations(p, 108).total_bytes == 28088
