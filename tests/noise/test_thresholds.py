"""The comparison's limits: tolerance, measured spread, scale, and the millisecond floor.

Pure functions of ``baseline``: an entry as a reviewer would have it in a file, numbers as a
run would measure them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.baseline import BaselineEntry, GateSettings, compare, judge
from pytest_llmperf.models import Outcome

WORKLOAD = {"dataset": "random", "num_prompts": 32}


def entry(
    metrics: dict[str, float],
    tolerances: dict[str, float],
    spread: dict[str, float] | None = None,
    runs: int = 1,
) -> BaselineEntry:
    return BaselineEntry(
        profile="medium",
        status="ok",
        metrics=metrics,
        tolerances=tolerances,
        workload=dict(WORKLOAD),
        engine_version=None,
        command=None,
        error=None,
        spread=spread or {},
        runs=runs,
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
    # Recorded runs spread 6 %: three spreads (18 %) is the limit, not the 10 % tolerance.
    base = entry({"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 6.0}, runs=10)
    (row,) = compare(base, {"mean_tpot_ms": 11.5})
    assert (row.status, row.decided_by) == ("pass", "spread")
    assert row.threshold_pct == pytest.approx(18.0)
    (row,) = compare(base, {"mean_tpot_ms": 12.0})
    assert row.status == "regressed"


def test_measured_spread_widens_the_limit_too() -> None:
    base = entry({"mean_tpot_ms": 10.0}, {"mean_tpot_ms": 10.0})
    (row,) = compare(base, {"mean_tpot_ms": 11.5}, measured_spread={"mean_tpot_ms": 5.0})
    assert (row.status, row.decided_by) == ("pass", "spread")


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
