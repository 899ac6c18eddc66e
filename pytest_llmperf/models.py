"""Value types shared by every room of the plugin.

Frozen dataclasses only, importing nothing of the project, so that any module (and any user
script) can build or read them without pulling in numpy, httpx or pytest.
"""

from __future__ import annotations

import enum
from array import array
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SampleRequest:
    """One request of a workload, fixed before anything is sent."""

    prompt: str
    prompt_len: int  # client-side token count (special tokens excluded for random prompts)
    expected_output_len: int
    ignore_eos: bool = True


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What one streamed request measured; times are ``time.perf_counter()`` seconds.

    ``itl`` is an ``array('d')`` rather than a list of floats: 100,000 records of 100 gaps
    each then need 80 MB instead of several hundred.
    """

    success: bool
    start_time: float
    ttft: float = 0.0
    itl: array[float] = field(default_factory=lambda: array("d"))
    latency: float = 0.0
    output_tokens: int = 0
    prompt_len: int = 0  # the server's usage.prompt_tokens when it sent one, else the client's
    chunks: int = 0  # token chunks received (an SSE event with non-empty choices)
    error: str = ""
    queue_time: float = 0.0  # time spent waiting for the concurrency semaphore


class Direction(str, enum.Enum):
    """Which way a metric improves."""

    HIGHER_IS_BETTER = "higher"
    LOWER_IS_BETTER = "lower"


class Outcome(str, enum.Enum):
    """The verdict of one profile against its baseline. Only PASS is silent."""

    PASS = "pass"
    REGRESSED = "regressed"
    IMPROVED = "improved"  # better than the tolerance: the baseline is stale
    NO_BASELINE = "no-baseline"
    WORKLOAD_CHANGED = "workload-changed"
    INSUFFICIENT_DATA = "insufficient-data"
    REQUESTS_FAILED = "requests-failed"  # more failed requests than the error budget allows
    RECORDED = "recorded"  # --update-baselines, or a first run on this machine, wrote them
    MACHINE_CHANGED = "machine-changed"  # the baseline was measured on another kind of machine
    # A/B experiments (--llmperf-ab): B's interval lies within the tolerance of A, or it
    # straddles the tolerance when the budget is spent (passes with a warning unless strict).
    SAME = "same"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric of one profile, measured against its baseline."""

    metric: str
    baseline: float
    measured: float
    tolerance_pct: float | None  # None: informational, never gated
    direction: Direction
    status: str  # "pass", "regressed", "improved" or "info"
    threshold_pct: float | None = None  # the limit that decided; tolerance, or wider from spread
    # "tolerance", "spread", "floor" (moved < floor_ms), "bound" (a lower bound on one side
    # cannot show the change), "sequential" or "paired"
    decided_by: str = "tolerance"

    @property
    def change_pct(self) -> float:
        if self.baseline == 0:
            return 0.0 if self.measured == 0 else float("inf")
        return (self.measured - self.baseline) / abs(self.baseline) * 100.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one profile plus everything a reviewer needs to act on it."""

    outcome: Outcome
    comparisons: tuple[MetricComparison, ...] = ()
    notes: tuple[str, ...] = ()  # non-pass states explained in words: engine version moved, ...
    confirmed: bool = False  # a regression that a rerun agreed with
    first_run: bool = False  # recorded because this machine had no comparable baseline

    @property
    def failed(self) -> bool:
        return self.outcome not in _NOT_FAILED


_NOT_FAILED = (Outcome.PASS, Outcome.IMPROVED, Outcome.RECORDED, Outcome.SAME, Outcome.INCONCLUSIVE)


# The latencies a summary shows of a run: the mean and the tail of each distribution.
SUMMARY_LATENCIES: tuple[str, ...] = (
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "p99_e2el_ms",
)
