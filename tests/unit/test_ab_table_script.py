"""ab_table.py's and ab_replay.py's own logic: ``--tolerances``, and a watched metric's ratios."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load(script: str) -> ModuleType:
    """A bench script as a module (tests/bench is no package)."""
    spec = importlib.util.spec_from_file_location(f"{script}_under_test", BENCH / f"{script}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ab_table() -> ModuleType:
    return _load("ab_table")


@pytest.fixture(scope="module")
def ab_replay() -> ModuleType:
    return _load("ab_replay")


def test_no_tolerances_gates_the_defaults(ab_table: ModuleType) -> None:
    assert ab_table.parse_tolerances(None) is None
    assert ab_table.parse_tolerances("") is None


def test_tolerances_name_the_gated_metrics(ab_table: ModuleType) -> None:
    assert ab_table.parse_tolerances("total_token_throughput=5") == {"total_token_throughput": 5.0}
    assert ab_table.parse_tolerances("total_token_throughput=5, mean_tpot_ms=7.5") == {
        "total_token_throughput": 5.0,
        "mean_tpot_ms": 7.5,
    }


@pytest.mark.parametrize("text", ["total_token_throughput", "mean_tpot_ms=x", "mean_tpot_ms=0"])
def test_a_malformed_tolerance_is_refused_by_name(ab_table: ModuleType, text: str) -> None:
    with pytest.raises(SystemExit, match=r"--tolerances: .*METRIC=PERCENT"):
        ab_table.parse_tolerances(text)


def test_a_metric_the_table_does_not_read_is_refused(ab_table: ModuleType) -> None:
    with pytest.raises(SystemExit, match="p99_ttft_ms is not one of"):
        ab_table.parse_tolerances("p99_ttft_ms=10")


def test_an_ungated_metric_is_watched_pair_by_pair(ab_table: ModuleType) -> None:
    ab = {"ratios": {"total_token_throughput": [0.9, 0.95]}, "remeasured": []}
    taken = {
        "A": [
            {"mean_tpot_ms": 10.0, "total_token_throughput": 100.0},
            {"mean_tpot_ms": 20.0, "total_token_throughput": 100.0},
        ],
        "B": [
            {"mean_tpot_ms": 11.0, "total_token_throughput": 90.0},
            {"mean_tpot_ms": 24.0, "total_token_throughput": 95.0},
        ],
    }
    watched = ab_table._watched_ratios(ab, taken)
    assert watched == {"mean_tpot_ms": pytest.approx([1.1, 1.2])}


def test_no_watched_ratios_after_a_remeasured_pair(ab_table: ModuleType) -> None:
    # A discarded pair's runs are among those taken: pairing them by position would be wrong.
    ab = {"ratios": {"total_token_throughput": [1.0]}, "remeasured": ["pair 1 measured again"]}
    taken = {"A": [{"mean_tpot_ms": 1.0}] * 2, "B": [{"mean_tpot_ms": 1.0}]}
    assert ab_table._watched_ratios(ab, taken) == {}


def test_a_row_reports_both_spreads(ab_table: ModuleType) -> None:
    record = {
        "outcome": "same",
        "pairs": 6,
        "minutes": 1.0,
        "tpot_ratio": 1.01,
        "throughput_ratio": 0.99,
        "added_pct": 0.0,
        "tpot_log_sd": 0.2,
        "throughput_log_sd": 0.03,
    }
    row = ab_table._row("very-long", 0.0, [record])
    assert (row["tpot_log_sd"], row["throughput_log_sd"]) == (0.2, 0.03)
    assert row["same"] == 1


def _throughput_only_record(tpot_ratio: float) -> dict[str, object]:
    """An experiment gated on throughput alone, A = B there, with mean TPOT watched."""
    steady = [1.0 + 0.002 * (-1) ** i for i in range(20)]
    return {
        "outcome": "same",
        "pairs": 20,
        "minutes": 10.0,
        "tolerances": {"total_token_throughput": 5.0},
        "ratios": {"total_token_throughput": steady},
        "watched_ratios": {"mean_tpot_ms": [tpot_ratio * r for r in steady]},
    }


def test_replay_gates_a_watched_metric_when_asked(ab_replay: ModuleType) -> None:
    from pytest_llmperf.gate.paired import SequentialPlan

    plan = SequentialPlan(budget=20)
    record = _throughput_only_record(tpot_ratio=1.3)
    as_recorded = ab_replay.replay(record, plan)
    assert as_recorded is not None
    assert as_recorded[0] == "same"
    both = {"total_token_throughput": 5.0, "mean_tpot_ms": 5.0}
    replayed = ab_replay.replay(record, plan, both)
    assert replayed is not None
    assert replayed[0] == "regressed"  # the watched TPOT, 30 % worse, decides it


def test_replay_of_a_metric_never_kept_runs_out(ab_replay: ModuleType) -> None:
    from pytest_llmperf.gate.paired import SequentialPlan

    record = _throughput_only_record(tpot_ratio=1.0)
    del record["watched_ratios"]
    both = {"total_token_throughput": 5.0, "mean_tpot_ms": 5.0}
    assert ab_replay.replay(record, SequentialPlan(budget=20), both) is None
