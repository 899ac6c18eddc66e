"""The stored-baseline gate decided run by run (``--llmperf-sequential N``): pure statistics.

``--llmperf-repeat N`` plus a confirm rerun spends a fixed number of runs whatever they show.
The sequential rule measures one run at a time and stops as soon as the verdict is known:
the A/B rule of ``paired`` (looks with Pocock alpha spending and group-sequential levels),
with the stored baseline in place of A.

Per gated metric, each run's change against the baseline's center is taken on the log scale,
signed so that positive means worse (``paired.worse_log`` with the baseline as A). At each
look (after every run, up to the budget) the change's interval, at the confidence of the
look's group-sequential level (``paired.SequentialPlan.level``, computed for looks that share
their runs), is:

- with a recorded spread (the baseline's CV, from ``--llmperf-repeat`` of 2 or more when it
  was recorded; pooled with the runs' own once there are two): the Hodges-Lehmann estimate
  of the runs' changes, plus or minus ``z * sd * sqrt(1/n + 1/m)``. The ``1/m`` term is the
  baseline's own error (its center is the median of ``m`` runs); more runs now cannot
  shrink it, which is why a stored baseline decides less sharply than a paired A/B
  experiment on the same machine;
- with none (a baseline recorded from one run): the distribution-free Wilcoxon interval of
  the changes, looked at after six runs and then every two as in A/B (a spread from this
  session's first two or three runs alone is too uncertain for a normal interval). It
  ignores the baseline's own error, which one recorded run cannot show; record baselines
  with repeats.

The levels are computed for a running mean of the runs alone. Against a stored baseline the
looks share more than their runs (the baseline's own error, and the phase terms below, are
the same at every look), so they are more correlated than that, which only lowers the chance
of crossing at any look (Slepian's inequality): the error rate stays bounded.

Both intervals assume the baseline was measured on the machine as it is today. A shared
machine drifts in phases the back-to-back spread does not see, so where the history file
(``--llmperf-history``) holds enough sessions of the same configuration on this machine, the
spread between their medians (``session_spread``) widens the interval by the phase part:
``between^2 = max(0, s^2 - sd^2/m)`` (``s``: the sessions' spread; what is left of it after
the noise of a session's own runs), counted twice, since the baseline's session and today's
each had a phase of their own: ``error^2 = sd^2 (1/n + 1/m) + 2 between^2``. Without an ``sd``
(the distribution-free interval), each end moves out by ``z * sqrt(2) * s``.

The interval is read against the tolerance (times the context's scale) as in A/B: entirely
beyond it, ``regressed`` (the test fails at once, without a confirm rerun: the error rate is
already held over all looks); entirely inside it or on the better side, decided; otherwise
another run. A latency that moved by less than the ms floor is decided (as in the usual
rule). At the budget, a profile still undecided is judged by the usual rule on the median of
all its runs, and says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

from pytest_llmperf.gate import paired
from pytest_llmperf.gate.verdict import cv_percent, direction_of, pooled_log_sd

# The most runs per profile when the option is given without a number of its own choosing.
DEFAULT_BUDGET = 10


@dataclass(frozen=True)
class StoredRule:
    budget: int = DEFAULT_BUDGET  # the most runs per profile
    alpha: float = 0.10  # two-sided over all looks, as in A/B

    def plan(self, spread_recorded: bool) -> paired.SequentialPlan:
        """With a recorded spread, a look after every run (a stored baseline has no A,B,B,A
        block to wait for). Without one, the looks of A/B (from six runs, every two): the
        Wilcoxon interval cannot decide sooner, and looks it cannot use would spend the
        error rate for nothing."""
        if spread_recorded:
            return paired.SequentialPlan(self.budget, self.alpha, min_pairs=1, step=1)
        return paired.SequentialPlan(self.budget, self.alpha)


@dataclass(frozen=True)
class Baseline:
    """What the rule needs of one gated metric's baseline."""

    value: float
    cv: float | None  # recorded spread, percent; None when recorded from one run
    runs: int
    # The log-sd between sessions' medians from the history (session_spread); None: unknown,
    # the interval then trusts the baseline's session to look like today's.
    session_sd: float | None = None


def change_interval(
    baseline: Baseline, values: Sequence[float], metric: str, level: float
) -> paired.Interval | None:
    """The interval of the worse-log change of ``values`` against the baseline at confidence
    ``1 - level`` (module docstring); None when it cannot be built yet."""
    if baseline.value <= 0 or any(value <= 0 for value in values):
        return None  # no ratio to take: the usual rule decides at the budget
    direction = direction_of(metric)
    changes = [paired.worse_log(baseline.value, value, direction) for value in values]
    one_run = None
    if baseline.cv is not None:
        one_run = pooled_log_sd(baseline.cv, baseline.runs, cv_percent(values), len(values))
    z = NormalDist().inv_cdf(1.0 - level / 2.0)
    if one_run is None:
        # A spread from this session's first few runs alone is too uncertain for a normal
        # interval (two equal runs would claim none): the distribution-free one instead.
        interval = paired.hodges_lehmann(changes, level)
        if not math.isfinite(interval.low):
            return None
        widen = z * math.sqrt(2.0) * (baseline.session_sd or 0.0)
        return replace(interval, low=interval.low - widen, high=interval.high + widen)
    center = paired.hodges_lehmann_estimate(changes)
    runs = max(baseline.runs, 1)
    between = max(0.0, (baseline.session_sd or 0.0) ** 2 - one_run**2 / runs)
    error = math.sqrt(one_run**2 * (1.0 / len(values) + 1.0 / runs) + 2.0 * between)
    half = z * error
    return paired.Interval(center, center - half, center + half, 1.0 - level)


def decide_metric(
    metric: str,
    baseline: Baseline,
    values: Sequence[float],
    tolerance_pct: float,
    rule: StoredRule,
    floor_ms: float,
) -> paired.MetricDecision:
    """One gated metric after ``len(values)`` runs: same (within the tolerance), regressed,
    improved, undecided (measure on) or inconclusive (the budget is spent)."""
    direction = direction_of(metric)
    plan = rule.plan(baseline.cv is not None)
    runs = len(values)
    level = plan.level(runs)
    if level is None:
        return paired.MetricDecision(metric, direction, tolerance_pct, paired.UNDECIDED, None, runs)
    if metric.endswith("_ms") and abs(statistics.median(values) - baseline.value) < floor_ms:
        return paired.MetricDecision(metric, direction, tolerance_pct, paired.SAME, None, runs)
    interval = change_interval(baseline, values, metric, level)
    status = paired.UNDECIDED if interval is None else paired.classify(interval, tolerance_pct)
    if status == paired.UNDECIDED and runs >= plan.budget:
        status = paired.INCONCLUSIVE
    return paired.MetricDecision(metric, direction, tolerance_pct, status, interval, runs)


def decide(
    baselines: Mapping[str, Baseline],
    runs: Sequence[Mapping[str, Any]],
    tolerances: Mapping[str, float],
    rule: StoredRule,
    floor_ms: float,
) -> tuple[str | None, list[paired.MetricDecision]]:
    """Every gated metric after these runs (their metrics), and the profile's state: None to
    measure another run, else ``paired.overall``'s verdict."""
    decisions = []
    for metric, tolerance in tolerances.items():
        if metric not in baselines:
            continue
        values = [float(run[metric]) for run in runs if _is_number(run.get(metric))]
        if len(values) < len(runs):
            continue  # not measured in every run: the usual rule reports it
        decisions.append(
            decide_metric(metric, baselines[metric], values, tolerance, rule, floor_ms)
        )
    return paired.overall([d.status for d in decisions]), decisions


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def describe(decisions: Sequence[paired.MetricDecision]) -> str:
    """The intervals as percent changes, for the verdict's note."""
    parts = []
    for decision in decisions:
        bounds = decision.ratio_bounds()
        if bounds is None:
            parts.append(f"{decision.metric} {decision.status}")
            continue
        low, high = ((bound - 1.0) * 100.0 for bound in bounds)
        assert decision.interval is not None
        parts.append(
            f"{decision.metric} {low:+.1f}%..{high:+.1f}% "
            f"({decision.interval.confidence * 100:.1f}%: {decision.status})"
        )
    return "; ".join(parts)
