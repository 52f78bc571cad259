"""Test-wide settings: deterministic hypothesis everywhere (fixed seeds in CI and locally)."""

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "attnws", derandomize=True, max_examples=150, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("attnws")

# Lines a suite prints in the terminal summary (tests/ort: the ORT agreement), gathered from workers.
SUMMARY_LINES = pytest.StashKey[list]()


# Under pytest-xdist each worker runs part of the suite: the workers send what the end-of-run
# summaries print (the planted-fault kill rates, the ORT agreement line) to the controller,
# which merges them before its own terminal summary.
def pytest_sessionfinish(session):
    from tests.quality import kill_rate

    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["kill_rate"] = kill_rate.RESULTS
        output["summary_lines"] = session.config.stash.get(SUMMARY_LINES, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    from tests.quality import kill_rate

    output = getattr(node, "workeroutput", {})
    for suite, faults in output.get("kill_rate", {}).items():
        kill_rate.RESULTS.setdefault(suite, {}).update(faults)
    node.config.stash.setdefault(SUMMARY_LINES, []).extend(output.get("summary_lines", []))
