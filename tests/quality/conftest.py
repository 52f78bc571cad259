"""Print the kill rate of every planted-fault suite at the end of the run (also under -q)."""

from __future__ import annotations

from tests.quality.kill_rate import summary


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    lines = summary()
    if lines:
        terminalreporter.section("planted faults")
        for line in lines:
            terminalreporter.write_line(line)
