"""A small watcher process that stops an engine when the process that started it dies.

The engine is started in a process group of its own, with a death signal (SIGTERM when its
parent dies). That alone is not enough: an engine may ignore or swallow SIGTERM while it
starts up (vLLM did, 30 s into loading, and served on after its pytest had been killed).
The warden does not depend on the engine's good will. It is started next to the engine,
watches the pytest process, and when that process is gone (SIGKILL, a crash, an OOM kill:
anything that ran no teardown) it sends SIGTERM to every process of the engine's process
group and to every descendant it saw, waits the grace period, and SIGKILLs what is left.

It runs as its own interpreter (``python -I warden.py PARENT ENGINE GRACE``), imports only
the standard library, and costs a /proc scan a second. On a normal stop the plugin stops
the engine itself and then kills the warden.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

POLL_S = 0.5
RESCAN_S = 1.0


class ProcStat(NamedTuple):
    """What /proc/PID/stat says of a process, as far as stopping an engine needs it."""

    state: str  # "Z": a zombie, gone but not yet reaped
    parent: int
    group: int
    session: int
    started: int  # clock ticks after boot: with the pid, names one process for good


def read_stat(pid: int) -> ProcStat | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    return ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def is_alive(pid: int) -> bool:
    """Whether the process runs (exists and is not a zombie)."""
    stat = read_stat(pid)
    return stat is not None and stat.state != "Z"


def live_processes() -> dict[int, ProcStat]:
    """Every running (non-zombie) process."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_stat(int(entry))) and stat.state != "Z":
            found[int(entry)] = stat
    return found


def descendants_of(root: int, processes: Mapping[int, ProcStat]) -> set[int]:
    """The processes below ``root``, also those that moved to a group or session of their
    own."""
    children: dict[int, list[int]] = {}
    for pid, stat in processes.items():
        children.setdefault(stat.parent, []).append(pid)
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class EngineFamily:
    """The engine's processes: its process group, plus descendants that left it (setsid).

    Each is remembered with its start time, so that a pid the kernel hands to an unrelated
    process later is never signalled.
    """

    def __init__(self, leader: int) -> None:
        self.leader = leader
        self.known: dict[int, int] = {}

    def scan(self) -> None:
        processes = live_processes()
        members = {pid for pid, stat in processes.items() if stat.group == self.leader}
        for pid in members | descendants_of(self.leader, processes):
            self.known.setdefault(pid, processes[pid].started)

    def alive(self) -> list[int]:
        live = []
        for pid, started in self.known.items():
            stat = read_stat(pid)
            if stat and stat.state != "Z" and stat.started == started:
                live.append(pid)
        return live

    def signal(self, sig: int) -> None:
        for pid in self.alive():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


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


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: warden.py PARENT_PID ENGINE_PID GRACE_S", file=sys.stderr)
        return 2
    parent, engine, grace = int(argv[0]), int(argv[1]), float(argv[2])
    # A Ctrl-C at the terminal is pytest's to handle (it stops the engine itself); the
    # warden only acts once pytest is gone.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(parent, engine, grace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
