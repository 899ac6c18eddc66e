"""Paired A/B statistics and the sequential stopping rule: pure functions, no I/O.

Each pair of runs (A then B, or B then A) gives one ratio B/A per metric. Serving noise is
multiplicative, so the ratios are compared on the log scale, turned so that a positive value
always means "B is worse" (``worse_log``). The verdict comes from a confidence interval for
the median of those values: the Hodges-Lehmann estimate with its Wilcoxon signed-rank
interval (the order statistics of the Walsh averages, the critical value from the exact null
distribution). It assumes only that the paired differences are symmetric about their median,
not that they are normal, and one stalled run moves it by one rank, not by its size.

The interval is read against the metric's tolerance ``d`` (percent, the smallest change that
matters), on the log scale ``t = ln(1 + d/100)``:

- ``regressed``: the whole interval lies beyond ``+t`` (B worse by more than the tolerance);
- ``improved``: the whole interval lies below ``-t``;
- ``same``: the whole interval lies inside ``[-t, +t]``;
- otherwise undecided: measure another pair, or ``inconclusive`` when the budget is spent.

Sequential design. The interval is looked at after ``min_pairs`` pairs and then every
``step`` pairs up to the budget. A Pocock-type alpha-spending function (Lan and DeMets),
``alpha * ln(1 + (e - 1) * t)`` at the fraction ``t = pairs / budget``, gives each look a
share of the total error rate ``alpha``; per side, half of it. Each look's interval is then
built at the level of the look's *group-sequential* critical value (``boundaries``): the one
at which the chance of crossing first at this look, given that the earlier looks did not,
equals the look's share. The looks' statistics are running sums of the same pairs, hence
correlated; counting that lets each later look use a much wider level than its share alone
(with the default plan the last look's interval is at 96.8 % instead of the 99.35 % a union
bound over the shares would need). The chance that any look states a wrong side (a
regression where the true change is within the tolerance, "same" where it is beyond it)
stays at most ``alpha / 2`` per side and metric. The boundaries assume a normal running
sum; the Wilcoxon statistic is one asymptotically, and the simulations of
``tests/unit/test_paired.py`` check the error rates at 20 pairs. A look whose level the
Wilcoxon interval cannot reach with so few pairs (it needs ``2 / 2**n <= level``), or
reaches only in part (its ranks are discrete), is stricter than its boundary, which only
removes crossings. A time budget that ends the experiment early only leaves error rate
unspent.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from statistics import NormalDist

from pytest_llmperf.gate import boundaries
from pytest_llmperf.models import Direction

SAME = "same"
REGRESSED = "regressed"
IMPROVED = "improved"
UNDECIDED = "undecided"
INCONCLUSIVE = "inconclusive"


def worse_log(a: float, b: float, direction: Direction) -> float:
    """``ln(B/A)`` signed so that positive means B is worse than A."""
    value = math.log(b / a)
    return -value if direction is Direction.HIGHER_IS_BETTER else value


@lru_cache(maxsize=256)
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the ``2**n`` sign patterns give each signed-rank sum 0..n(n+1)/2."""
    total = n * (n + 1) // 2
    counts = [1] + [0] * total
    for rank in range(1, n + 1):
        for value in range(total, rank - 1, -1):
            counts[value] += counts[value - rank]
    return tuple(counts)


def critical_rank(n: int, alpha: float) -> int | None:
    """The 1-based rank ``c`` of the Walsh averages that bounds a two-sided ``1 - alpha``
    interval: ``[w(c), w(M + 1 - c)]``. None when ``n`` pairs cannot reach that confidence
    (even the widest interval, from the smallest to the largest Walsh average, has a
    larger error than ``alpha``)."""
    if n < 1:
        return None
    counts = _signed_rank_counts(n)
    denominator = 2**n
    cumulative = 0
    best: int | None = None
    for t, count in enumerate(counts):
        cumulative += count
        # P(T+ <= t) <= alpha/2, compared in integers to be exact.
        if cumulative * 2 <= alpha * denominator * (1 + 1e-12):
            best = t
        else:
            break
    return None if best is None else best + 1


@dataclass(frozen=True)
class Interval:
    estimate: float  # Hodges-Lehmann: the median of the Walsh averages (worse-log scale)
    low: float
    high: float
    confidence: float

    def ratio(self, value: float, direction: Direction) -> float:
        """A worse-log value as the ratio B/A it stands for."""
        return math.exp(-value if direction is Direction.HIGHER_IS_BETTER else value)


def walsh_averages(values: Sequence[float]) -> list[float]:
    n = len(values)
    return sorted((values[i] + values[j]) / 2.0 for i in range(n) for j in range(i, n))


def _middle(ordered: Sequence[float]) -> float:
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2.0


def hodges_lehmann_estimate(values: Sequence[float]) -> float:
    """The median of the Walsh averages: nearly as efficient as the mean on normal data,
    and one stalled run moves it by one rank, not by its size."""
    if not values:
        raise ValueError("no paired values")
    return _middle(walsh_averages(values))


def hodges_lehmann(values: Sequence[float], alpha: float) -> Interval:
    """The HL estimate of the median and its Wilcoxon signed-rank ``1 - alpha`` interval
    (infinite bounds when the pairs are too few for that confidence)."""
    if not values:
        raise ValueError("no paired values")
    walsh = walsh_averages(values)
    count = len(walsh)
    estimate = _middle(walsh)
    rank = critical_rank(len(values), alpha)
    if rank is None:
        return Interval(estimate, -math.inf, math.inf, 1.0 - alpha)
    return Interval(estimate, walsh[rank - 1], walsh[count - rank], 1.0 - alpha)


def classify(interval: Interval, tolerance_pct: float) -> str:
    """Where the interval lies against the tolerance: same / regressed / improved /
    undecided (see the module's docstring)."""
    bound = math.log1p(tolerance_pct / 100.0)
    if interval.low > bound:
        return REGRESSED
    if interval.high < -bound:
        return IMPROVED
    if -bound <= interval.low and interval.high <= bound:
        return SAME
    return UNDECIDED


@dataclass(frozen=True)
class SequentialPlan:
    """When to look and at which confidence: see the module's docstring."""

    budget: int = 20  # the most pairs per experiment (--llmperf-ab-budget)
    alpha: float = 0.10  # two-sided, over all looks: at most alpha/2 wrong per side
    min_pairs: int = 6  # the first look (fewer cannot reach useful confidence)
    step: int = 2  # pairs between looks: one A,B,B,A block

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"budget must be at least one pair, got {self.budget}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must lie between 0 and 1, got {self.alpha}")

    def looks(self) -> tuple[int, ...]:
        """Pair counts at which the interval is looked at; the budget is always one."""
        first = min(self.min_pairs, self.budget)
        points = list(range(first, self.budget, max(self.step, 1)))
        return (*points, self.budget)

    def spent(self, pairs: int) -> float:
        """The error rate spent up to ``pairs`` pairs (Pocock-type spending)."""
        fraction = min(max(pairs / self.budget, 0.0), 1.0)
        return self.alpha * math.log1p((math.e - 1.0) * fraction)

    def share(self, pairs: int) -> float | None:
        """The error rate spent at the look at ``pairs`` pairs; None when it is no look."""
        looks = self.looks()
        if pairs not in looks:
            return None
        index = looks.index(pairs)
        before = self.spent(looks[index - 1]) if index else 0.0
        return self.spent(pairs) - before

    def level(self, pairs: int) -> float | None:
        """The two-sided error rate of the look's interval (its confidence is one minus
        it): twice the one-sided level of the look's group-sequential critical value for
        this plan's shares (module docstring). None when it is no look."""
        looks = self.looks()
        if pairs not in looks:
            return None
        return 2.0 * _one_sided_levels(self)[looks.index(pairs)]


@lru_cache(maxsize=64)
def _one_sided_levels(plan: SequentialPlan) -> tuple[float, ...]:
    looks = plan.looks()
    shares = [(plan.share(pairs) or 0.0) / 2.0 for pairs in looks]
    return boundaries.one_sided_levels(looks, shares)


@dataclass(frozen=True)
class MetricDecision:
    metric: str
    direction: Direction
    tolerance_pct: float
    status: str  # same / regressed / improved / undecided / inconclusive
    interval: Interval | None  # None: fewer pairs than a look needs
    pairs: int

    def median_ratio(self) -> float | None:
        if self.interval is None:
            return None
        return self.interval.ratio(self.interval.estimate, self.direction)

    def ratio_bounds(self) -> tuple[float, float] | None:
        """The interval as ratios B/A, low to high."""
        if self.interval is None:
            return None
        ends = sorted(
            self.interval.ratio(value, self.direction)
            for value in (self.interval.low, self.interval.high)
        )
        return ends[0], ends[1]


def decide_metric(
    metric: str,
    direction: Direction,
    tolerance_pct: float,
    values: Sequence[float],
    plan: SequentialPlan,
) -> MetricDecision:
    """The decision at this many pairs (``values``: worse-log per pair); undecided between
    looks. The look's interval is kept even when undecided, for the report."""
    pairs = len(values)
    level = plan.level(pairs)
    if level is None:
        return MetricDecision(metric, direction, tolerance_pct, UNDECIDED, None, pairs)
    interval = hodges_lehmann(values, level)
    status = classify(interval, tolerance_pct)
    if status == UNDECIDED and pairs >= plan.budget:
        status = INCONCLUSIVE
    return MetricDecision(metric, direction, tolerance_pct, status, interval, pairs)


# The Hodges-Lehmann estimate's efficiency against the mean on normal data: its interval is
# as wide as a t interval on this share of the pairs.
HL_EFFICIENCY = 3.0 / math.pi
PLANNING_POWER = 0.80  # the chance a suggested budget decides, if the pairs stay as they were


def budget_to_decide(
    values: Sequence[float], tolerance_pct: float, plan: SequentialPlan, largest: int = 500
) -> int | None:
    """A planning figure for an experiment that ended undecided: the smallest budget whose
    last look would decide it with ``PLANNING_POWER`` if later pairs kept the estimate and
    spread of ``values`` (normal approximation, the HL estimate's efficiency; earlier looks
    only add chances). None: fewer than three pairs, or an estimate so close to the tolerance
    that no budget up to ``largest`` pairs would do."""
    if len(values) < 3:
        return None
    spread = statistics.stdev(values)
    margin = abs(abs(hodges_lehmann_estimate(values)) - math.log1p(tolerance_pct / 100.0))
    if margin <= 0.0:
        return None
    power = NormalDist().inv_cdf(PLANNING_POWER)

    def decides(budget: int) -> bool:
        level = replace(plan, budget=budget).level(budget)
        assert level is not None  # the budget is always a look
        z = NormalDist().inv_cdf(1.0 - level / 2.0)
        return (z + power) * spread / math.sqrt(HL_EFFICIENCY * budget) < margin

    # The last look's critical value grows far slower than sqrt(budget), so whether a budget
    # decides is taken as monotone: double until one does, then halve the gap. (Each budget
    # computes its plan's boundaries: a few milliseconds at 40 pairs, two seconds at 500.)
    too_few = max(plan.budget, len(values))  # not enough: the experiment already ran it
    enough = too_few
    while True:
        enough = min(2 * enough, largest)
        if enough <= too_few:
            return None
        if decides(enough):
            break
        if enough == largest:
            return None
        too_few = enough
    while enough - too_few > 1:
        middle = (too_few + enough) // 2
        if decides(middle):
            enough = middle
        else:
            too_few = middle
    return enough


def overall(statuses: Sequence[str]) -> str | None:
    """The experiment's verdict from its metrics', or None to measure on: any regression
    ends it at once (the test fails whatever the rest says); otherwise it ends when every
    metric is decided, improved where one improved, else same."""
    if REGRESSED in statuses:
        return REGRESSED
    if UNDECIDED in statuses:
        return None
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    if IMPROVED in statuses:
        return IMPROVED
    return SAME


def simulate(
    true_worse_log: float,
    noise_sd: float,
    tolerance_pct: float,
    plan: SequentialPlan,
    experiments: int,
    seed: int,
) -> dict[str, float]:
    """Run the sequential rule on simulated pairs (normal worse-log values): the share of
    each verdict and the mean pairs used. For tests and calibration, never for gating."""
    import numpy as np

    generator = np.random.default_rng(seed)
    tally = {SAME: 0, REGRESSED: 0, IMPROVED: 0, INCONCLUSIVE: 0}
    pairs_used = 0
    for _ in range(experiments):
        draws = generator.normal(true_worse_log, noise_sd, plan.budget).tolist()
        for pairs in range(1, plan.budget + 1):
            decision = decide_metric(
                "m", Direction.LOWER_IS_BETTER, tolerance_pct, draws[:pairs], plan
            )
            if decision.status != UNDECIDED:
                tally[decision.status] += 1
                pairs_used += pairs
                break
    result: dict[str, float] = {key: count / experiments for key, count in tally.items()}
    result["mean_pairs"] = pairs_used / experiments
    return result
