"""The tolerances a first run on a machine records (docs/baselines.md, "Noise on a new machine")."""

from __future__ import annotations

from pytest_llmperf.gate.loop import FIRST_RUN_TOLERANCE_FLOOR, first_run_tolerances
from pytest_llmperf.gate.store import DEFAULT_TOLERANCES


def test_narrow_limits_are_raised_to_the_floor_and_wide_ones_kept() -> None:
    copied = {"total_token_throughput": 25.0, "mean_tpot_ms": 75.0}
    assert first_run_tolerances(copied) == {
        "total_token_throughput": FIRST_RUN_TOLERANCE_FLOOR,
        "mean_tpot_ms": 75.0,
    }


def test_without_a_file_to_copy_from_the_default_metrics_get_the_floor() -> None:
    recorded = first_run_tolerances(None)
    assert set(recorded) == set(DEFAULT_TOLERANCES)
    assert all(value == FIRST_RUN_TOLERANCE_FLOOR for value in recorded.values())
