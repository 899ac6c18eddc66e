"""Group-sequential levels: checked against a published constant and against simulated
random walks (fixed seed), not against the recursion's own arithmetic."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from pytest_llmperf.gate import paired
from pytest_llmperf.gate.boundaries import one_sided_levels

WALKS = 200_000
NORMAL = NormalDist()


def _first_crossings(information: list[int], critical: list[float], seed: int) -> list[float]:
    """The share of simulated standard random walks that first lie above ``critical[k]``
    standard deviations at look ``k``."""
    steps = np.diff(np.concatenate(([0], information)))
    rng = np.random.default_rng(seed)
    increments = rng.standard_normal((WALKS, len(information))) * np.sqrt(steps)
    z = np.cumsum(increments, axis=1) / np.sqrt(information)
    crossed = z >= np.asarray(critical)
    first = np.argmax(crossed, axis=1)
    any_crossing = crossed.any(axis=1)
    return [float(np.mean(any_crossing & (first == k))) for k in range(len(information))]


def test_a_single_look_gets_exactly_its_share() -> None:
    assert one_sided_levels([10], [0.025]) == (0.025,)


def test_pocock_constant_boundary_is_recovered() -> None:
    # Pocock's constant for five equally spaced looks at one-sided 2.5 % is 2.413 (Pocock
    # 1977; Jennison and Turnbull, table 2.1). The chances of first crossing it at each look,
    # simulated, must give back that constant at every look.
    looks = [1, 2, 3, 4, 5]
    shares = _first_crossings(looks, [2.413] * 5, seed=7)
    assert sum(shares) == pytest.approx(0.025, abs=0.0015)
    constants = [-NORMAL.inv_cdf(level) for level in one_sided_levels(looks, shares)]
    assert constants == pytest.approx([2.413] * 5, abs=0.03)


def test_the_default_plans_boundaries_are_crossed_as_often_as_their_shares() -> None:
    plan = paired.SequentialPlan()
    looks = list(plan.looks())
    shares = [(plan.share(n) or 0.0) / 2.0 for n in looks]
    levels = one_sided_levels(looks, shares)
    crossings = _first_crossings(looks, [-NORMAL.inv_cdf(level) for level in levels], seed=11)
    for simulated, share in zip(crossings, shares, strict=True):
        standard_error = math.sqrt(share * (1.0 - share) / WALKS)
        assert abs(simulated - share) < 4.0 * standard_error + 1e-4
    assert sum(crossings) == pytest.approx(plan.alpha / 2.0, abs=0.002)


def test_later_looks_get_more_than_their_share_and_the_plan_uses_them() -> None:
    # Counting the looks' correlation is the point: a union bound would give each look its
    # share; after the first look the group-sequential level is more than twice as large.
    plan = paired.SequentialPlan()
    looks = plan.looks()
    assert plan.level(looks[0]) == pytest.approx(plan.share(looks[0]))
    for pairs in looks[1:]:
        share = plan.share(pairs)
        level = plan.level(pairs)
        assert share is not None
        assert level is not None
        assert level > 2.0 * share
    assert plan.level(7) is None  # between looks


def test_a_look_with_no_share_may_not_decide_and_the_next_still_can() -> None:
    levels = one_sided_levels([2, 4, 6], [0.01, 0.0, 0.01])
    assert levels[1] == 0.0
    assert levels[2] > 0.01  # the paths the first look took away are counted


@pytest.mark.parametrize(
    ("information", "shares", "message"),
    [
        ([4, 2], [0.01, 0.01], "information must increase"),
        ([0, 2], [0.01, 0.01], "information must increase"),
        ([2, 4], [0.01, 0.6], "each share"),
        ([2, 4], [0.01], "one share per look"),
    ],
)
def test_bad_plans_are_refused(information: list[int], shares: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        one_sided_levels(information, shares)
