"""Arrival schedule (metrics-spec §1.1): gamma gaps, running sum, last offset = n / rate."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.arrivals import arrival_offsets


def gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise([0.0, *offsets])]


def test_infinite_rate_sends_everything_at_once() -> None:
    assert arrival_offsets(5, math.inf) == [0.0] * 5


def test_no_requests() -> None:
    assert arrival_offsets(0, 10.0) == []


@pytest.mark.parametrize(("n", "rate"), [(1, 2.0), (10, 4.0), (1000, 50.0)])
def test_last_offset_is_normalised_to_n_over_rate(n: int, rate: float) -> None:
    offsets = arrival_offsets(n, rate, seed=3)
    assert offsets[-1] == pytest.approx(n / rate, rel=1e-12)
    assert offsets[0] > 0  # the first request waits its own gap, as in vLLM
    assert all(b >= a for a, b in itertools.pairwise(offsets))


def test_mean_gap_is_one_over_rate() -> None:
    offsets = arrival_offsets(20_000, 8.0, seed=1)
    assert statistics.fmean(gaps(offsets)) == pytest.approx(1 / 8.0, rel=1e-9)


def test_burstiness_one_gives_exponential_gaps() -> None:
    g = gaps(arrival_offsets(20_000, 8.0, burstiness=1.0, seed=2))
    # Exponential: median = ln 2 * mean, coefficient of variation 1.
    assert statistics.median(g) == pytest.approx(math.log(2) / 8.0, rel=0.05)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_burstiness_sets_the_spread_of_gaps(burstiness: float) -> None:
    # Gamma(shape=b): coefficient of variation 1/sqrt(b); below 1 burstier, above more even.
    g = gaps(arrival_offsets(20_000, 8.0, burstiness=burstiness, seed=4))
    cv = statistics.pstdev(g) / statistics.fmean(g)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_infinite_burstiness_spaces_requests_evenly() -> None:
    offsets = arrival_offsets(4, 2.0, burstiness=math.inf)
    assert offsets == pytest.approx([0.5, 1.0, 1.5, 2.0])


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    assert arrival_offsets(100, 5.0, seed=7) == arrival_offsets(100, 5.0, seed=7)
    assert arrival_offsets(100, 5.0, seed=7) != arrival_offsets(100, 5.0, seed=8)


@pytest.mark.parametrize(("rate", "burstiness"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0)])
def test_non_positive_rate_or_burstiness_is_refused(rate: float, burstiness: float) -> None:
    with pytest.raises(ConfigError):
        arrival_offsets(3, rate, burstiness)
