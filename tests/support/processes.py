"""What tests need to know about other processes: their command lines, and waiting until a
set of them is gone. Process state comes from psutil, as in ``pytest_llmperf.engines.warden``."""

from __future__ import annotations

import time
from collections.abc import Iterable

import psutil

from pytest_llmperf.engines.warden import is_alive


def command_line(pid: int) -> list[str]:
    """``pid``'s arguments; empty when it is gone (or a zombie) or not ours to read."""
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def wait_gone(pids: Iterable[int], timeout: float, interval: float = 0.1) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit; the ones still alive."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while [p for p in pids if is_alive(p)] and time.monotonic() < deadline:
        time.sleep(interval)
    return [p for p in pids if is_alive(p)]


def default_sigint() -> None:
    """``preexec_fn`` for a child a test interrupts with SIGINT: a shell starts background
    jobs (``cmd &``, nohup) with SIGINT ignored, the child inherits that, and Python then
    installs no KeyboardInterrupt handler, so the Ctrl-C the test sends would never arrive."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
