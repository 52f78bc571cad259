"""What the GroupQueryAttention fault suites share: a planted fault over the one validator
(`attnws.kernels.validate_shape`) and the three checks each suite makes of its faults (caught,
clean twin passes, kill rate)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pytest

import attnws.kernels  # noqa: F401  (chooses the device before numba loads)

from attnws.kernels import validate_shape
from attnws.kernels.commands import format_report
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig

from tests.quality.kill_rate import RESULTS, record


@dataclass(frozen=True)
class GqaFault:
    """A planted fault: with `plant` in place, validating `geometry` under `config` must fail the
    check named `expected`, the report's words saying `detail`."""

    name: str
    description: str
    geometry: Geometry
    config: RuntimeConfig
    expected: str
    detail: str
    plant: Callable[[Any], None]


def check_caught(fault: GqaFault, monkeypatch: Any, suite: str) -> None:
    """Plant the fault, validate its shape, record whether the expected failure came, assert it did."""
    fault.plant(monkeypatch)
    report = validate_shape(fault.geometry, fault.config)
    text = format_report(report)
    caught = fault.expected in report.failures and fault.detail in text
    record(suite, fault.name, caught)
    assert caught, f"{fault.name} ({fault.description}) fails only {report.failures}:\n{text}"


def check_clean_twin(fault: GqaFault) -> None:
    """Assert the fault's shape passes without the plant, so its failure is the fault's."""
    report = validate_shape(fault.geometry, fault.config)
    assert report.failures == () and report.status == "passed"


def check_kill_rate(suite: str, faults: Sequence[GqaFault]) -> None:
    """Assert every fault of the suite was caught (skip when the module ran only in part)."""
    missing = [f.name for f in faults if f.name not in RESULTS.get(suite, {})]
    if missing:
        pytest.skip(f"run with the whole module to report the kill rate (not run: {missing})")
    assert all(RESULTS[suite][f.name] for f in faults)
