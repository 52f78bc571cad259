"""The table of shapes where ORT picks the TRT runner and then fails, and its committed document."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnws.spec.failures import failure_markdown, failure_row, failure_table
from attnws.spec.mha.problem import MaskType
from attnws.spec.problem import Op, QkvFormat

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "ort-runtime-failures.md"


def test_d32_fails_up_to_384_on_sm80_and_sm89_only():
    for sm in (80, 89):
        row = failure_row("PA", Op.PA, {}, sm, 32, 512)
        assert row.ranges == ((1, 384),) and "Failed to find kernel" in row.message
    for sm, head in ((75, 32), (86, 32), (89, 64), (80, 64), (90, 32)):
        assert failure_row("PA", Op.PA, {}, sm, head, 512).ranges == ()


def test_separate_pmha_takes_flash_first_and_never_fails():
    assert failure_row("PMHA", Op.PMHA, {"pmha_format": QkvFormat.SEPARATE}, 80, 32, 512).ranges == ()


def test_mha_fails_only_where_a_key_length_mask_keeps_flash_away():
    masked = failure_row("MHA", Op.MHA, {"mask": MaskType.KEY_SEQ_LEN}, 80, 32, 512)
    assert masked.ranges == ((1, 384),) and "Failed to find kernel" in masked.message
    assert failure_row("MHA", Op.MHA, {}, 80, 32, 512).ranges == ()  # Flash first
    assert failure_row("MHA", Op.MHA, {"mask": MaskType.KEY_PADDING}, 80, 32, 512).ranges == ()  # unfused


def test_the_committed_document_is_current():
    """Regenerate with `attnws ort-failures --markdown > docs/ort-runtime-failures.md`."""
    assert DOCUMENT.read_text() == failure_markdown(failure_table(1024), 1024)


@pytest.mark.parametrize("max_seq", ["0", "4097"])
def test_max_seq_out_of_range_is_a_usage_error(max_seq, capsys):
    from attnws import cli

    assert cli.run(["ort-failures", "--max-seq", max_seq]) == 2
    assert "--max-seq" in capsys.readouterr().err


@pytest.mark.parametrize("fields, noted", [
    ({"op": "pa", "sm": 80, "head_size": "32..32"}, True),
    ({"op": "pa", "sm": 89, "head_size": "1..64"}, True),
    ({"op": "pa", "sm": 86, "head_size": "32..32"}, False),
    ({"op": "pa", "sm": 80, "head_size": "16..16"}, False),
    ({"op": "pa", "sm": 80, "head_size": "32..32", "dtype": "fp32"}, False),
    ({"op": "pa", "sm": 80, "head_size": "32..32", "attn_bias": True}, False),
    ({"op": "pmha", "sm": 80, "head_size": "32..32", "format": "separate"}, False),
    ({"op": "pmha", "sm": 80, "head_size": "32..32", "format": "packed"}, True),
], ids=["pa sm80 d32", "pa sm89 d<=64", "pa sm86 d32", "pa sm80 d16", "fp32", "attention bias", "separate pmha",
        "packed pmha"])
def test_the_estimate_notes_a_range_where_ort_fails_at_run_time(fields, noted):
    from attnws.spec.estimate import estimate_geometry
    from attnws.spec.target import target_from_dict

    target = target_from_dict({"name": "t", "dtype": "fp16", "batch": "1..4", "seq": "1..512", "heads": "2..2",
                               **fields})
    estimate = estimate_geometry(target.max_geometry(), target.config)
    assert estimate.ok and bool(estimate.note) is noted, estimate.note
    assert not noted or "head size 32" in estimate.note
