"""What a sweep's steps say about capacity: SLO checks per step, and for the whole sweep the
capacity at SLO, the knee, the saturation throughput and the Pareto points (issue 18).

Pure functions over step results (a load and vLLM's metrics), so they are tested with
synthetic curves. Definitions, chosen to be simple to explain:

- An SLO is an upper limit on one metric in ms (``p99_ttft_ms: 2000``), or a lower limit on
  the share of requests meeting vLLM's ``--goodput`` definitions (``min_goodput_ratio``).
- Capacity at SLO: take the lowest step that breaks an SLO and the highest step below it
  that meets all; between the two, each broken SLO's metric is interpolated linearly in the
  load, and the capacity is the lowest load where one reaches its limit. The bracket (those
  two loads) is the resolution: the truth lies inside it if the metrics grow with the load.
  A concurrency is not interpolated: the capacity is the highest concurrency that met all.
  No step breaking an SLO gives a lower bound only; the first step breaking one an upper one.
- Knee: the highest load after which throughput stops following the load: the last step
  whose relative throughput gain over the step before is at least half its relative load gain.
- Saturation throughput: the highest output token throughput of any step.
- Pareto points: (output throughput, output tokens per second per user = 1000 / mean TPOT)
  of the steps that no other step beats on both.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.measure.slo import Slo, parse_slos

__all__ = [
    "Capacity",
    "Slo",
    "StepResult",
    "broken_slos",
    "capacity_at_slo",
    "knee",
    "pareto_points",
    "parse_slos",
    "saturated",
    "saturation_throughput",
]

KNEE_EFFICIENCY = 0.5  # throughput gain per load gain below this: past the knee


@dataclass(frozen=True)
class StepResult:
    load: float  # the request rate (req/s) or max concurrency of this step
    metrics: Mapping[str, Any]


def broken_slos(step: StepResult, slos: Sequence[Slo]) -> tuple[Slo, ...]:
    return tuple(slo for slo in slos if not slo.met(step.metrics))


@dataclass(frozen=True)
class Capacity:
    """Capacity at SLO. ``value`` None: no step met every SLO (``upper`` is the lowest load
    tried). ``upper`` None: no step broke one (``value`` is a lower bound, the highest load)."""

    value: float | None
    lower: float | None  # highest load measured within every SLO (below ``upper``)
    upper: float | None  # lowest load measured breaking one
    broken_at: float | None  # the step that broke, as ``upper``; kept for the regression table
    broken: tuple[str, ...] = ()  # which SLOs it broke, described

    @property
    def resolution(self) -> float | None:
        """The bracket's width relative to its lower end: how exact ``value`` can be."""
        if self.lower is None or self.upper is None:
            return None
        return (self.upper - self.lower) / self.lower

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


def capacity_at_slo(
    steps: Sequence[StepResult], slos: Sequence[Slo], *, integral: bool = False
) -> Capacity:
    """``integral``: the load is a concurrency, where only whole steps are meaningful, so the
    capacity is the highest concurrency measured within every SLO, not interpolated."""
    ordered = sorted(steps, key=lambda s: s.load)
    failing = [s for s in ordered if broken_slos(s, slos)]
    if not failing:
        top = ordered[-1].load if ordered else None
        return Capacity(value=top, lower=top, upper=None, broken_at=None)
    first_bad = failing[0]
    broken = broken_slos(first_bad, slos)
    good = [s for s in ordered if s.load < first_bad.load and not broken_slos(s, slos)]
    described = tuple(slo.describe() for slo in broken)
    if not good:
        return Capacity(None, None, first_bad.load, first_bad.load, described)
    last_good = good[-1]
    if integral:
        value = last_good.load
    else:
        value = min(_crossing(last_good, first_bad, slo) for slo in broken)
    return Capacity(value, last_good.load, first_bad.load, first_bad.load, described)


def _crossing(good: StepResult, bad: StepResult, slo: Slo) -> float:
    """Where the metric, linear between the two steps, reaches the limit."""
    low, high = slo.value(good.metrics), slo.value(bad.metrics)
    if low is None or high is None or math.isnan(high) or high == low:
        return bad.load  # nothing to interpolate with: the broken step is the bound
    share = (slo.limit - low) / (high - low)
    share = min(max(share, 0.0), 1.0)
    return good.load + share * (bad.load - good.load)


def _throughput(step: StepResult) -> float:
    return float(step.metrics.get("output_throughput") or 0.0)


def saturated(previous: StepResult, step: StepResult) -> bool:
    """The load grew from ``previous`` to ``step`` but the throughput barely followed."""
    if step.load <= previous.load or _throughput(previous) <= 0:
        return False
    load_gain = step.load / previous.load - 1
    throughput_gain = _throughput(step) / _throughput(previous) - 1
    return throughput_gain < KNEE_EFFICIENCY * load_gain


def knee(steps: Sequence[StepResult]) -> float | None:
    """The load after which throughput stops following (None: it never stopped)."""
    ordered = sorted(steps, key=lambda s: s.load)
    for previous, step in itertools.pairwise(ordered):
        if saturated(previous, step):
            return previous.load
    return None


def saturation_throughput(steps: Sequence[StepResult]) -> float:
    return max((_throughput(s) for s in steps), default=0.0)


def pareto_points(steps: Sequence[StepResult]) -> list[tuple[float, float, float]]:
    """(load, output throughput, per-user tokens/s) of the undominated steps, by throughput."""
    points = []
    for step in steps:
        tpot = step.metrics.get("mean_tpot_ms")
        if not tpot or _throughput(step) <= 0:
            continue
        points.append((step.load, _throughput(step), 1000.0 / float(tpot)))
    points.sort(key=lambda p: (-p[1], -p[2]))
    front: list[tuple[float, float, float]] = []
    for point in points:
        if not front or point[2] > front[-1][2]:
            front.append(point)
    return sorted(front, key=lambda p: p[1])
