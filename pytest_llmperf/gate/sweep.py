"""Run a sweep: ask the search for loads, measure each, judge it, and sum the steps up into
the capacity metrics that are gated and recorded (issue 18).

Measuring one load is the caller's ``measure_load`` (a normal measurement of the profile at
that request rate or concurrency), so the loop is tested against stand-in servers and
synthetic measurements alike.
"""

from __future__ import annotations

import dataclasses
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
from pytest_llmperf.measure.profiles import WorkloadProfile
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.measure.sweep import SweepSearch, SweepSpec
from pytest_llmperf.models import SUMMARY_LATENCIES

__all__ = [
    "SWEEP_TOLERANCES",
    "SweepResult",
    "measure_sweep",
    "regression_notes",
    "run_sweep",
    "summarize",
]

# What a sweep's baseline gates by default (percent; both higher is better). Wider than a
# run's 5 %: the capacity is known only to the bisection's resolution (5 % by default) plus
# the noise of the steps near the SLO, which are the noisy ones.
SWEEP_TOLERANCES: dict[str, float] = {"capacity_at_slo": 15.0, "saturation_output_throughput": 10.0}

# What each step of the curve keeps in a baseline and the reports: the loads' story, not
# every percentile of every distribution.
CURVE_METRICS: tuple[str, ...] = (
    "completed",
    "failed",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    *SUMMARY_LATENCIES,
)

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

    def metrics(self) -> dict[str, float]:
        """The sweep-wide metrics, keyed like run metrics so the gate judges them as such.

        No step within the SLOs gives a capacity of 0 (below the lowest load tried), so a
        sweep that broke everywhere fails its gate instead of having nothing to compare.
        """
        totals = {
            key: sum(int(step.metrics.get(key) or 0) for step in self.steps)
            for key in ("completed", "failed")
        }
        found: dict[str, float | None] = {
            "capacity_at_slo": self.capacity.value if self.capacity.value is not None else 0.0,
            "capacity_lower": self.capacity.lower,
            "capacity_upper": self.capacity.upper,
            "knee_load": self.knee,
            "saturation_output_throughput": self.saturation_throughput,
            "steps": float(len(self.steps)),
        }
        return {**totals, **{key: value for key, value in found.items() if value is not None}}

    def curve(self) -> list[dict[str, Any]]:
        """Every step by load, with the SLOs it broke: what a baseline records."""
        rows = []
        for step in sorted(self.steps, key=lambda s: s.load):
            row: dict[str, Any] = {"load": step.load}
            row.update(
                (key, step.metrics[key])
                for key in CURVE_METRICS
                if isinstance(step.metrics.get(key), (int, float))
            )
            row["broken"] = [slo.describe() for slo in broken_slos(step, self.slos)]
            rows.append(row)
        return rows

    def record(self) -> dict[str, Any]:
        """The whole sweep as plain data: the curve, the capacity's bracket, the knee."""
        capacity = self.capacity
        return {
            "axis": self.axis,
            "slo": {slo.metric: slo.limit for slo in self.slos},
            "capacity": {
                "value": capacity.value,
                "lower": capacity.lower,
                "upper": capacity.upper,
                "resolution": capacity.resolution,
                "broken_at": capacity.broken_at,
                "broken": list(capacity.broken),
            },
            "knee": self.knee,
            "pareto": [list(point) for point in self.pareto],
            "curve": self.curve(),
        }


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


def measure_sweep(
    profile: WorkloadProfile,
    measure_step: Callable[[WorkloadProfile], Measurement],
    workload: Mapping[str, Any],
) -> Measurement:
    """Run ``profile``'s sweep, each step a normal measurement (warm-ups, cache isolation,
    vLLM's metrics) of the profile at that load; one Measurement for the whole sweep."""
    spec = profile.sweep
    if spec is None:
        raise ValueError(f"profile {profile.name!r} is not a sweep")
    errors: list[str] = []
    notes: list[str] = []

    def measure_load(load: float) -> Mapping[str, Any]:
        if spec.integral:
            step_profile = dataclasses.replace(profile, max_concurrency=int(load))
        else:
            step_profile = dataclasses.replace(profile, request_rate=load)
        measured = measure_step(step_profile)
        errors.extend(measured.errors)
        notes.extend(measured.notes)
        return measured.metrics

    result = run_sweep(spec, profile.slo, measure_load)
    metrics = result.metrics()
    return Measurement(
        metrics=metrics,
        workload=dict(workload),
        errors=tuple(dict.fromkeys(errors))[:5],
        failed=int(metrics.get("failed", 0)),
        notes=(*dict.fromkeys(notes), describe(result)),
        sweep=result.record(),
    )


def describe(result: SweepResult) -> str:
    """One line: the capacity with its bracket, or which bound was all the sweep found."""
    unit = "req/s" if result.axis == "request_rate" else "concurrent requests"
    capacity = result.capacity
    slos = ", ".join(slo.describe() for slo in result.slos) or "no SLO"
    steps = f"{len(result.steps)} steps"
    if capacity.value is None:
        return (
            f"capacity at SLO ({slos}) is below the lowest load tried, {capacity.upper:g} "
            f"{unit}, which broke {', '.join(capacity.broken)} ({steps})"
        )
    if capacity.upper is None:
        return (
            f"capacity at SLO ({slos}) is at least {capacity.value:g} {unit}: no step broke "
            f"an SLO ({steps}; raise sweep.max_steps or sweep.max_load to find the limit)"
        )
    return (
        f"capacity at SLO ({slos}): {capacity.value:.4g} {unit}, between the steps "
        f"{capacity.lower:g} (met all) and {capacity.upper:g} (broke "
        f"{', '.join(capacity.broken)}); resolution {100 * (capacity.resolution or 0):.0f} % "
        f"({steps})"
    )


def regression_notes(
    baseline: Mapping[str, Any] | None, measured: Mapping[str, Any]
) -> tuple[str, ...]:
    """Name the step where the SLO broke now, and where it broke in the baseline."""
    now = measured.get("capacity") or {}
    if not now:
        return ()
    then = (baseline or {}).get("capacity") or {}
    axis = "req/s" if measured.get("axis") == "request_rate" else "concurrency"
    where_now = _broken_words(now, axis)
    if not then:
        return (f"SLO {where_now}; the baseline has no curve to compare with",)
    return (f"SLO {where_now}; in the baseline {_broken_words(then, axis)}",)


def _broken_words(capacity: Mapping[str, Any], axis: str) -> str:
    at = capacity.get("broken_at")
    if at is None:
        return "not broken at any step"
    broken = ", ".join(capacity.get("broken") or ()) or "an SLO"
    return f"broke at {axis} {at:g} ({broken})"
