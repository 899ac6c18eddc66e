"""The noise tests' server: the stand-in behind the latency-injecting proxy, one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.slow_proxy import SlowProxyProcess
from tests.support.stream_server import StandInProcess


@pytest.fixture(scope="module")
def proxy() -> Iterator[SlowProxyProcess]:
    """The stand-in (40 ms to the first token, 20 ms between tokens) behind the slow proxy,
    relaying at factor 1 until a test sets another."""
    with (
        StandInProcess("--ttft-ms", "40", "--gap-ms", "20", "--no-record") as standin,
        SlowProxyProcess(standin.base_url) as slow,
    ):
        yield slow
