"""The bench's engine-side slowdown wrapper: its stop share, and that stopping it leaves no
process behind, stopped or not (a stopped engine would hold its memory and port forever)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import cpu_slowdown  # noqa: E402


def test_stop_share_gives_the_nominal_slowdown() -> None:
    # Stopped for f of each period: work takes 1/(1-f) as long, which is 1 + p/100.
    for percent in (5.0, 10.0, 20.0, 100.0):
        share = cpu_slowdown.stopped_share(percent)
        assert 1.0 / (1.0 - share) == pytest.approx(1.0 + percent / 100.0)
    assert cpu_slowdown.stopped_share(0.0) == 0.0
    assert cpu_slowdown.stopped_share(-3.0) == 0.0


def test_a_late_wake_stretches_the_run_so_the_stopped_share_holds() -> None:
    share = cpu_slowdown.stopped_share(10.0)
    for stopped in (0.00909, 0.02, 0.05):  # on time, and woken two and five times too late
        running = cpu_slowdown.running_time(stopped, share)
        assert stopped / (stopped + running) == pytest.approx(share)


def test_sigterm_continues_and_ends_the_whole_tree() -> None:
    # A child that starts a grandchild, both sleeping: the wrapper stops them half the time.
    script = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "time.sleep(60)\n"
    )
    wrapper = subprocess.Popen(
        [sys.executable, str(BENCH / "cpu_slowdown.py"), "--percent", "100", "--",
         sys.executable, "-c", script]
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        tree: list[psutil.Process] = []
        while time.monotonic() < deadline and len(tree) < 3:
            tree = [psutil.Process(wrapper.pid), *psutil.Process(wrapper.pid).children(True)]
            time.sleep(0.1)
        assert len(tree) >= 3, "the command and its child started"
        time.sleep(1.5)  # the wrapper has seen the grandchild and stops it too
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=20) != 0
        # The grandchild got SIGCONT; it is orphaned but running, not stuck in a stop.
        for process in tree[1:]:
            if process.is_running():
                assert process.status() != psutil.STATUS_STOPPED
                process.kill()
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
