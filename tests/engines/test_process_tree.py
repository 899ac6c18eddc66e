"""The engine's process tree, found and stopped through psutil (``engines.warden``).

Two things a process-group kill alone gets wrong: a grandchild that left the group with
setsid() is out of its reach, and a pid remembered from an earlier scan may name another
process by the time it is signalled. Both run here with real processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.base import LaunchPlan
from pytest_llmperf.engines.server import EngineServer, descendants, group_members
from pytest_llmperf.engines.warden import EngineFamily, is_alive, stop_family
from tests.conftest import free_port
from tests.support.files import wait_for_file
from tests.support.processes import wait_gone

# Leader -> child (stays in the group) -> grandchild (setsid: a group and session of its
# own, and deaf to SIGTERM, so only a SIGKILL sent to it by pid ends it).
TREE_ENGINE = textwrap.dedent(
    """
    import os, signal, sys, time
    leader = os.getpid()
    if os.fork() == 0:
        child = os.getpid()
        if os.fork() == 0:
            os.setsid()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # The grandchild writes the pids itself, once it has left the group and turned
            # deaf: written by its parent, the file could be read before the setsid() ran.
            with open(sys.argv[1] + ".partial", "w") as out:
                out.write(f"{leader} {child} {os.getpid()}")
            os.replace(sys.argv[1] + ".partial", sys.argv[1])
            time.sleep(600)
            os._exit(0)
        time.sleep(600)
        os._exit(0)
    time.sleep(600)
    """
)

SLEEPER = (sys.executable, "-c", "import time; time.sleep(120)")
# A process with a child of its own, to take a dead leader's pid.
PARENT_OF_ONE = (
    sys.executable,
    "-c",
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)",
)
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


def _read_pids(path: Path, timeout: float = 30.0) -> list[int]:
    assert wait_for_file(path, timeout), "the engine never wrote its pids"
    return [int(pid) for pid in path.read_text().split()]


def test_stop_reaches_a_grandchild_that_left_the_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "tree.pids"
    script = tmp_path / "tree_engine.py"
    script.write_text(TREE_ENGINE)
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(sys.executable, str(script), str(pid_file)), base_url=url, health_url=url + "/h"
    )
    server = EngineServer(get_engine("vllm"), plan, tmp_path / "engine.log", stop_grace=1.0)
    server.start()
    family: list[int] = []
    try:
        family = _read_pids(pid_file)
        leader, child, grandchild = family
        assert leader == server.pid
        # The grandchild is out of the group, so killpg cannot reach it; psutil's tree walk
        # finds it below the leader.
        assert os.getpgid(grandchild) != leader
        assert grandchild not in group_members(leader)
        assert child in group_members(leader)
        assert {child, grandchild} <= descendants(leader)
    finally:
        server.stop()
        for pid in family:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert [pid for pid in family if is_alive(pid)] == [], "stop() left part of the tree"
    assert server.leftover_pids() == set()


def _start_with_pid(pid: int, argv: tuple[str, ...]) -> subprocess.Popen[bytes] | None:
    """Start ``argv`` as ``pid``, a pid that ran another process before: Linux hands out
    ns_last_pid + 1 next. None where that file cannot be written (it needs root, as
    checkpoint/restore tools have) or other processes kept taking the pid first."""
    for _ in range(50):
        try:
            NS_LAST_PID.write_text(str(pid - 1))
        except OSError:
            return None
        started = subprocess.Popen(argv)
        if started.pid == pid:
            return started
        started.kill()
        started.wait()
    return None


def test_a_recycled_pid_is_neither_counted_nor_signalled() -> None:
    leader = subprocess.Popen(SLEEPER, start_new_session=True)  # leads its group, as engines do
    family = EngineFamily(leader.pid)
    family.scan()
    assert leader.pid in family.known, "the scan finds the leader through its group"
    # Start times count in clock ticks (10 ms on Linux): a process that took the pid within
    # the tick its first owner started in could not be told apart. An engine lives for
    # minutes; this leader lives a few ticks, which is enough.
    time.sleep(0.05)
    leader.kill()
    leader.wait()  # reaped: its pid is free for the next process
    impostor = _start_with_pid(leader.pid, PARENT_OF_ONE)
    if impostor is None:
        pytest.skip(f"cannot steer the next pid here ({NS_LAST_PID} needs Linux and root)")
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 30
        while not (children := psutil.Process(impostor.pid).children()):
            assert time.monotonic() < deadline, "the impostor never started its child"
            time.sleep(0.05)
        assert is_alive(impostor.pid), "the old pid runs again, as another process"
        assert family.alive() == [], "a reused pid does not count as the engine"
        # The warden's whole stop: scan, SIGTERM, wait, SIGKILL. Neither the new owner of the
        # pid nor its child (found below that pid, but not below the engine) is touched.
        stop_family(family, grace=0.5)
        with pytest.raises(subprocess.TimeoutExpired):
            impostor.wait(timeout=1.0)
        assert all(is_alive(child.pid) for child in children)
    finally:
        for child in children:
            child.kill()
        impostor.kill()
        impostor.wait()
    assert wait_gone([child.pid for child in children], timeout=10) == []
