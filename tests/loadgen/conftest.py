"""The stand-in streaming server (tests/support/stream_server.py), run as a separate process."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from stream_server import StandInProcess


@pytest.fixture(scope="module")
def _shared_stand_in() -> Iterator[StandInProcess]:
    with StandInProcess("--ttft-ms", "5", "--gap-ms", "1") as server:
        yield server


@pytest.fixture
def stand_in(_shared_stand_in: StandInProcess) -> StandInProcess:
    """A stand-in streaming 5 ms to the first chunk and 1 ms between chunks; stats reset."""
    _shared_stand_in.reset()
    return _shared_stand_in


@pytest.fixture
def start_stand_in() -> Iterator[Callable[..., StandInProcess]]:
    """Start a stand-in with other settings: ``start_stand_in("--gap-ms", "20")``."""
    with ExitStack() as stack:

        def start(*args: str) -> StandInProcess:
            return stack.enter_context(StandInProcess(*args))

        yield start
