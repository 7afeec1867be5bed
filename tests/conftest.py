"""Settings of the whole suite, unit and integration: the hypothesis profiles, and no NEARDUP_*
variable of the caller's in a test's environment. What tests share is in helpers.py and
strategies.py; the unit suite needs no network and no server, and writes only tmp files."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# Re-exported for test_cli.py, test_security.py and test_options.py, which still import them
# from here; every other module imports helpers. Remove once those three do too.

# One profile for the whole suite: no per-example deadline (the first example of a run pays
# for numpy warm-up and the code-point table), and a bounded number of examples so that the
# suite stays well under a minute on two cores. Tests that need fewer set their own.
settings.register_profile(
    "unit",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# HYPOTHESIS_PROFILE=thorough for a long hunt before a release.
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with a deprecated importlib call
    for message in ("read_text is deprecated", "open_text is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")


@pytest.fixture(autouse=True)
def _no_neardup_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options come from NEARDUP_* variables too: keep the caller's environment out."""
    for name in list(os.environ):
        if name.startswith("NEARDUP_"):
            monkeypatch.delenv(name)
