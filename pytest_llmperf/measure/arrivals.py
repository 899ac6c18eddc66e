"""When each request is sent: the arrival schedule of a paced run (metrics-spec §1.1).

The schedule is the one ``vllm bench serve --seed S`` draws, request by request: gaps from
NumPy's legacy global generator seeded with ``S`` (here a private ``RandomState(S)``, which
draws the same stream without touching the global one), Gamma(shape=burstiness,
scale=1/(rate*burstiness)) so the mean gap is 1/rate, offsets as the running sum of the gaps
(the first request waits its own gap), and without ramp-up the offsets scaled so the last one
is exactly ``n / rate``. With ramp-up the rate of request ``i`` moves from a start to an end
rate (linearly or geometrically over the request index) and the offsets are not rescaled, as
in vLLM.

Same draws as vLLM only when nothing else consumed NumPy's global generator between vLLM's
seeding and its schedule, which holds for its ``random`` and ``sharegpt`` datasets.
Kept out of ``loadgen`` so that the load generator imports without NumPy.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pytest_llmperf.errors import ConfigError

RampStrategy = Literal["linear", "exponential"]
RAMP_STRATEGIES: tuple[RampStrategy, ...] = ("linear", "exponential")


@dataclass(frozen=True)
class RampUp:
    """vLLM's ``--ramp-up-strategy/--ramp-up-start-rps/--ramp-up-end-rps``."""

    strategy: RampStrategy
    start_rps: float
    end_rps: float

    def __post_init__(self) -> None:
        if self.strategy not in RAMP_STRATEGIES:
            raise ConfigError(
                f"ramp-up strategy must be one of {', '.join(RAMP_STRATEGIES)}, "
                f"got {self.strategy!r}"
            )
        if not (self.start_rps > 0 and self.end_rps > 0):
            raise ConfigError(
                f"ramp-up start and end rates must be > 0, got {self.start_rps} and {self.end_rps}"
            )

    def rates(self, n: int) -> list[float]:
        """The rate that applies to each of ``n`` requests, by index."""
        steps = max(n - 1, 1)
        if self.strategy == "linear":
            span = self.end_rps - self.start_rps
            return [self.start_rps + span * (i / steps) for i in range(n)]
        ratio = self.end_rps / self.start_rps
        return [self.start_rps * ratio ** (i / steps) for i in range(n)]


def arrival_offsets(
    n: int,
    request_rate: float,
    burstiness: float = 1.0,
    seed: int = 0,
    ramp_up: RampUp | None = None,
) -> list[float]:
    """Send times of ``n`` requests in seconds after the start.

    An infinite rate (without ramp-up) gives all zeros; an infinite burstiness gives gaps of
    exactly one over the rate.
    """
    if n <= 0:
        return []
    if not request_rate > 0 or not burstiness > 0:
        raise ConfigError(
            f"request_rate and burstiness must be > 0, got {request_rate} and {burstiness}"
        )
    if ramp_up is None:
        if math.isinf(request_rate):
            return [0.0] * n
        rates = [request_rate] * n
    else:
        rates = ramp_up.rates(n)
    if math.isinf(burstiness):
        gaps = [1.0 / rate for rate in rates]
    else:
        # One draw per request, in index order: an array of scales draws the same stream
        # as vLLM's one call per request.
        scales = np.array([1.0 / (rate * burstiness) for rate in rates])
        gaps = [float(g) for g in np.random.RandomState(seed).gamma(burstiness, scales)]
    offsets = list(itertools.accumulate(gaps))
    if ramp_up is None and offsets[-1] != 0:
        factor = (n / request_rate) / offsets[-1]
        offsets = [offset * factor for offset in offsets]
    return offsets
