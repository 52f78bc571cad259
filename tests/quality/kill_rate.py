"""The kill-rate registry shared by the planted-fault suites (spec, solver, kernels).

Each suite records, per planted fault, whether it was caught; `tests/quality/conftest.py` prints
the rate per suite and in total at the end of the run.
"""

from __future__ import annotations

RESULTS: dict[str, dict[str, bool]] = {}


def record(suite: str, fault: str, caught: bool) -> None:
    """Record whether the planted fault of the suite was caught."""
    RESULTS.setdefault(suite, {})[fault] = caught


def summary() -> list[str]:
    """Return one line per suite and a total line: caught / planted = rate."""
    lines, caught, planted = [], 0, 0
    for suite, faults in sorted(RESULTS.items()):
        hits = sum(faults.values())
        caught, planted = caught + hits, planted + len(faults)
        missed = sorted(name for name, hit in faults.items() if not hit)
        lines.append(f"kill rate {suite}: {hits}/{len(faults)} = {hits / len(faults):.0%}"
                     + (f" (survived: {', '.join(missed)})" if missed else ""))
    if planted:
        lines.append(f"kill rate total: {caught}/{planted} = {caught / planted:.0%}")
    return lines
