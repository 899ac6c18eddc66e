"""Capacity at SLO, knee, saturation and Pareto points from synthetic sweeps (gate.capacity)."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.gate.capacity import (
    Slo,
    StepResult,
    broken_slos,
    capacity_at_slo,
    knee,
    pareto_points,
    parse_slos,
    saturation_throughput,
)


def step(load: float, ttft: float, throughput: float = 0.0, tpot: float = 10.0) -> StepResult:
    return StepResult(
        load,
        {"p99_ttft_ms": ttft, "output_throughput": throughput, "mean_tpot_ms": tpot},
    )


TTFT_500 = (Slo("p99_ttft_ms", 500.0),)


def test_capacity_is_interpolated_between_the_bracketing_steps() -> None:
    # TTFT 100 ms at 4 req/s, 900 ms at 8: the 500 ms limit is crossed half-way, at 6.
    steps = [step(2, 80), step(4, 100), step(8, 900), step(16, 5000)]
    capacity = capacity_at_slo(steps, TTFT_500)
    assert capacity.value == pytest.approx(6.0)
    assert (capacity.lower, capacity.upper, capacity.broken_at) == (4, 8, 8)
    assert capacity.resolution == pytest.approx(1.0)
    assert capacity.broken == ("p99_ttft_ms <= 500",)


def test_the_lowest_broken_step_bounds_capacity_even_if_a_higher_one_passes() -> None:
    # Noise: 12 passes again, but 8 broke; the conservative answer stays below 8.
    capacity = capacity_at_slo([step(4, 100), step(8, 900), step(12, 400)], TTFT_500)
    assert capacity.upper == 8
    assert capacity.value is not None
    assert capacity.value < 8


def test_the_tightest_broken_slo_sets_capacity() -> None:
    slos = (Slo("p99_ttft_ms", 500.0), Slo("mean_tpot_ms", 30.0))
    low = StepResult(4, {"p99_ttft_ms": 100.0, "mean_tpot_ms": 10.0})
    high = StepResult(8, {"p99_ttft_ms": 900.0, "mean_tpot_ms": 50.0})  # TPOT crosses at 6
    assert capacity_at_slo([low, high], slos).value == pytest.approx(6.0)
    high_tpot_only = StepResult(8, {"p99_ttft_ms": 300.0, "mean_tpot_ms": 20.0 + 10.0 * 1.0})
    assert capacity_at_slo([low, high_tpot_only], slos).upper is None  # 30 <= 30 meets


def test_no_broken_step_gives_a_lower_bound_and_a_broken_first_step_an_upper_one() -> None:
    unbroken = capacity_at_slo([step(1, 10), step(2, 20)], TTFT_500)
    assert (unbroken.value, unbroken.lower, unbroken.upper) == (2, 2, None)
    assert not unbroken.bounded
    assert unbroken.resolution is None
    all_broken = capacity_at_slo([step(1, 600), step(2, 700)], TTFT_500)
    assert (all_broken.value, all_broken.upper) == (None, 1)


def test_goodput_ratio_slo_uses_vllms_goodput() -> None:
    slo = Slo("min_goodput_ratio", 0.9)
    ok = StepResult(1, {"request_goodput": 9.5, "request_throughput": 10.0})
    bad = StepResult(2, {"request_goodput": 8.0, "request_throughput": 10.0})
    missing = StepResult(3, {"request_throughput": 10.0})
    assert not broken_slos(ok, [slo])
    assert broken_slos(bad, [slo]) == (slo,)
    assert broken_slos(missing, [slo]) == (slo,)  # goodput not computed: cannot be met


def test_knee_and_saturation_throughput() -> None:
    steps = [step(1, 0, 100), step(2, 0, 200), step(4, 0, 390), step(8, 0, 450), step(16, 0, 460)]
    assert knee(steps) == 4  # 4 -> 8 doubled the load for +15 % throughput
    assert saturation_throughput(steps) == 460
    assert knee(steps[:3]) is None  # still linear: no knee yet


def test_pareto_points_keep_only_undominated_steps() -> None:
    steps = [
        step(1, 0, throughput=100, tpot=10),  # 100 tok/s per user
        step(2, 0, throughput=180, tpot=12.5),  # 80
        step(3, 0, throughput=150, tpot=20),  # 50: beaten by load 2 on both
        step(4, 0, throughput=300, tpot=40),  # 25
    ]
    front = pareto_points(steps)
    assert [(load, throughput) for load, throughput, _ in front] == [(1, 100), (2, 180), (4, 300)]
    assert [per_user for _, _, per_user in front] == pytest.approx([100, 80, 25])


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"ttft": 100}, "neither a latency metric in ms"),
        ({"p99_ttft_ms": -1}, "must be a positive number"),
        ({"p99_ttft_ms": True}, "must be a positive number"),
        ({"min_goodput_ratio": 1.5}, r"share in \(0, 1\]"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_bad_slos_are_refused_naming_the_source(raw: object, message: str) -> None:
    with pytest.raises(ConfigError, match=f"profiles.yaml: profile 'x'.*{message}"):
        parse_slos(raw, "profiles.yaml: profile 'x'")


def test_slos_parse() -> None:
    slos = parse_slos({"p99_ttft_ms": 2000, "min_goodput_ratio": 0.9}, "here")
    assert slos == (Slo("p99_ttft_ms", 2000.0), Slo("min_goodput_ratio", 0.9))


def test_a_concurrency_capacity_is_the_highest_whole_step_within() -> None:
    capacity = capacity_at_slo([step(4, 100), step(5, 900)], TTFT_500, integral=True)
    assert (capacity.value, capacity.lower, capacity.upper) == (4, 4, 5)
