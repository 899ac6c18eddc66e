"""A Ctrl-C that arrives while an engine is being stopped waits until the engine is gone.

Real processes, real signals: the stand-in engine notes the SIGTERM and ignores it, so its
stop lasts the whole grace period and ends in a SIGKILL; a second thread sends this process a
SIGINT in the middle of that, as an impatient second Ctrl-C (or a ``timeout`` forwarding the
terminal's) does.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.base import LaunchPlan
from pytest_llmperf.engines.held_interrupts import interrupts_held
from pytest_llmperf.engines.server import EngineServer
from pytest_llmperf.engines.warden import is_alive
from tests.conftest import free_port
from tests.support.files import wait_for_file

SLOW_TO_STOP = textwrap.dedent(
    """
    import signal, sys, time
    def noted(signum, frame):
        open(sys.argv[1], "w").close()
    signal.signal(signal.SIGTERM, noted)
    open(sys.argv[1] + ".up", "w").close()  # from here on a SIGTERM is noted, not obeyed
    while True:
        time.sleep(1)
    """
)
GRACE_S = 1.5


def _slow_server(tmp_path: Path, name: str) -> tuple[EngineServer, Path]:
    script = tmp_path / "slow_engine.py"
    script.write_text(SLOW_TO_STOP)
    noted = tmp_path / f"{name}.sigterm"
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(sys.executable, str(script), str(noted)), base_url=url, health_url=url + "/h"
    )
    server = EngineServer(get_engine("vllm"), plan, tmp_path / f"{name}.log", stop_grace=GRACE_S)
    server.start()
    up = noted.with_name(noted.name + ".up")
    assert wait_for_file(up, 30), "the stand-in engine never came up"
    return server, noted


def _interrupt_once_stopping(noted: Path) -> threading.Thread:
    """SIGINT this process as soon as the engine has its SIGTERM (the stop is under way)."""

    def send() -> None:
        if not wait_for_file(noted, 30):
            return  # no stop under way: an interrupt now would hit another test
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_a_ctrl_c_during_stop_is_raised_after_the_engine_is_gone(tmp_path: Path) -> None:
    server, noted = _slow_server(tmp_path, "engine")
    pid = server.pid
    assert pid is not None
    sender = _interrupt_once_stopping(noted)
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        server.stop()
    sender.join(5)
    assert noted.exists(), "the SIGINT must have come while the engine was being stopped"
    # The interrupt came at the SIGTERM and was raised only after the grace period and the
    # SIGKILL: without the hold, stop() ends at once and the engine lives on.
    assert time.monotonic() - began >= GRACE_S
    assert not is_alive(pid)
    assert server.leftover_pids() == set()


def test_one_hold_around_two_stops_stops_both_then_interrupts_once(tmp_path: Path) -> None:
    first, noted = _slow_server(tmp_path, "first")
    second, _ = _slow_server(tmp_path, "second")
    pids = [pid for pid in (first.pid, second.pid) if pid is not None]
    assert len(pids) == 2
    sender = _interrupt_once_stopping(noted)

    def stop_both() -> None:  # as a bench script stops its reference and its candidate
        with interrupts_held():
            first.stop()
            second.stop()

    # One KeyboardInterrupt, after both stops: the first stop's own hold hands the SIGINT on
    # to the outer one instead of raising it between the two.
    with pytest.raises(KeyboardInterrupt):
        stop_both()
    sender.join(5)
    assert [pid for pid in pids if is_alive(pid)] == []


def test_the_handlers_are_restored_after_the_hold() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupts_held():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before
