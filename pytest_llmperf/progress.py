"""Progress of a long run as plain lines: readable under output capture and in CI logs.

A line is printed each time another tenth of the requests has finished, so a 1000-request
profile writes ten lines, not a thousand, and no carriage-return animation garbles a log file.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ProgressLine:
    def __init__(self, label: str, write_line: Callable[[str], None], steps: int = 10) -> None:
        self.label = label
        self.write_line = write_line
        self.steps = steps
        self._started: float | None = None
        self._next_step = 1

    def __call__(self, done: int, total: int, output_tokens: int) -> None:
        now = time.perf_counter()
        if self._started is None:
            self._started = now
        if total <= 0 or done * self.steps < self._next_step * total:
            return
        while done * self.steps >= self._next_step * total:
            self._next_step += 1
        elapsed = max(now - self._started, 1e-9)
        self.write_line(
            f"llmperf {self.label}: {done}/{total} requests, "
            f"{output_tokens / elapsed:,.0f} output tok/s so far"
        )
