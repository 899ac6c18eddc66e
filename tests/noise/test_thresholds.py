"""The comparison's limits: tolerance, measured spread, scale, and the millisecond floor.

Pure functions of ``baseline``: an entry as a reviewer would have it in a file, numbers as a
run would measure them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_llmperf.gate.store import BaselineEntry
from pytest_llmperf.gate.verdict import GateSettings, compare, judge, noise_limit
from pytest_llmperf.models import Direction, Outcome
from tests.support.baseline_entries import recorded_entry

WORKLOAD = {"dataset": "random", "num_prompts": 32}


def log_limit(cv: float, n: int, m: int, k: float = 2.0, higher: bool = False) -> float:
    """k standard errors of the log-ratio of two centers, back in percent."""
    error = k * math.sqrt(math.log1p((cv / 100) ** 2)) * math.sqrt(1 / n + 1 / m)
    return (1 - math.exp(-error)) * 100 if higher else (math.exp(error) - 1) * 100


def entry(
    metrics: dict[str, float],
    tolerances: dict[str, float],
    spread: dict[str, float] | None = None,
    runs: int = 1,
) -> BaselineEntry:
    return recorded_entry(
        "medium", metrics, tolerances, workload=WORKLOAD, spread=spread, runs=runs
    )


def verdict(base: BaselineEntry, measured: dict[str, float], **kwargs):  # type: ignore[no-untyped-def]
    return judge(
        base, measured, WORKLOAD, engine_version=None, baseline_file=Path("b.yaml"), **kwargs
    )


def test_tolerance_decides_when_the_spread_is_small() -> None:
    base = entry(
        {"total_token_throughput": 1000.0},
        {"total_token_throughput": 10.0},
        {"total_token_throughput": 1.0},
    )
    (row,) = compare(base, {"total_token_throughput": 880.0})
    assert (row.status, row.decided_by, row.threshold_pct) == ("regressed", "tolerance", 10.0)
    (row,) = compare(base, {"total_token_throughput": 920.0})
    assert row.status == "pass"


def test_recorded_spread_widens_the_limit_and_says_so() -> None:
    # Ten recorded runs spread 8 %: one run differs from their median by noise up to about
    # 2 x 8 % x sqrt(1 + 1/10) (18 % on the log scale), more than the 10 % tolerance.
    base = entry({"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 8.0}, runs=10)
    (row,) = compare(base, {"mean_tpot_ms": 11.7})
    assert (row.status, row.decided_by) == ("pass", "spread")
    assert row.threshold_pct == pytest.approx(log_limit(8.0, 1, 10))
    (row,) = compare(base, {"mean_tpot_ms": 11.9})
    assert row.status == "regressed"


def test_repeats_narrow_the_noise_limit() -> None:
    # The median of three runs is a steadier center than one run: the same recorded spread
    # allows less change, so a smaller regression is caught.
    base = entry({"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 5.0}, {"mean_tpot_ms": 8.0}, runs=10)
    (one,) = compare(base, {"mean_tpot_ms": 11.3})
    (three,) = compare(
        base, {"mean_tpot_ms": 11.3}, measured_spread={"mean_tpot_ms": 8.0}, measured_runs=3
    )
    assert (one.status, three.status) == ("pass", "regressed")
    assert three.threshold_pct == pytest.approx(log_limit(8.0, 3, 10))


def test_measured_spread_widens_the_limit_too() -> None:
    # No recorded spread: this measurement's own runs say how noisy the machine is now.
    base = entry({"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 10.0})
    (row,) = compare(
        base, {"mean_tpot_ms": 11.5}, measured_spread={"mean_tpot_ms": 8.0}, measured_runs=3
    )
    assert (row.status, row.decided_by) == ("pass", "spread")


def test_noise_limit_pools_both_spreads_by_degrees_of_freedom() -> None:
    # 9 recorded degrees at 4 %, 2 measured degrees at 10 %, on the log scale.
    pooled = math.sqrt((9 * math.log1p(0.04**2) + 2 * math.log1p(0.10**2)) / 11)
    expected = (math.exp(2.5 * pooled * math.sqrt(1 / 3 + 1 / 10)) - 1) * 100
    assert noise_limit(4.0, 10, 10.0, 3, 2.5) == pytest.approx(expected)
    # One run on each side and no spread: nothing is known about noise.
    assert noise_limit(None, 1, None, 1, 2.5) == 0.0
    # A spread typed by hand without runs counts as one degree of one run.
    assert noise_limit(5.0, 1, None, 1, 2.0) == pytest.approx(log_limit(5.0, 1, 1))


def test_noise_is_multiplicative_so_a_throughput_stays_gated() -> None:
    # A bimodal profile recorded a 48 % spread: a linear limit (2 x 48 % x 1.05 = 100 %)
    # could never see a throughput drop; on the log scale it is 61 %, and a latency's 158 %.
    drop = noise_limit(47.6, 10, None, 1, 2.0, Direction.HIGHER_IS_BETTER)
    rise = noise_limit(47.6, 10, None, 1, 2.0, Direction.LOWER_IS_BETTER)
    assert 55 < drop < 65
    assert rise > 150
    # For a small spread both directions agree with the linear rule.
    small = [noise_limit(2.0, 10, None, 1, 2.0, d) for d in Direction]
    assert small == pytest.approx([2 * 2.0 * math.sqrt(1.1)] * 2, rel=0.05)
    base = entry(
        {"total_token_throughput": 1000.0},
        {"total_token_throughput": 5.0},
        {"total_token_throughput": 47.6},
        runs=10,
    )
    (row,) = compare(base, {"total_token_throughput": 300.0})
    assert (row.status, row.decided_by) == ("regressed", "spread")


def test_tolerance_scale_applies_before_the_spread() -> None:
    base = entry({"total_token_throughput": 1000.0}, {"total_token_throughput": 10.0})
    nightly = GateSettings(tolerance_scale=2.0)
    (row,) = compare(base, {"total_token_throughput": 850.0}, gate=nightly)
    assert (row.status, row.threshold_pct) == ("pass", 20.0)


def test_direction_of_each_metric() -> None:
    base = entry(
        {"total_token_throughput": 1000.0, "mean_tpot_ms": 10.0},
        {"total_token_throughput": 5.0, "mean_tpot_ms": 5.0},
    )
    rows = {
        r.metric: r.status
        for r in compare(base, {"total_token_throughput": 1100.0, "mean_tpot_ms": 11.0})
    }
    assert rows == {"total_token_throughput": "improved", "mean_tpot_ms": "regressed"}


def test_near_zero_latency_moves_below_the_floor_are_not_changes() -> None:
    # A starved API server sends a whole answer in one chunk: TPOT ~0.0004 ms. Ten times
    # that is +900 %, yet nothing a client can resolve.
    base = entry({"mean_tpot_ms": 0.0004}, {"mean_tpot_ms": 10.0})
    (row,) = compare(base, {"mean_tpot_ms": 0.004})
    assert (row.status, row.decided_by) == ("pass", "floor")
    assert verdict(base, {"mean_tpot_ms": 0.004}).outcome is Outcome.PASS
    # Above the floor the relative limit applies again.
    (row,) = compare(base, {"mean_tpot_ms": 3.0})
    assert row.status == "regressed"


def test_the_floor_applies_to_latencies_only() -> None:
    base = entry({"request_throughput": 0.01}, {"request_throughput": 10.0})
    (row,) = compare(base, {"request_throughput": 0.005})
    assert row.status == "regressed"


def test_floor_is_a_setting() -> None:
    base = entry({"mean_ttft_ms": 100.0}, {"mean_ttft_ms": 1.0})
    (row,) = compare(base, {"mean_ttft_ms": 104.0}, gate=GateSettings(floor_ms=5.0))
    assert (row.status, row.decided_by) == ("pass", "floor")
    (row,) = compare(base, {"mean_ttft_ms": 104.0})
    assert row.status == "regressed"
