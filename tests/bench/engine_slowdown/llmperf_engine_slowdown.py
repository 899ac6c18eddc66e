"""A vLLM general plugin that makes every engine step take a set share longer: a slowdown
inside the engine with a known cost, for calibrating A/B experiments (tests/bench/ab_table.py).

Put this folder on the engine's PYTHONPATH: the ``.dist-info`` beside this file registers
``register`` under vLLM's ``vllm.general_plugins`` entry point, which vLLM calls in every
process it starts, the EngineCore included, before the first step. ``register`` wraps the
EngineCore's step functions: a step that ran the model for ``t`` seconds owes ``t * p / 100``
seconds more, and the step waits them out before its outputs leave it. So the engine's own time
grows by ``p`` percent, however fast or loaded the machine is, and the step's tokens reach the
client that much later.

It waits as a host waits for a slower accelerator: asleep, with the GIL released. The first
version spun on the clock instead, and a Python loop holds the GIL, so the EngineCore's input
and output threads (which move every request and token) waited as well: a 20 % share slowed
`long`'s mean TPOT by 32 %. A sleep overshoots (by ~55 us with Linux's default timer slack,
~5 us with the slack the plugin sets for the stepping thread), so the plugin keeps an account:
what the steps owe, less what the sleeps really took, and sleeps once 50 us are owed. Over a
run the added time is the share asked for, to within one sleep's overshoot. The second version
slept only once a millisecond was owed: the total held, but a 1 ms sleep landing in one of
`short`'s three gaps per request made its mean TPOT 50-80 % longer at a 6 % share.

Why not stop the processes (tests/bench/cpu_slowdown.py)? On two cores a SIGSTOP lands
mid-step and costs the engine far more than the stopped time, by an amount that varies: a
nominal 2 % slowed `long` by 11-40 % (docs/noise.md).

``LLMPERF_SLOWDOWN_BURN=1`` makes the step burn the CPU for its share instead of sleeping, as
an engine that does more CPU work would: it hashes a 16 KiB buffer over and over, and hashlib
releases the GIL for a buffer that large, so the input and output threads still run. Asleep,
a slowed engine hands its core to whatever else the machine runs; burning, it keeps it. The
two differ where A and B run at the same time on shared cores (ab_table.py --simultaneous).

The percent: ``LLMPERF_SLOWDOWN_PCT``, or the number in the file ``LLMPERF_SLOWDOWN_FILE``
(re-read at most every quarter second, so one server can be slowed by different amounts in
turn). ``LLMPERF_SLOWDOWN_LOG``, if set, names a file that gets a line every 0.2 s while the
engine works: the engine's busy seconds and the seconds added, so a table can check that the
share added is the share asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REREAD_S = 0.25
LOG_EVERY_S = 0.2
MIN_SLEEP_S = 0.00005  # below this, even a tight sleep's overshoot is a large share of it
PR_SET_TIMERSLACK = 29


class StepSlowdown:
    """How much to add after a step, and the running totals of what was added."""

    def __init__(
        self,
        fixed_percent: float,
        control: Path | None,
        log: Path | None,
        wait: Callable[[float], float] | None = None,
    ) -> None:
        self.fixed_percent = fixed_percent
        self.wait = wait  # None: measured_sleep
        self.control = control
        self.log = log
        self.percent = fixed_percent
        self.read_at = float("-inf")
        self.busy_s = 0.0
        self.added_s = 0.0
        self.owed_s = 0.0
        self.logged_at = time.monotonic()

    def current_percent(self, now: float) -> float:
        if self.control is not None and now - self.read_at >= REREAD_S:
            self.read_at = now
            try:
                self.percent = float(self.control.read_text(encoding="utf-8").strip() or 0)
            except (OSError, ValueError):
                self.percent = self.fixed_percent
        return max(self.percent, 0.0)

    def extra_seconds(self, step_s: float, now: float) -> float:
        """The time a step of ``step_s`` seconds owes."""
        return step_s * self.current_percent(now) / 100.0

    def after_step(self, step_s: float, sleep: Callable[[float], float] | None = None) -> None:
        self.busy_s += step_s
        self.owed_s += self.extra_seconds(step_s, time.monotonic())
        if self.owed_s >= MIN_SLEEP_S:
            slept = (sleep or self.wait or measured_sleep)(self.owed_s)
            self.added_s += slept
            self.owed_s -= slept  # an overshoot is paid back by the next steps
        self._maybe_log()

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if self.log is None or now - self.logged_at < LOG_EVERY_S:
            return
        self.logged_at = now
        line = {"pid": os.getpid(), "percent": self.percent, "busy_s": round(self.busy_s, 5),
                "added_s": round(self.added_s, 5)}  # fmt: skip
        try:
            with self.log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
        except OSError:
            self.log = None  # a log that cannot be written must not stop the engine


_thread_state = threading.local()


def tighten_timer_slack() -> None:
    """Let this thread's sleeps end within microseconds (Linux; per thread, once)."""
    if getattr(_thread_state, "tightened", False):
        return
    _thread_state.tightened = True
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


BURN_CHUNK = bytes(16384)  # hashlib lets go of the GIL above 2 KiB; 16 KiB takes ~10-20 us


def burned_wait(seconds: float) -> float:
    """Keep the CPU busy for ``seconds`` (the GIL released while hashing); the time taken."""
    began = time.perf_counter()
    deadline = began + seconds
    while time.perf_counter() < deadline:
        hashlib.sha256(BURN_CHUNK)
    return time.perf_counter() - began


def measured_sleep(seconds: float) -> float:
    """Sleep (the GIL released) and return how long it really took."""
    tighten_timer_slack()
    began = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - began


def slowed(step: Callable[..., Any], slowdown: StepSlowdown) -> Callable[..., Any]:
    """``step`` followed by the slowdown's share of its time, when it ran the model."""

    @functools.wraps(step)
    def step_then_wait(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        result = step(*args, **kwargs)
        ran_model = isinstance(result, tuple) and len(result) == 2 and bool(result[1])
        if ran_model:
            slowdown.after_step(time.perf_counter() - began)
        return result

    step_then_wait.llmperf_slowed = True  # type: ignore[attr-defined]
    return step_then_wait


def from_environment() -> StepSlowdown:
    control = os.environ.get("LLMPERF_SLOWDOWN_FILE")
    log = os.environ.get("LLMPERF_SLOWDOWN_LOG")
    return StepSlowdown(
        fixed_percent=float(os.environ.get("LLMPERF_SLOWDOWN_PCT", "0") or 0),
        control=Path(control) if control else None,
        log=Path(log) if log else None,
        wait=burned_wait if os.environ.get("LLMPERF_SLOWDOWN_BURN") == "1" else None,
    )


def wrap_steps(engine_core_class: type, slowdown: StepSlowdown) -> None:
    """Wrap the class's step functions once, however often vLLM calls ``register``."""
    for name in ("step", "step_with_batch_queue"):
        step = getattr(engine_core_class, name, None)
        if step is not None and not getattr(step, "llmperf_slowed", False):
            setattr(engine_core_class, name, slowed(step, slowdown))


def register() -> None:
    """vLLM's general-plugin hook: runs in each of vLLM's processes."""
    try:
        from vllm.v1.engine.core import EngineCore
    except ImportError:  # a vLLM without the v1 engine: nothing to slow
        return
    wrap_steps(EngineCore, from_environment())
