"""Fixtures of the reliability tests: the fault proxy in front of the shared real vLLM server."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.fault_proxy import FaultProxy

# A developer may point the tests at a vLLM server that is already running (saves a start).
UPSTREAM_VARIABLE = "LLMPERF_RELIABILITY_UPSTREAM"


@pytest.fixture(scope="session")
def upstream_url(request: pytest.FixtureRequest) -> str:
    """API root of a real vLLM server serving the tiny model as "tiny-qwen3"."""
    url = os.environ.get(UPSTREAM_VARIABLE)
    if url:
        return url.rstrip("/")
    server = request.getfixturevalue("vllm_server")
    return str(server.base_url)


@pytest.fixture(scope="session")
def _session_proxy(upstream_url: str) -> Iterator[FaultProxy]:
    with FaultProxy(upstream_url) as proxy:
        yield proxy


@pytest.fixture
def proxy(_session_proxy: FaultProxy) -> FaultProxy:
    """The fault proxy, passing everything through until a test sets a plan."""
    _session_proxy.set_plan(None)
    return _session_proxy
