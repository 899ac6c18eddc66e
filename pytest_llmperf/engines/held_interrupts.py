"""Hold Ctrl-C (and a SIGTERM the plugin turns into one) while an engine is being stopped.

A stop cut halfway leaves an engine behind: an impatient second Ctrl-C, or a ``timeout``
that forwards the signal the terminal already sent, lands in the middle of the SIGTERM, the
grace period and the SIGKILL. Held signals are delivered again, to the same handlers, once
the stop is done, so the interrupt still ends the run, only after the engine is gone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# Only signals with a Python handler are held: one left at its default (SIGTERM outside
# pytest) ends the process at once, and the warden then stops the engine.
HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Run the block with Ctrl-C held; deliver what arrived after it, in order, once."""
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can be set only in the main thread, where the signals arrive anyway
        return
    arrived: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        if signum not in arrived:
            arrived.append(signum)

    previous = {}
    for kind in HELD:
        handler = signal.getsignal(kind)
        if callable(handler):
            previous[kind] = handler
            signal.signal(kind, remember)
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)
        # Delivered even when the block failed: the user's interrupt still ends the run.
        for held in arrived:
            signal.raise_signal(held)
