"""What tests need to know about other processes: their command lines, and waiting until a
set of them is gone. Process state itself comes from ``pytest_llmperf.engines.warden``."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from pytest_llmperf.engines.warden import is_alive


def command_line(pid: int) -> list[str]:
    """``pid``'s arguments as /proc shows them; empty when it is gone (or a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    # Normally NUL-terminated; a process that rewrote its title (vLLM's engine core) may not be.
    return raw.decode(errors="replace").rstrip("\0").split("\0") if raw else []


def wait_gone(pids: Iterable[int], timeout: float, interval: float = 0.1) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to exit; the ones still alive."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while [p for p in pids if is_alive(p)] and time.monotonic() < deadline:
        time.sleep(interval)
    return [p for p in pids if is_alive(p)]
