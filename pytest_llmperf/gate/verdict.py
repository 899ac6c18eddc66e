"""Whether a run regressed: direction-aware tolerances widened by the measured noise.

Pure statistics over a baseline entry and a run's center and spread; the verdict says why
whenever it is not a plain pass (no baseline, workload changed, regressed, improved).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import BaselineError
from pytest_llmperf.gate.store import DEFAULT_TOLERANCES, BaselineEntry
from pytest_llmperf.models import Direction, MetricComparison, Outcome, Verdict

_HIGHER_IS_BETTER = re.compile(r"(throughput|_per_s|goodput|capacity|^completed$|hit_rate)")

# A sweep in which no step broke an SLO knows only a lower bound of its capacity: the highest
# load it reached, which depends on where the throughput happened to saturate (on a two-core
# VM a recorded sweep and its unchanged rerun stopped at 256 and 128 req/s, neither breaking
# an SLO). A bound that fell is no evidence that the capacity fell, and a value above a
# recorded bound no evidence that it rose. The sweep records the bracket's upper end only
# when one exists.
_KNOWN_ONLY_WITH = {"capacity_at_slo": "capacity_upper"}


def direction_of(metric: str) -> Direction:
    """Throughputs, capacities and cache hit rates improve upwards; latencies, durations and
    failure counts downwards."""
    if _HIGHER_IS_BETTER.search(metric):
        return Direction.HIGHER_IS_BETTER
    return Direction.LOWER_IS_BETTER


@dataclass(frozen=True)
class GateSettings:
    """How strict a comparison is (PR gate vs nightly, see settings)."""

    tolerance_scale: float = 1.0  # multiplies every tolerance
    # A change within this many standard errors of the difference is noise, whatever the
    # tolerance. 2, not 3: a regression is measured again before it fails (confirm reruns),
    # so a first look may be quicker to suspect. With k = 2 tests/bench/noise_table.py
    # measured 1 false alarm in 20 unchanged very-long gates and 20 of 20 slowdowns of
    # +10 % or more caught (docs/noise.md, "How often the gate is wrong").
    spread_factor: float = 2.0
    default_tolerances: Mapping[str, float] | None = None
    # A latency (``*_ms``) that moved by less than this many milliseconds did not move: a
    # client cannot resolve a token's time that finely, and near zero (a server that sent
    # a whole answer in one chunk: TPOT 0.0004 ms) any relative change is meaningless.
    floor_ms: float = 0.1


def cv_percent(values: Sequence[float]) -> float | None:
    """The coefficient of variation of ``values`` in percent (sample standard deviation over
    the mean); None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) * 100.0 if mean else None


def pooled_log_sd(
    recorded_cv: float | None,
    recorded_runs: int,
    measured_cv: float | None,
    measured_runs: int,
) -> float | None:
    """The standard deviation of the log of one run, pooled from the baseline's spread and
    this measurement's by their degrees of freedom; None when neither side has a spread. A
    spread written by hand without ``runs`` counts as one degree of freedom."""
    weighted = 0.0
    degrees = 0
    for cv, runs in ((recorded_cv, max(recorded_runs, 2)), (measured_cv, measured_runs)):
        if cv is not None and runs > 1:
            variance = math.log1p((cv / 100.0) ** 2)  # variance of the log of one run
            weighted += (runs - 1) * variance
            degrees += runs - 1
    return math.sqrt(weighted / degrees) if degrees else None


def noise_limit(
    recorded_cv: float | None,
    recorded_runs: int,
    measured_cv: float | None,
    measured_runs: int,
    factor: float,
    direction: Direction = Direction.LOWER_IS_BETTER,
) -> float:
    """The change (percent, in the worse ``direction``) that noise alone explains:
    ``factor`` standard errors of the difference between the baseline's center
    (``recorded_runs`` runs) and this one's (``measured_runs`` runs).

    The spread of one run is the coefficient of variation of the recorded runs and of this
    measurement's runs, pooled by their degrees of freedom (a spread written by hand without
    ``runs`` counts as one degree). Each center's error shrinks with its number of runs:
    ``sqrt(1/n + 1/m)``. Serving noise is multiplicative (a starved run is 2x slower, not
    50 ms slower), so the limit is taken on the log scale and turned back into percent: for
    a small spread that is ``factor * cv * sqrt(1/n + 1/m)``; for a large one a throughput
    limit stays short of -100 % (however noisy the baseline, some drop in throughput is
    a regression) and a latency limit grows past +100 %. With no spread known on either side, noise
    explains nothing and the tolerance alone decides.
    """
    one_run = pooled_log_sd(recorded_cv, recorded_runs, measured_cv, measured_runs)
    if one_run is None:
        return 0.0
    error = one_run * math.sqrt(1.0 / max(measured_runs, 1) + 1.0 / max(recorded_runs, 1))
    if direction is Direction.HIGHER_IS_BETTER:
        return -math.expm1(-factor * error) * 100.0
    return math.expm1(factor * error) * 100.0


def _threshold(
    metric: str,
    tolerance: float,
    entry: BaselineEntry,
    measured_spread: float | None,
    measured_runs: int,
    gate: GateSettings,
) -> tuple[float, str]:
    """The allowed change in percent, and what decided it.

    A fixed tolerance cries wolf on noisy metrics; where the runs show more noise than the
    tolerance covers (``noise_limit``), the limit widens to that and the report says so.
    """
    tolerance = tolerance * gate.tolerance_scale
    noise = noise_limit(
        entry.spread.get(metric),
        entry.runs,
        measured_spread,
        measured_runs,
        gate.spread_factor,
        direction_of(metric),
    )
    if noise > tolerance:
        return noise, "spread"
    return tolerance, "tolerance"


def gated_tolerances(
    entry: BaselineEntry,
    tolerance_overrides: Mapping[str, float] | None,
    gate: GateSettings,
) -> dict[str, float]:
    """The gated metrics and their tolerances (percent, before the context's scale): the
    entry's, else the defaults, with a test's overrides on top, in the entry's order."""
    tolerances = dict(entry.tolerances or gate.default_tolerances or DEFAULT_TOLERANCES)
    tolerances.update(tolerance_overrides or {})
    return tolerances


def compare(
    entry: BaselineEntry,
    measured: Mapping[str, Any],
    *,
    tolerance_overrides: Mapping[str, float] | None = None,
    measured_spread: Mapping[str, float] | None = None,
    measured_runs: int = 1,
    gate: GateSettings | None = None,
) -> tuple[MetricComparison, ...]:
    """Each recorded metric against its measurement; a gated one (it has a tolerance) is
    ``regressed`` or ``improved`` when it moved beyond its limit, else ``pass``.

    ``measured`` is the center (median) of ``measured_runs`` runs whose spread (CV, %) is
    ``measured_spread``; the limit is the larger of the tolerance and ``noise_limit``.
    """
    gate = gate or GateSettings()
    tolerances = gated_tolerances(entry, tolerance_overrides, gate)
    rows: list[MetricComparison] = []
    # Gated metrics first, in the order their tolerances are listed; then the rest by name.
    gated_order = {metric: index for index, metric in enumerate(tolerances)}
    ordered = sorted(entry.metrics, key=lambda m: (gated_order.get(m, len(gated_order)), m))
    for metric in ordered:
        value = measured.get(metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        baseline_value = entry.metrics[metric]
        direction = direction_of(metric)
        tolerance = tolerances.get(metric)
        comparison = MetricComparison(
            metric=metric,
            baseline=baseline_value,
            measured=float(value),
            tolerance_pct=tolerance,
            direction=direction,
            status="info",
        )
        if tolerance is None:
            rows.append(comparison)
            continue
        limit, decided_by = _threshold(
            metric, tolerance, entry, (measured_spread or {}).get(metric), measured_runs, gate
        )
        worse_by = comparison.change_pct
        if direction is Direction.LOWER_IS_BETTER:
            worse_by = -worse_by
        # worse_by < 0 means the metric got worse by that many percent
        if metric.endswith("_ms") and abs(float(value) - baseline_value) < gate.floor_ms:
            status, decided_by = "pass", "floor"
        elif worse_by < -limit:
            status = "regressed"
            if _lower_bound_only(metric, measured):
                status, decided_by = "pass", "bound"
        elif worse_by > limit:
            status = "improved"
            if _lower_bound_only(metric, entry.metrics):
                status, decided_by = "pass", "bound"
        else:
            status = "pass"
        rows.append(
            MetricComparison(
                metric=metric,
                baseline=baseline_value,
                measured=float(value),
                tolerance_pct=tolerance,
                direction=direction,
                status=status,
                threshold_pct=limit,
                decided_by=decided_by,
            )
        )
    missing = [m for m in tolerances if m in entry.metrics and m not in measured]
    if missing:
        raise BaselineError(f"gated metric(s) {', '.join(missing)} were not measured in this run")
    return tuple(rows)


def _lower_bound_only(metric: str, metrics: Mapping[str, Any]) -> bool:
    """``metric`` in ``metrics`` is a lower bound, not an estimate (``_KNOWN_ONLY_WITH``)."""
    companion = _KNOWN_ONLY_WITH.get(metric)
    return companion is not None and companion not in metrics


def workload_differences(
    recorded: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> list[str]:
    """Human-readable differences between the baseline's workload and this run's."""
    if recorded is None:
        return []
    keys = sorted(set(recorded) | set(current))
    return [
        f"{key}: baseline {recorded.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if _normal(recorded.get(key)) != _normal(current.get(key))
    ]


def _normal(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def judge(
    entry: BaselineEntry | None,
    measured: Mapping[str, Any],
    workload: Mapping[str, Any],
    *,
    engine_version: str | None,
    baseline_file: Path,
    tolerance_overrides: Mapping[str, float] | None = None,
    measured_spread: Mapping[str, float] | None = None,
    measured_runs: int = 1,
    gate: GateSettings | None = None,
) -> Verdict:
    """The verdict of one run; every state that is not a plain pass says why in ``notes``."""
    if entry is None:
        return Verdict(
            Outcome.NO_BASELINE,
            notes=(f"no baseline for this profile in {baseline_file}",),
        )
    if entry.status == "failed":
        return Verdict(
            Outcome.NO_BASELINE,
            notes=(
                f"the baseline in {baseline_file} records this configuration as failed "
                f"({entry.error or 'no error recorded'}); it runs now, so record real numbers",
            ),
        )
    differences = workload_differences(entry.workload, workload)
    if differences:
        return Verdict(
            Outcome.WORKLOAD_CHANGED,
            notes=(
                "the workload changed since the baseline was recorded: " + "; ".join(differences),
            ),
        )
    notes: list[str] = []
    if entry.engine_version and engine_version and entry.engine_version != engine_version:
        notes.append(
            f"engine version changed: baseline {entry.engine_version}, now {engine_version}"
        )
    rows = compare(
        entry,
        measured,
        tolerance_overrides=tolerance_overrides,
        measured_spread=measured_spread,
        measured_runs=measured_runs,
        gate=gate,
    )
    return verdict_from_rows(rows, notes)


def verdict_from_rows(rows: tuple[MetricComparison, ...], notes: list[str]) -> Verdict:
    """The profile's outcome from its rows: regressed if one gated metric is, else improved
    if one is (with the hint to refresh the baseline), else pass."""
    statuses = {row.status for row in rows}
    notes = list(notes)
    if "regressed" in statuses:
        outcome = Outcome.REGRESSED
    elif "improved" in statuses:
        outcome = Outcome.IMPROVED
        notes.append("improved beyond tolerance: refresh the baseline with --update-baselines")
    else:
        outcome = Outcome.PASS
    return Verdict(outcome, comparisons=rows, notes=tuple(notes))
