"""The paired statistics and the sequential rule: known inputs give known intervals, and the
error rates hold under repeated looks (simulated with a fixed seed)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from pytest_llmperf.gate import paired
from pytest_llmperf.models import Direction

EXPERIMENTS = 2000
MARGIN = 0.015  # binomial noise of 2000 draws at a rate near 5 %: about 3 standard errors


def test_critical_ranks_match_the_published_signed_rank_table() -> None:
    # Two-sided 0.05 critical values T of the Wilcoxon signed-rank table: n=6 -> 0,
    # n=10 -> 8, n=20 -> 52; the interval's rank is T + 1. Five pairs cannot reach 95 %.
    assert paired.critical_rank(6, 0.05) == 1
    assert paired.critical_rank(10, 0.05) == 9
    assert paired.critical_rank(20, 0.05) == 53
    assert paired.critical_rank(5, 0.05) is None


def test_hodges_lehmann_interval_of_one_to_ten() -> None:
    # Walsh averages of 1..10: the 9th smallest is 3.0 and the 9th largest 8.0 (counted by
    # hand from the pair sums), the median of all 55 is 5.5.
    interval = paired.hodges_lehmann([float(x) for x in range(1, 11)], 0.05)
    assert (interval.estimate, interval.low, interval.high) == (5.5, 3.0, 8.0)


def test_too_few_pairs_give_an_unbounded_interval() -> None:
    interval = paired.hodges_lehmann([0.1, 0.2, 0.3], 0.05)
    assert interval.low == -math.inf
    assert interval.high == math.inf
    assert paired.classify(interval, 5.0) == paired.UNDECIDED


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.06, 0.2, paired.REGRESSED),
        (-0.2, -0.06, paired.IMPROVED),
        (-0.03, 0.04, paired.SAME),
        (0.02, 0.08, paired.UNDECIDED),
    ],
)
def test_classify_against_a_five_percent_tolerance(low: float, high: float, expected: str) -> None:
    assert paired.classify(paired.Interval(0.0, low, high, 0.95), 5.0) == expected


def test_worse_log_is_direction_aware() -> None:
    # Throughput falling by 10 % and latency rising by 10 % are both "worse".
    assert paired.worse_log(100.0, 90.0, Direction.HIGHER_IS_BETTER) > 0
    assert paired.worse_log(10.0, 11.0, Direction.LOWER_IS_BETTER) > 0
    assert paired.worse_log(10.0, 9.0, Direction.LOWER_IS_BETTER) < 0


def test_spending_adds_up_to_alpha() -> None:
    plan = paired.SequentialPlan(budget=20, alpha=0.1)
    shares = [plan.share(n) for n in plan.looks()]
    assert plan.looks()[0] == 6
    assert plan.looks()[-1] == 20
    assert all(share is not None and share > 0 for share in shares)
    assert sum(s for s in shares if s is not None) == pytest.approx(0.1)
    assert plan.share(7) is None  # between looks


def test_overall_verdict() -> None:
    assert paired.overall([paired.REGRESSED, paired.UNDECIDED]) == paired.REGRESSED
    assert paired.overall([paired.SAME, paired.UNDECIDED]) is None
    assert paired.overall([paired.SAME, paired.INCONCLUSIVE]) == paired.INCONCLUSIVE
    assert paired.overall([paired.SAME, paired.IMPROVED]) == paired.IMPROVED
    assert paired.overall([paired.SAME, paired.SAME]) == paired.SAME


def test_false_alarms_hold_despite_repeated_looks() -> None:
    # Zero tolerance: "regressed" is a plain sequential test of "B is no worse than A", the
    # case where looking again and again inflates the error most. A = B, 5 % noise per pair.
    plan = paired.SequentialPlan()
    result = paired.simulate(0.0, 0.05, 0.0, plan, EXPERIMENTS, seed=17)
    assert result[paired.REGRESSED] <= plan.alpha / 2 + MARGIN
    assert result[paired.IMPROVED] <= plan.alpha / 2 + MARGIN


def test_naive_repeated_looks_would_break_the_error_rate() -> None:
    # The same simulation, each look at the full alpha: the check above can fail.
    class Naive(paired.SequentialPlan):
        def share(self, pairs: int) -> float | None:
            return self.alpha if pairs in self.looks() else None

    result = paired.simulate(0.0, 0.05, 0.0, Naive(), EXPERIMENTS, seed=17)
    assert result[paired.REGRESSED] > Naive().alpha / 2 + MARGIN


def test_equal_configurations_never_regress_at_a_five_percent_tolerance() -> None:
    plan = paired.SequentialPlan()
    result = paired.simulate(0.0, 0.05, 5.0, plan, EXPERIMENTS, seed=3)
    assert result[paired.REGRESSED] <= plan.alpha / 2 + MARGIN
    assert result[paired.SAME] > 0.5  # and most end early as "same"


def test_a_change_at_the_tolerance_is_rarely_called_same() -> None:
    plan = paired.SequentialPlan()
    result = paired.simulate(math.log(1.05), 0.05, 5.0, plan, EXPERIMENTS, seed=5)
    assert result[paired.SAME] <= plan.alpha / 2 + MARGIN


def test_a_twenty_percent_slowdown_is_caught_early() -> None:
    plan = paired.SequentialPlan()
    result = paired.simulate(math.log(1.2), 0.05, 5.0, plan, 500, seed=9)
    assert result[paired.REGRESSED] >= 0.99
    assert result["mean_pairs"] < 8


# Planning a budget for an experiment that ended undecided.


def _pairs(change: float, sd: float, count: int, seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).normal(change, sd, count)]


def test_the_suggested_budget_decides_about_as_often_as_it_promises() -> None:
    # 20 pairs of a 15 % slowdown at a 12 % spread (they show 11.5 %, 0.115): undecided at the
    # default budget; 36 pairs suggested.
    plan = paired.SequentialPlan(budget=20)
    values = _pairs(math.log(1.15), 0.12, 20, seed=5)
    budget = paired.budget_to_decide(values, 5.0, plan)
    assert budget is not None
    assert budget > plan.budget
    # If later pairs are like these, that budget decides "regressed" at least as often as
    # promised (the earlier looks add chances), and the default budget far less often.
    estimate = paired.hodges_lehmann_estimate(values)
    spread = statistics.stdev(values)
    longer = paired.simulate(estimate, spread, 5.0, paired.SequentialPlan(budget=budget), 300, 4)
    default = paired.simulate(estimate, spread, 5.0, plan, 300, 4)
    assert longer[paired.REGRESSED] >= paired.PLANNING_POWER - 0.05
    assert default[paired.REGRESSED] < longer[paired.REGRESSED] - 0.2


def test_a_wider_spread_needs_a_larger_budget() -> None:
    plan = paired.SequentialPlan(budget=20)
    base = _pairs(0.0, 1.0, 20, seed=5)
    narrow = [0.10 + 0.05 * v for v in base]
    wide = [0.10 + 0.10 * v for v in base]
    small = paired.budget_to_decide(narrow, 5.0, plan)
    large = paired.budget_to_decide(wide, 5.0, plan)
    assert small is not None
    assert large is not None
    assert small < large


def test_no_budget_for_a_change_at_the_tolerance_or_too_few_pairs() -> None:
    plan = paired.SequentialPlan(budget=20)
    at_tolerance = [math.log1p(0.05) + d for d in (-0.1, 0.1, -0.05, 0.05, 0.0)]
    assert paired.budget_to_decide(at_tolerance, 5.0, plan) is None
    assert paired.budget_to_decide([0.1, 0.2], 5.0, plan) is None
