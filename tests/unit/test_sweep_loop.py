"""The sweep loop (gate.sweep) over synthetic measurements: what it measures, what it sums up,
what a baseline records and what a failure says."""

from __future__ import annotations

import pytest

from pytest_llmperf.gate.sweep import describe, regression_notes, run_sweep
from pytest_llmperf.measure.slo import Slo
from pytest_llmperf.measure.sweep import SweepSpec

TTFT = (Slo("p99_ttft_ms", 500.0),)


def server(capacity: float, tokens_per_request: float = 10.0):  # type: ignore[no-untyped-def]
    """A synthetic server: TTFT flat below ``capacity`` req/s, then growing steeply; the
    throughput follows the load up to the capacity, then stays there."""

    def measure(load: float) -> dict[str, float]:
        served = min(load, capacity)
        ttft = 100.0 if load <= capacity else 100.0 + (load - capacity) * 400.0
        return {
            "completed": 20,
            "failed": 0,
            "p99_ttft_ms": ttft,
            "mean_tpot_ms": 10.0,
            "output_throughput": served * tokens_per_request,
        }

    return measure


def test_a_rate_sweep_finds_the_capacity_and_records_its_curve() -> None:
    spec = SweepSpec("request_rate", start=1.0, max_steps=12, resolution=0.02)
    result = run_sweep(spec, TTFT, server(6.0))
    # The SLO breaks 1 req/s past the capacity: 7; bisection gets within 2 %.
    assert result.capacity.value == pytest.approx(7.0, rel=0.03)
    metrics = result.metrics()
    assert metrics["completed"] == 20 * len(result.steps)
    assert metrics["saturation_output_throughput"] == 60.0
    assert metrics["steps"] == len(result.steps)
    record = result.record()
    assert [row["load"] for row in record["curve"]] == sorted(s.load for s in result.steps)
    assert record["capacity"]["broken"] == ["p99_ttft_ms <= 500"]
    assert "between the steps" in describe(result)


def test_saturation_ends_the_growth_even_without_a_broken_slo() -> None:
    spec = SweepSpec("request_rate", start=1.0, max_steps=12, resolution=0.05)
    result = run_sweep(spec, (Slo("p99_ttft_ms", 1e9),), server(6.0))
    loads = sorted(step.load for step in result.steps)
    assert max(loads) <= 16.0  # stopped growing once 8 -> 16 added no throughput
    assert result.capacity.upper is None  # no SLO broke: a lower bound, said so
    assert "at least" in describe(result)
    assert result.knee is not None
    assert 4.0 <= result.knee <= 8.0


def test_a_sweep_broken_everywhere_has_capacity_zero_so_the_gate_fails() -> None:
    spec = SweepSpec("max_concurrency", start=1, max_steps=4)
    result = run_sweep(spec, (Slo("p99_ttft_ms", 50.0),), server(6.0))
    assert result.capacity.value is None
    assert result.metrics()["capacity_at_slo"] == 0.0
    assert "below the lowest load tried" in describe(result)


def test_a_failure_names_the_step_now_and_in_the_baseline() -> None:
    spec = SweepSpec("request_rate", loads=(2.0, 4.0, 8.0))
    now = run_sweep(spec, TTFT, server(2.0)).record()
    then = run_sweep(spec, TTFT, server(6.0)).record()
    (note,) = regression_notes(then, now)
    assert note == (
        "SLO broke at req/s 4 (p99_ttft_ms <= 500); in the baseline broke at req/s 8 "
        "(p99_ttft_ms <= 500)"
    )
    assert regression_notes(None, now) == (
        "SLO broke at req/s 4 (p99_ttft_ms <= 500); the baseline has no curve to compare with",
    )


def test_a_sweep_that_broke_nothing_says_so() -> None:
    spec = SweepSpec("request_rate", loads=(1.0, 2.0))
    now = run_sweep(spec, TTFT, server(6.0)).record()
    assert regression_notes(now, now) == (
        "SLO not broken at any step; in the baseline not broken at any step",
    )
