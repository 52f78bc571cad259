"""Test-wide settings: deterministic hypothesis everywhere (fixed seeds in CI and locally)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "attnws", derandomize=True, max_examples=150, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("attnws")
