"""Run a command (an engine server) slower by a set share of CPU time: a real slowdown
inside the engine, for calibrating A/B experiments (tests/bench/ab_table.py).

    python cpu_slowdown.py --percent 10 -- python -m vllm.entrypoints.openai.api_server ...

Every 100 ms period the command and all its descendants (vLLM's EngineCore does the work)
are stopped (SIGSTOP) for ``f = p / (100 + p)`` of the period and then continued, so a
CPU-bound run takes ``1 / (1 - f) = 1 + p/100`` times as long. The real effect on a given
workload is what ab_table.py measures: waiting on the network or the other sessions' load
dilutes it.

On a busy machine the wrapper itself wakes late, so a stop meant to last 2 ms lasts 5-20: the
first version slowed `long` by 16-18 % at a nominal 2-4 % and erratically (docs/noise.md). So
the wrapper asks for real-time scheduling where it may (it sleeps almost all the time, and a
real-time sleeper wakes on time), measures how long each stop really lasted, and lets the
processes run for as long as keeps the stopped share at ``f`` over every period.
``--control FILE`` reads the percent from FILE every period instead, so one
server can be slowed by different amounts in turn without a restart.

Signals: SIGTERM or SIGINT continue every process first (a stopped process cannot act on
a signal) and are passed to the command; the wrapper exits with its exit code. The command
gets SIGKILL if the wrapper dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

PERIOD_S = 0.1


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stopped_share(percent: float) -> float:
    """The share of each period to stop for a slowdown of ``percent``."""
    return max(percent, 0.0) / (100.0 + max(percent, 0.0))


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def running_time(stopped_s: float, share: float) -> float:
    """How long to let the processes run after a stop that really lasted ``stopped_s``, so
    that the period's stopped share is ``share`` however late the wrapper woke."""
    return stopped_s * (1.0 - share) / share


def _prefer_waking_on_time() -> None:
    """Real-time priority for this sleeper where allowed; the default policy otherwise."""
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))


def _send(processes: list[psutil.Process], sig: int) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            process.send_signal(sig)


def _percent(fixed: float, control: Path | None) -> float:
    if control is None:
        return fixed
    try:
        return float(control.read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return fixed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--percent", type=float, default=0.0, help="slowdown in percent")
    parser.add_argument("--control", type=Path, default=None, help="file holding the percent")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    child = subprocess.Popen(command, preexec_fn=_die_with_parent)  # default policy
    _prefer_waking_on_time()
    root = psutil.Process(child.pid)
    stopping = False

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        _send(_tree(root), signal.SIGCONT)
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    processes = _tree(root)
    refreshed = time.monotonic()
    while child.poll() is None:
        share = 0.0 if stopping else stopped_share(_percent(args.percent, args.control))
        if time.monotonic() - refreshed > 1.0:  # new workers appear while vLLM starts
            processes, refreshed = _tree(root), time.monotonic()
        if share <= 0.0:
            time.sleep(PERIOD_S)
            continue
        began = time.monotonic()
        _send(processes, signal.SIGSTOP)
        try:
            time.sleep(PERIOD_S * share)
        finally:
            _send(processes, signal.SIGCONT)
        time.sleep(running_time(time.monotonic() - began, share))
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main())
