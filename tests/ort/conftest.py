"""Fixtures of the ORT comparison (cases and ONNX Runtime's verdicts, computed once per session)
and the terminal-summary hook that prints its `ORT <version> CPU: X/Y agree` lines."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import SUMMARY_LINES as SUMMARY

from .cases import CASE_COUNT, SEED, MhaCase, generate_cases
from .engine import ORT_VERSION, OrtVerdict, ort_verdicts



def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Print the lines the comparison test recorded (shown under plain `pytest -q`)."""
    for line in config.stash.get(SUMMARY, []):
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def ort_summary(pytestconfig: pytest.Config) -> list[str]:
    """The lines to print in the terminal summary; tests append to it."""
    return pytestconfig.stash.setdefault(SUMMARY, [])


@pytest.fixture(scope="session")
def onnxruntime_version() -> str:
    """Import onnxruntime lazily; fail clearly when it is missing or not the pinned version."""
    try:
        onnxruntime = importlib.import_module("onnxruntime")
    except ImportError:
        onnxruntime = None
    if onnxruntime is None:
        pytest.fail(f"onnxruntime is not installed: tests/ort needs the test extra's onnxruntime=={ORT_VERSION} "
                    f"(pip install 'onnxruntime=={ORT_VERSION}')", pytrace=False)
    if onnxruntime.__version__ != ORT_VERSION:
        pytest.fail(f"tests/ort is pinned to onnxruntime {ORT_VERSION}, found {onnxruntime.__version__}: its "
                    f"verdicts and the exclusion table are for that version only", pytrace=False)
    return onnxruntime.__version__


@pytest.fixture(scope="session")
def mha_cases() -> list[MhaCase]:
    """The seeded random cases (generated here, not at import, so a generator bug fails tests)."""
    return generate_cases(SEED, CASE_COUNT)


@pytest.fixture(scope="session")
def mha_verdicts(onnxruntime_version: str, mha_cases: list[MhaCase]) -> list[OrtVerdict]:
    """ONNX Runtime's verdict for each case, in order."""
    return ort_verdicts(mha_cases)
