"""A sweep that broke no SLO knows only a lower bound of its capacity (the highest load it
reached): the gate must not call a lower bound's fall a regression, nor a rise over a recorded
bound an improvement, while a measured capacity still regresses against either."""

from __future__ import annotations

from pytest_llmperf.gate.store import BaselineEntry
from pytest_llmperf.gate.verdict import compare
from pytest_llmperf.reports.tables import comparison_table
from tests.support.baseline_entries import recorded_entry


def baseline(capacity: float, upper: float | None) -> BaselineEntry:
    metrics = {"capacity_at_slo": capacity, "saturation_output_throughput": 4500.0}
    if upper is not None:
        metrics["capacity_upper"] = upper
    tolerances = {"capacity_at_slo": 40.0, "saturation_output_throughput": 40.0}
    return recorded_entry("embedded-sweep", metrics, tolerances)


def capacity_row(entry: BaselineEntry, measured: dict[str, float]) -> tuple[str, str]:
    row = next(r for r in compare(entry, measured) if r.metric == "capacity_at_slo")
    return row.status, row.decided_by


def test_a_lower_bound_that_fell_is_not_a_regression() -> None:
    # Both sweeps stopped where throughput saturated, neither breaking an SLO (CI, 2026-12-07).
    measured = {"capacity_at_slo": 128.0, "saturation_output_throughput": 4195.0}
    assert capacity_row(baseline(256.0, None), measured) == ("pass", "bound")
    assert capacity_row(baseline(240.0, 256.0), measured) == ("pass", "bound")


def test_a_measured_capacity_below_the_baseline_regresses_against_a_bound_too() -> None:
    broke = {"capacity_at_slo": 20.0, "capacity_upper": 32.0, "saturation_output_throughput": 900.0}
    assert capacity_row(baseline(256.0, None), broke) == ("regressed", "tolerance")
    assert capacity_row(baseline(200.0, 256.0), broke) == ("regressed", "tolerance")


def test_an_improvement_needs_a_measured_baseline() -> None:
    measured = {
        "capacity_at_slo": 256.0,
        "capacity_upper": 300.0,
        "saturation_output_throughput": 4500.0,
    }
    assert capacity_row(baseline(128.0, None), measured) == ("pass", "bound")
    assert capacity_row(baseline(100.0, 128.0), measured) == ("improved", "tolerance")


def test_the_table_says_why_a_fall_passed() -> None:
    measured = {"capacity_at_slo": 128.0, "saturation_output_throughput": 4195.0}
    table = comparison_table(compare(baseline(256.0, None), measured))
    line = next(line for line in table.splitlines() if line.startswith("capacity_at_slo"))
    assert "-50.0%" in line
    assert "a lower bound: no step broke an SLO" in line
    assert "PASS" in line
