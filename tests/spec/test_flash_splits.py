"""Flash's split-KV heuristic (`attnws.spec.backends.flash.split_count`) against the split counts
ORT's own tests assert (`tests/data/ort-gqa-golden.json`, from
`group_query_attention_workspace_xqa_flash_test.cc`, index id 58001277336), and the float /
double detail that decides one of them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from attnws.spec.backends import flash
from attnws.spec.domain import CONCRETE as D
from attnws.spec.gqa.problem import GqaWorkspaceProblem
from attnws.spec.gqa.recipe import FlashConfig
from attnws.spec.gqa.recipe import flash as flash_recipe

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "ort-gqa-golden.json").read_text())
SPLIT_CASES = [c for c in GOLDEN if c["function"] == "GetGQAFlashWorkspaceRecipe"
               and "selected_split_count" in c["expected"]]


def _problem(raw: dict) -> GqaWorkspaceProblem:
    keys = ("qkv_element_size", "cache_element_size", "batch_size", "sequence_length", "num_heads", "kv_num_heads",
            "head_size", "present_kv_cache_capacity")
    return GqaWorkspaceProblem(*(raw[k] for k in keys))


def test_the_golden_file_holds_the_split_anchors():
    assert {c["expected"]["selected_split_count"] for c in SPLIT_CASES} >= {1, 16, 20, 28, 32, 54}


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: f'{c["test"]}-T{c["inputs"]["config"]["total_sequence_length"]}')
def test_split_count_matches_ort(case):
    cfg = case["inputs"]["config"]
    r = flash_recipe(_problem(case["inputs"]["problem"]),
                     FlashConfig(cfg["total_sequence_length"], cfg["multi_processor_count"], cfg["local_window_size"],
                                 cfg["fast_decode"]))
    assert r.splits == case["expected"]["selected_split_count"]


def _float_threshold_heuristic(rows: int, blocks: int, sm: int) -> int:
    """The planted bug: the 0.85 comparison made in float32, as #32453 says would be wrong."""
    effs = flash._efficiencies(rows, sm)
    eligible = [c for c in range(1, min(len(effs), blocks) + 1) if flash._eligible(D, blocks, c)]
    best = max(effs[c - 1] for c in eligible)
    return next(c for c in eligible if effs[c - 1] >= flash._f32(flash._f32(0.85) * best))


def test_the_threshold_is_compared_in_double():
    rows, blocks = flash.split_rows(D, 1, 1, 1), flash.key_blocks(D, 64, 24577)
    assert flash.split_count(D, rows, blocks, 24) == 20
    assert _float_threshold_heuristic(rows, blocks, 24) == 17  # the planted float comparison is caught


def test_early_return_threshold_is_the_float_product():
    full = flash.first_full_rows(108)
    assert full == math.ceil(0.8 * 108)  # 86.4 in float -> 87 rows
    assert flash.split_count(D, full, 64, 108) == 1
    assert flash.split_count(D, full - 1, 64, 108) > 1


@pytest.mark.parametrize("head,block", [(8, 256), (64, 256), (72, 128), (128, 128), (136, 64), (256, 64)])
def test_block_n_by_head_size(head, block):
    assert flash.split_block_n(D, head) == block


def test_splits_never_exceed_the_structural_ceiling():
    for sm in (40, 108, 132):
        for rows in range(1, flash.first_full_rows(sm)):
            for blocks in (1, 2, 3, 7, 54, 55, 129, 200):
                assert 1 <= flash.split_count(D, rows, blocks, sm) <= min(flash.MAX_SPLITS, sm, blocks)
