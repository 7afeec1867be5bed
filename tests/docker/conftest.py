"""tests/docker: docker-compose.yml run for real, on a Docker engine with the three images
built (`bash ops/docker.sh all`). Collected only with NEARDUP_STACK_DOCKER=1, which
ops/test.sh sets (unless told 0) when it sets the engine up and runs them: without an
engine they could only fail.
Their own servers are the compose project's (tests/integration has its own: servers.py).
At the end of the run: how long each phase took, and the images' sizes."""

from __future__ import annotations

import os

import pytest

from .compose import PHASES, image_sizes

if os.environ.get("NEARDUP_STACK_DOCKER") != "1":
    collect_ignore_glob = ["test_*.py"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not PHASES:
        return
    terminalreporter.section("docker: phases")
    for name, seconds in PHASES:
        terminalreporter.write_line(f"{seconds:7.1f} s  {name}")
    terminalreporter.section("docker: images")
    for line in image_sizes():
        terminalreporter.write_line(line)
