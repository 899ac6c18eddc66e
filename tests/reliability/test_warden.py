"""The warden: an engine that ignores SIGTERM still goes when its pytest is SIGKILLed.

The stand-in engine ignores SIGTERM (so the death signal does nothing) and has a child that
also ignores it and left the engine's session with setsid(). Its holder (a Python process
standing for pytest) is SIGKILLed: no teardown runs. Only the warden can stop them, with
SIGTERM, then SIGKILL after the grace period.
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

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.base import LaunchPlan
from pytest_llmperf.engines.server import EngineServer
from pytest_llmperf.engines.warden import EngineFamily, is_alive
from tests.conftest import free_port
from tests.support.files import wait_for_file
from tests.support.processes import command_line, wait_gone

STUBBORN_ENGINE = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(os.path.join(os.environ["TMPDIR"], "left-behind.sock"), "w").close()
    if os.fork() == 0:
        os.setsid()  # out of the engine's session, as some engines' schedulers do
        # The child writes the pids itself, once it is out of the session: written by the
        # engine, the file could be read before the setsid() ran.
        with open(sys.argv[1] + ".partial", "w") as out:
            out.write(f"{os.getppid()} {os.getpid()} {os.environ['TMPDIR']}")
        os.replace(sys.argv[1] + ".partial", sys.argv[1])
        time.sleep(600)
        os._exit(0)
    time.sleep(600)
    """
)

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_llmperf.engines import get_engine
    from pytest_llmperf.engines.base import LaunchPlan
    from pytest_llmperf.engines.server import EngineServer

    engine_script, pid_file, log, port = sys.argv[1:5]
    url = f"http://127.0.0.1:{port}"
    plan = LaunchPlan(
        argv=(sys.executable, engine_script, pid_file), base_url=url, health_url=url + "/health"
    )
    server = EngineServer(get_engine("vllm"), plan, Path(log), stop_grace=1.0)
    server.start()
    time.sleep(600)
    """
)


def _wardens_of(engine_pid: int) -> list[int]:
    found = []
    for pid in psutil.pids():
        argv = command_line(pid)
        if any(a.endswith("warden.py") for a in argv) and str(engine_pid) in argv:
            found.append(pid)
    return found


def _warden_of(engine_pid: int, timeout: float = 10.0) -> list[int]:
    """The warden of an engine, once it has exec'd (just after start it may still be a fork
    of its starter, with the starter's command line)."""
    deadline = time.monotonic() + timeout
    while not (found := _wardens_of(engine_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _reads(pid: int) -> int:
    """Read calls ``pid`` has made (Linux counts them; psutil reports the count)."""
    return int(psutil.Process(pid).io_counters().read_count)


def _reads_per_scan(engine_pid: int) -> int:
    """Read calls of one scan of the engine's family, measured here on a second scan (the
    first one also fills psutil's cache of processes, as the warden's first scan did)."""
    family, me = EngineFamily(engine_pid), os.getpid()
    family.scan()
    before = _reads(me)
    family.scan()
    return _reads(me) - before


def _scanned_since_now(warden: int, engine_pid: int, timeout: float = 20.0) -> bool:
    """Whether ``warden`` made a whole scan of the process table after this call began.

    A scan that was under way now makes fewer reads than a whole scan before it ends: once
    the warden's read count has grown by two scans' worth, a scan that started after now has
    finished. Observed, not guessed with a sleep that a busy machine outlasts.
    """
    start, needed = _reads(warden), 2 * _reads_per_scan(engine_pid)
    deadline = time.monotonic() + timeout
    while _reads(warden) - start < needed:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_engine_that_ignores_sigterm_goes_when_its_holder_is_killed(tmp_path: Path) -> None:
    """The warden also removes the engine's temporary folder with what the engine left there."""
    engine_script = tmp_path / "stubborn_engine.py"
    engine_script.write_text(STUBBORN_ENGINE)
    pid_file = tmp_path / "engine.pids"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(engine_script), str(pid_file),
         str(tmp_path / "engine.log"), str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    family: list[int] = []
    try:
        assert wait_for_file(pid_file, 30, writer=holder), "the stand-in engine never started"
        engine, child, engine_tmp = pid_file.read_text().split()
        family = [int(engine), int(child)]
        engine_pid = family[0]
        assert (Path(engine_tmp) / "left-behind.sock").exists()
        wardens = _warden_of(engine_pid)
        assert wardens, "the engine runs with a warden"
        # The family is complete; the warden must scan it once more to know the child that
        # left the session before the holder dies.
        assert _scanned_since_now(wardens[0], engine_pid), "the warden never scanned the family"
        holder.kill()
        holder.wait()
        # SIGTERM is ignored: the warden's SIGKILL follows after the 1 s grace period.
        survivors = wait_gone(family, timeout=20)
        assert survivors == [], f"left behind: {survivors} of {family}"
        assert wait_gone(_wardens_of(engine_pid), timeout=5) == [], "the warden exits too"
        # and it removed the engine's temporary folder (engines/scratch.py) before it did
        assert not Path(engine_tmp).exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        for pid in family:
            if is_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_normal_stop_takes_the_warden_down_too(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(sys.executable, "-c", "import time; time.sleep(600)"),
        base_url=url,
        health_url=url + "/health",
    )
    server = EngineServer(get_engine("vllm"), plan, tmp_path / "engine.log", stop_grace=2.0)
    server.start()
    try:
        assert server.pid is not None
        wardens = _warden_of(server.pid)
        assert len(wardens) == 1
    finally:
        server.stop()
    assert server.leftover_pids() == set()
    assert wait_gone(wardens, timeout=5) == []


def test_the_warden_leaves_when_the_engine_has_gone_on_its_own(tmp_path: Path) -> None:
    """An engine that exits by itself leaves nothing to guard: the warden does not linger
    until the end of the session."""
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(sys.executable, "-c", "import time; time.sleep(0.5)"),
        base_url=url,
        health_url=url + "/health",
    )
    server = EngineServer(get_engine("vllm"), plan, tmp_path / "engine.log")
    server.start()
    try:
        assert server.pid is not None
        wardens = _warden_of(server.pid)
        assert len(wardens) == 1
        assert wait_gone(wardens, timeout=10) == []
        # It took the engine's temporary folder with it: a pytest killed now leaves nothing.
        assert server.scratch_folder is not None
        assert not server.scratch_folder.exists()
    finally:
        server.stop()
