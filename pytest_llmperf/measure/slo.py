"""Service level objectives of a sweep profile: limits a step must meet (issue 18).

An SLO is an upper limit on one latency metric in ms as vLLM's metrics name it
(``p99_ttft_ms: 2000``, ``mean_tpot_ms: 100``), or ``min_goodput_ratio``: a lower limit on
the share of requests that meet vLLM's ``--goodput`` definitions (the profile's ``goodput``).
They belong to the workload (a profile defines them), so they live here, below the gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import ConfigError

__all__ = ["GOODPUT_RATIO", "Slo", "parse_slos"]

GOODPUT_RATIO = "min_goodput_ratio"


@dataclass(frozen=True)
class Slo:
    metric: str  # a metrics key ending in _ms (upper limit), or min_goodput_ratio (lower)
    limit: float

    @property
    def upper(self) -> bool:
        return self.metric != GOODPUT_RATIO

    def value(self, metrics: Mapping[str, Any]) -> float | None:
        if self.metric == GOODPUT_RATIO:
            good, done = metrics.get("request_goodput"), metrics.get("request_throughput")
            if good is None or not done:
                return None if good is None else 0.0
            return float(good) / float(done)
        raw = metrics.get(self.metric)
        return None if raw is None else float(raw)

    def met(self, metrics: Mapping[str, Any]) -> bool:
        value = self.value(metrics)
        if value is None or math.isnan(value):
            return False  # a metric the step could not compute (no request finished) fails
        return value <= self.limit if self.upper else value >= self.limit

    def describe(self) -> str:
        return f"{self.metric} {'<=' if self.upper else '>='} {self.limit:g}"


def parse_slos(raw: Any, where: str) -> tuple[Slo, ...]:
    """``{p99_ttft_ms: 2000, min_goodput_ratio: 0.9}`` → SLOs; ``where`` names the source."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: slo must be a mapping of metric → limit, got {raw!r}")
    slos = []
    for key, limit in raw.items():
        metric = str(key)
        if metric != GOODPUT_RATIO and not metric.endswith("_ms"):
            raise ConfigError(
                f"{where}: slo key {metric!r} is neither a latency metric in ms (such as "
                f"p99_ttft_ms, mean_tpot_ms, p99_e2el_ms) nor {GOODPUT_RATIO}"
            )
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
            raise ConfigError(f"{where}: slo {metric!r} must be a positive number, got {limit!r}")
        if metric == GOODPUT_RATIO and limit > 1:
            raise ConfigError(f"{where}: slo {metric!r} is a share in (0, 1], got {limit!r}")
        slos.append(Slo(metric, float(limit)))
    return tuple(slos)
