"""Quality: planted faults in GroupQueryAttention's Flash split-KV workspace, recipe and kernels,
each caught by a deterministic check of the one validator (`attnws.kernels.validate_shape`; kill
rate 100%).

- `recipe-one-split-short`: the recipe sizes its accumulators for splits - 1 while the kernels run
  the heuristic's `splits`; caught before any launch, the footprint's output accumulator reaching
  past the workspace (undersized).
- `lse-accumulator-per-kv-head`: the recipe sizes the LSE accumulator [splits, B, Nk, S] instead
  of [splits, B, N, S]; caught before any launch, the accumulator reaching into the output
  accumulator's region (outside its region; overlapping).
- `combine-reads-one-split-more`: the combine reads splits + 1 splits. The validator does not track
  reads: the extra split's LSE lies in the accumulator's alignment gap, which is dead before the
  combine and so poisoned with SENTINEL, and its partial rows in the trailing guard band: the NaN
  they hold reaches the output (output error NaN) and the LSE.
- `combine-skips-the-last-split`: the combine reads splits - 1 splits; caught by the output's
  distance from the float64 reference.
- `window-one-key-wider`: the kernel keeps W + 1 keys of a local window W (window_size_left = W,
  the unfused route's convention) instead of Flash's W; caught by the reference.

Each fault's shape passes without its plant (`test_clean_twin_passes`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import pytest

import attnws.kernels  # noqa: F401  (chooses the device before numba loads)

from attnws.kernels.backends import flash_split
from attnws.spec.backends import flash as flash_backend
from attnws.spec.gqa import recipe as gqa_recipe
from attnws.spec.options import ENV_DISABLE_FLASH_DECODE, RuntimeConfig
from attnws.spec.problem import Backend

from tests.kernels.gqa_shapes import gqa_geometry as gqa
from tests.quality.gqa_faults import GqaFault, check_caught, check_clean_twin, check_kill_rate

SUITE = "gqa flash kernels"
SM16 = RuntimeConfig.make(sm=80, sm_count=16)
REGULAR = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_DISABLE_FLASH_DECODE: "1"})


def accumulators_for_one_split_less(monkeypatch: Any) -> None:
    real = gqa_recipe.flash_regions
    monkeypatch.setattr(gqa_recipe, "flash_regions",
                        lambda d, p, splits: replace(real(d, p, splits - 1), splits=splits))


def lse_accumulator_per_kv_head(monkeypatch: Any) -> None:
    def regions(d: Any, p: Any, splits: Any) -> gqa_recipe.BackendRecipe:
        placed = gqa_recipe.Regions(d)
        placed.append("softmax_lse", 4 * p.batch_size * p.num_heads * p.sequence_length, "flash")
        kv_lse, _ = flash_backend.split_accumulator_bytes(d, splits, p.batch_size, p.sequence_length,
                                                          p.kv_num_heads, p.head_size)
        _, out = flash_backend.split_accumulator_bytes(d, splits, p.batch_size, p.sequence_length, p.num_heads,
                                                       p.head_size)
        placed.append("softmax_lse_accumulator", kv_lse, "flash")
        placed.append("output_accumulator", out, "flash")
        return gqa_recipe.BackendRecipe(Backend.FLASH, placed.cursor, tuple(placed.placed), splits)

    monkeypatch.setattr(gqa_recipe, "flash_regions", regions)


def combine_reads(extra: int) -> Callable[[Any], None]:
    """Return a plant making the combine read `extra` splits more (negative: fewer) than ran."""

    def plant(monkeypatch: Any) -> None:
        real = flash_split.launch_combine
        monkeypatch.setattr(flash_split, "launch_combine", lambda plan: real(replace(plan, splits=plan.splits + extra)))

    return plant


def window_one_key_wider(monkeypatch: Any) -> None:
    real = flash_split.launch_split
    monkeypatch.setattr(flash_split, "launch_split", lambda plan: real(replace(plan, window_left=plan.window_left + 1)))


FAULTS = (
    GqaFault("recipe-one-split-short", "the recipe's accumulators sized for splits - 1 (3 splits run)",
             gqa(1, 1, 2, 1, 8, 600), SM16, "undersized", "output_accumulator", accumulators_for_one_split_less),
    GqaFault("lse-accumulator-per-kv-head", "the LSE accumulator sized with Nk heads instead of N",
             gqa(1, 17, 2, 1, 8, 264, window=8), REGULAR, "outside regions", "softmax_lse_accumulator",
             lse_accumulator_per_kv_head),
    GqaFault("combine-reads-one-split-more", "the combine reads one split past the last",
             gqa(1, 1, 2, 1, 8, 264), SM16, "reference", "output error nan", combine_reads(1)),
    GqaFault("combine-skips-the-last-split", "the combine reads one split fewer than ran (3 splits run)",
             gqa(1, 1, 2, 1, 8, 600), SM16, "reference", "output error", combine_reads(-1)),
    GqaFault("window-one-key-wider", "a local window of 12 keeps 13 keys",
             gqa(1, 1, 2, 1, 8, 20, window=12), SM16, "reference", "output error", window_one_key_wider),
)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # kernels reading the NaN sentinel
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_fault_is_caught(fault, monkeypatch):
    check_caught(fault, monkeypatch, SUITE)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_clean_twin_passes(fault):
    check_clean_twin(fault)


def test_kill_rate_is_100_percent():
    check_kill_rate(SUITE, FAULTS)
