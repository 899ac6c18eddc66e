"""ab_table.py's and ab_replay.py's own logic: ``--tolerances``, and a watched metric's ratios."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_llmperf.gate.ab import AB_TOLERANCES

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


@pytest.fixture(scope="module")
def noise_support() -> ModuleType:
    return _load("noise_support")


def test_no_tolerances_gates_the_defaults(noise_support: ModuleType) -> None:
    assert noise_support.parse_tolerances(None) is None
    assert noise_support.parse_tolerances("") is None


def test_tolerances_name_the_gated_metrics(noise_support: ModuleType) -> None:
    parse = noise_support.parse_tolerances
    assert parse("total_token_throughput=5") == {"total_token_throughput": 5.0}
    assert parse("total_token_throughput=5, mean_tpot_ms=7.5", allowed=AB_TOLERANCES) == {
        "total_token_throughput": 5.0,
        "mean_tpot_ms": 7.5,
    }


@pytest.mark.parametrize(
    "text", ["total_token_throughput", "mean_tpot_ms=x", "mean_tpot_ms=0", "=5", "x=inf"]
)
def test_a_malformed_tolerance_is_refused_by_name(noise_support: ModuleType, text: str) -> None:
    with pytest.raises(SystemExit, match=r"--tolerances: .*METRIC=PERCENT"):
        noise_support.parse_tolerances(text)


def test_a_metric_outside_the_allowed_ones_is_refused(noise_support: ModuleType) -> None:
    with pytest.raises(SystemExit, match="p99_ttft_ms is not one of"):
        noise_support.parse_tolerances("p99_ttft_ms=10", allowed=AB_TOLERANCES)
    assert noise_support.parse_tolerances("p99_ttft_ms=10") == {"p99_ttft_ms": 10.0}


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        (["ab_table.py"], "p99_ttft_ms=10", "p99_ttft_ms is not one of"),
        (["ab_replay.py", "absent.json"], "p99_ttft_ms=10", "p99_ttft_ms is not one of"),
        (["noise_table.py"], "mean_tpot_ms", "'mean_tpot_ms' is not METRIC=PERCENT"),
    ],
)
def test_each_script_refuses_bad_tolerances_before_it_starts_anything(
    command: list[str], text: str, expected: str, tmp_path: Path
) -> None:
    # The scripts' own command lines, so a script that parsed the option its own way again
    # (noise_table once split it inline and died with a traceback) fails here.
    done = subprocess.run(
        [sys.executable, str(BENCH / command[0]), *command[1:], "--tolerances", text],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, no server's folder


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
