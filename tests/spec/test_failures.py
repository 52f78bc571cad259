"""The table of shapes where ORT picks the TRT runner and then fails, and its committed document."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnws.spec.failures import failure_markdown, failure_row, failure_table
from attnws.spec.problem import Op, QkvFormat

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "ort-runtime-failures.md"


def test_d32_fails_up_to_384_on_sm80_and_sm89_only():
    for sm in (80, 89):
        row = failure_row("PA", Op.PA, QkvFormat.PACKED, sm, 32, 512)
        assert row.ranges == ((1, 384),) and "Failed to find kernel" in row.message
    for sm, head in ((75, 32), (86, 32), (89, 64), (80, 64), (90, 32)):
        assert failure_row("PA", Op.PA, QkvFormat.PACKED, sm, head, 512).ranges == ()


def test_separate_pmha_takes_flash_first_and_never_fails():
    assert failure_row("PMHA", Op.PMHA, QkvFormat.SEPARATE, 80, 32, 512).ranges == ()


def test_the_committed_document_is_current():
    """Regenerate with `attnws ort-failures --markdown > docs/ort-runtime-failures.md`."""
    assert DOCUMENT.read_text() == failure_markdown(failure_table(1024), 1024)


@pytest.mark.parametrize("max_seq", ["0", "4097"])
def test_max_seq_out_of_range_is_a_usage_error(max_seq, capsys):
    from attnws import cli

    assert cli.run(["ort-failures", "--max-seq", max_seq]) == 2
    assert "--max-seq" in capsys.readouterr().err
