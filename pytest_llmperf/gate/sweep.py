"""Run a sweep: ask the search for loads, measure each, judge it, and sum the steps up into
the capacity metrics that are gated and recorded (issue 18).

Measuring one load is the caller's ``measure_load`` (a normal measurement of the profile at
that request rate or concurrency), so the loop is tested against stand-in servers and
synthetic measurements alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.gate.capacity import (
    Capacity,
    Slo,
    StepResult,
    broken_slos,
    capacity_at_slo,
    knee,
    pareto_points,
    saturated,
    saturation_throughput,
)
from pytest_llmperf.measure.sweep import SweepSearch, SweepSpec

__all__ = ["CAPACITY_METRICS", "SweepResult", "run_sweep", "summarize"]

# The sweep-wide metrics a baseline gates, and which way is better: all higher.
CAPACITY_METRICS: tuple[str, ...] = ("capacity_at_slo", "saturation_output_throughput")

MeasureLoad = Callable[[float], Mapping[str, Any]]


@dataclass(frozen=True)
class SweepResult:
    axis: str
    steps: tuple[StepResult, ...]  # in the order measured
    slos: tuple[Slo, ...]
    capacity: Capacity
    knee: float | None
    saturation_throughput: float
    pareto: tuple[tuple[float, float, float], ...]

    def metrics(self) -> dict[str, float | None]:
        """The sweep-wide metrics, keyed like run metrics so the gate can judge them."""
        return {
            "capacity_at_slo": self.capacity.value,
            "capacity_lower": self.capacity.lower,
            "capacity_upper": self.capacity.upper,
            "knee_load": self.knee,
            "saturation_output_throughput": self.saturation_throughput,
        }

    def curve(self) -> list[dict[str, Any]]:
        """Every step by load, with the SLOs it broke: what a baseline records."""
        rows = []
        for step in sorted(self.steps, key=lambda s: s.load):
            broken = [slo.describe() for slo in broken_slos(step, self.slos)]
            rows.append({"load": step.load, "broken": broken, "metrics": dict(step.metrics)})
        return rows


def run_sweep(spec: SweepSpec, slos: Sequence[Slo], measure_load: MeasureLoad) -> SweepResult:
    """Measure loads until the search is done or the step budget is spent.

    A step is past the boundary when it breaks an SLO, or when the throughput barely grew
    over the highest lower load measured (saturated: more load only queues).
    """
    search = SweepSearch(spec)
    steps: list[StepResult] = []
    while (load := search.next_load()) is not None:
        step = StepResult(load, dict(measure_load(load)))
        below = [s for s in steps if s.load < load]
        previous = max(below, key=lambda s: s.load) if below else None
        past = bool(broken_slos(step, slos)) or (previous is not None and saturated(previous, step))
        search.record(load, past)
        steps.append(step)
    return summarize(spec.axis, steps, slos)


def summarize(axis: str, steps: Sequence[StepResult], slos: Sequence[Slo]) -> SweepResult:
    return SweepResult(
        axis=axis,
        steps=tuple(steps),
        slos=tuple(slos),
        capacity=capacity_at_slo(steps, slos, integral=axis == "max_concurrency"),
        knee=knee(steps),
        saturation_throughput=saturation_throughput(steps),
        pareto=tuple(pareto_points(steps)),
    )
