"""Progress of a long run as plain lines: readable under output capture and in CI logs.

A line is printed each time another tenth of the requests has finished, so a 1000-request
profile writes ten lines, not a thousand, and no carriage-return animation garbles a log file.
Runs of fewer than ``min_total`` requests finish too fast to need progress and print nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ProgressLine:
    label: str
    write_line: Callable[[str], None]
    steps: int = 10
    min_total: int = 20
    _started: float | None = field(default=None, init=False)
    _tokens_at_start: int = field(default=0, init=False)
    _next_step: int = field(default=1, init=False)

    def __call__(self, done: int, total: int, output_tokens: int) -> None:
        now = time.perf_counter()
        if self._started is None:
            # The first completion starts the clock: the rate covers what came after it.
            self._started, self._tokens_at_start = now, output_tokens
        if total < self.min_total or done * self.steps < self._next_step * total:
            return
        while done * self.steps >= self._next_step * total:
            self._next_step += 1
        elapsed = now - self._started
        rate = (
            f", {(output_tokens - self._tokens_at_start) / elapsed:,.0f} output tok/s"
            if elapsed > 0
            else ""
        )
        self.write_line(f"llmperf {self.label}: {done}/{total} requests done{rate}")
