"""A small watcher process that stops an engine when the process that started it dies.

The engine is started in a process group of its own, and on Linux with a death signal
(SIGTERM when its parent dies). That alone is not enough: an engine may ignore or swallow
SIGTERM while it starts up (vLLM did, 30 s into loading, and served on after its pytest had
been killed), and other systems (macOS) have no death signal at all. The warden does not
depend on the engine's good will. It is started next to the engine, watches the pytest
process, and when that process is gone (SIGKILL, a crash, an OOM kill: anything that ran no
teardown) it sends SIGTERM to every process of the engine's process group and to every
descendant it saw, waits the grace period, and SIGKILLs what is left.

Processes are found and signalled through psutil, which works alike on Linux and macOS, and
which names a process by its pid *and* its start time: a pid that the system hands to an
unrelated process after the engine's one exited is never signalled. The process group is a
POSIX notion (``os.getpgid``); there is no Windows support.

It runs as its own interpreter (``python -I warden.py PARENT ENGINE GRACE [SCRATCH]``),
imports only the standard library and psutil (a dependency of the plugin, so installed next
to it), and costs one scan of the process table a second. Once the engine is gone it removes
SCRATCH, the engine's temporary folder (``scratch.py``). On a normal stop the plugin stops the
engine itself (with the same functions) and then kills the warden.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable

import psutil

POLL_S = 0.5
RESCAN_S = 1.0
SCRATCH_PREFIX = "llmperf-engine-"  # the engine's temporary folders (scratch.py) start so


def running(process: psutil.Process) -> bool:
    """Whether ``process`` still runs: the same process (pid and start time), not a zombie."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # gone, or a zombie (psutil.ZombieProcess)
        return False
    except psutil.AccessDenied:  # someone else's process: it exists, so it runs
        return True


def is_alive(pid: int) -> bool:
    """Whether a process with this pid runs (exists and is not a zombie)."""
    try:
        return running(psutil.Process(pid))
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Running processes of the process group ``pgid``, also those re-parented away from the
    leader (a worker whose parent exited is out of reach of a tree walk)."""
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and running(process):
                members.append(process)
        except OSError:  # gone between listing and asking
            continue
    return members


def descendants(root: int | psutil.Process) -> list[psutil.Process]:
    """Running processes below ``root``, also those that left its group or session (setsid).

    Empty when ``root`` is gone: its children then belong to whoever adopted them, and only
    their process group or an earlier scan still ties them to the engine. Given as a
    ``Process`` seen earlier, also empty when its pid now names another process (psutil
    checks the start time), whose children are none of ours.
    """
    try:
        process = root if isinstance(root, psutil.Process) else psutil.Process(root)
        found = process.children(recursive=True)
    except psutil.Error:
        return []
    return [child for child in found if running(child)]


class EngineFamily:
    """The engine's processes: its process group, plus descendants that left it (setsid).

    Each is remembered as a psutil ``Process``, which compares pid and start time: a pid the
    system hands to an unrelated process later is neither counted nor signalled, and once the
    leader's own pid is reused, the new owner's children are not taken for the engine's. The
    group needs no such care: a pid is not handed out while a process group still has it.
    """

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.known: dict[int, psutil.Process] = {}
        try:
            self.root: psutil.Process | None = psutil.Process(leader)
        except psutil.Error:  # gone already: only its group is left to find
            self.root = None

    def scan(self) -> None:
        """Remember every process of the engine that runs now."""
        below = descendants(self.root) if self.root is not None else []
        for process in [*group_members(self.leader), *below]:
            known = self.known.get(process.pid)
            if known is None or not running(known):  # new, or a pid we saw die and reused
                self.known[process.pid] = process

    def alive(self) -> list[psutil.Process]:
        return [process for process in self.known.values() if running(process)]

    def signal(self, sig: int, *, skip_group: int | None = None) -> None:
        """``sig`` to every live process of the engine; with ``skip_group``, not to the members
        of that process group (a killpg already reached them, and a second SIGTERM is an
        order to quit at once for llama-server, which then exits 1)."""
        signal_each([p for p in self.alive() if _group_of(p) != skip_group], sig)


def _group_of(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except OSError:
        return None


def signal_each(processes: Iterable[psutil.Process], sig: int) -> None:
    """Send ``sig`` to each process that is still the one we saw (psutil checks the start
    time before it signals, and raises NoSuchProcess for a reused pid)."""
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.send_signal(sig)


def stop_family(family: EngineFamily, grace: float) -> None:
    """SIGTERM everything of the engine, SIGKILL after ``grace`` what still runs."""
    family.scan()
    family.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while family.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
        family.scan()  # a child forked during shutdown is the engine's too
    family.signal(signal.SIGKILL)


def watch(parent: int, engine: int, grace: float) -> None:
    """Return once the engine is gone: on its own, or stopped because ``parent`` died."""
    family = EngineFamily(engine)
    last_scan = 0.0
    while os.getppid() == parent:
        now = time.monotonic()
        if now - last_scan >= RESCAN_S:
            family.scan()
            last_scan = now
            if not family.alive():
                return  # the engine is gone: nothing left to guard
        time.sleep(POLL_S)
    stop_family(family, grace)


def remove_scratch(folder: str) -> None:
    """Remove the engine's temporary folder; only one named as the plugin names them."""
    if os.path.basename(folder).startswith(SCRATCH_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print("usage: warden.py PARENT_PID ENGINE_PID GRACE_S [SCRATCH_DIR]", file=sys.stderr)
        return 2
    parent, engine, grace = int(argv[0]), int(argv[1]), float(argv[2])
    # A Ctrl-C at the terminal is pytest's to handle (it stops the engine itself); the
    # warden only acts once pytest is gone.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(parent, engine, grace)
    if len(argv) == 4:
        # Also when the engine ended on its own: a pytest killed after that runs no teardown.
        remove_scratch(argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
