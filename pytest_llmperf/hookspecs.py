"""Hooks that pytest-llmperf offers to users' conftest files and plugins."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_llmperf.gate.ledger import ProfileResult

hookspec = pytest.hookspec


@hookspec
def pytest_llmperf_result(config: pytest.Config, result: ProfileResult) -> None:
    """Called once per measured profile, after its verdict, before the test passes or fails.

    Use it to forward numbers to a dashboard::

        def pytest_llmperf_result(config, result):
            send_to_dashboard(result.engine, result.profile, result.metrics)

    .. versionadded:: 0.1
    """
