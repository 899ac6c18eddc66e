"""The stored-baseline gate's sequential rule (gate/sequential.py): its decisions, its error
rates by simulation, and run_gate measuring run by run against a real baseline file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_llmperf.gate import paired, sequential, store
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.gate.loop import GateRequest, run_gate
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.models import Outcome
from tests.support.targets import unreachable_target

RULE = sequential.StoredRule(budget=10)
THROUGHPUT = "total_token_throughput"
TPOT = "mean_tpot_ms"


def _decide(baseline: sequential.Baseline, values: list[float], tolerance: float = 30.0) -> str:
    return sequential.decide_metric(THROUGHPUT, baseline, values, tolerance, RULE, 0.1).status


def test_with_a_recorded_spread_one_run_near_the_baseline_passes_at_once() -> None:
    recorded = sequential.Baseline(1000.0, cv=5.0, runs=5)
    assert _decide(recorded, [990.0]) == paired.SAME


def test_with_a_recorded_spread_one_collapsed_run_regresses_at_once() -> None:
    recorded = sequential.Baseline(1000.0, cv=5.0, runs=5)
    assert _decide(recorded, [400.0]) == paired.REGRESSED
    assert _decide(recorded, [2000.0]) == paired.IMPROVED


def test_a_run_near_the_tolerance_asks_for_more_runs() -> None:
    recorded = sequential.Baseline(1000.0, cv=10.0, runs=5)
    assert _decide(recorded, [730.0]) == paired.UNDECIDED  # -27 % against a 30 % tolerance
    # ... and the budget ends it as inconclusive, for the usual rule to judge.
    assert _decide(recorded, [730.0, 720.0] * 5) == paired.INCONCLUSIVE


def test_without_a_recorded_spread_nothing_is_decided_before_six_runs() -> None:
    single = sequential.Baseline(1000.0, cv=None, runs=1)
    # Equal runs have no spread: a normal interval would claim certainty after two.
    for count in range(1, 6):
        assert _decide(single, [1000.0] * count) == paired.UNDECIDED
    assert _decide(single, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0]) == paired.SAME
    assert _decide(single, [400.0, 410.0, 390.0, 405.0, 395.0, 400.0]) == paired.REGRESSED


def test_a_latency_within_the_ms_floor_is_decided() -> None:
    recorded = sequential.Baseline(0.0004, cv=300.0, runs=5)
    decision = sequential.decide_metric(TPOT, recorded, [0.004], 10.0, RULE, 0.1)
    assert decision.status == paired.SAME


def _simulate(true_change: float, sd: float, tolerance: float, runs: int, seed: int) -> dict:
    """The rule on simulated runs: each experiment draws its baseline (the median of ``runs``
    recorded runs, approximated as normal with sd/sqrt(runs)) and its runs, all lognormal."""
    generator = np.random.default_rng(seed)
    tally = {paired.SAME: 0, paired.REGRESSED: 0, paired.IMPROVED: 0, paired.INCONCLUSIVE: 0}
    used = 0
    experiments = 1000
    for _ in range(experiments):
        recorded = math.exp(generator.normal(0.0, sd / math.sqrt(runs)))
        baseline = sequential.Baseline(1000.0 * recorded, cv=sd * 100.0, runs=runs)
        # Throughput: a change of +x worse is a value exp(-x) times the truth.
        draws = 1000.0 * np.exp(generator.normal(-true_change, sd, RULE.budget))
        for count in range(1, RULE.budget + 1):
            status = _decide(baseline, draws[:count].tolist(), tolerance)
            if status != paired.UNDECIDED:
                tally[status] += 1
                used += count
                break
    result = {key: value / experiments for key, value in tally.items()}
    result["mean_runs"] = used / experiments
    return result


def test_an_unchanged_engine_rarely_regresses_however_often_it_is_looked_at() -> None:
    result = _simulate(0.0, sd=0.05, tolerance=20.0, runs=5, seed=11)
    assert result[paired.REGRESSED] <= RULE.alpha / 2
    assert result["mean_runs"] < 3  # most profiles are decided within a couple of runs


def test_a_change_at_the_tolerance_is_rarely_passed_as_within_it() -> None:
    result = _simulate(math.log1p(0.20), sd=0.10, tolerance=20.0, runs=5, seed=12)
    assert result[paired.SAME] <= RULE.alpha / 2 + 0.01


def test_a_collapse_is_caught_in_the_first_run() -> None:
    result = _simulate(math.log(2.0), sd=0.10, tolerance=20.0, runs=5, seed=13)
    assert result[paired.REGRESSED] >= 0.99
    assert result["mean_runs"] < 1.2


# run_gate against a baseline file in a temporary folder, with scripted measurements.


def _request(root: Path, budget: int | None) -> GateRequest:
    target = unreachable_target(command="vllm serve")
    return GateRequest(
        target=target,
        profile=builtin_profiles()["short"],
        hardware="cpu",
        baseline_root=root,
        update=False,
        sequential_budget=budget,
    )


WORKLOAD = {"dataset": "random", "num_prompts": 8}


def _record(root: Path, spread: dict[str, float] | None, runs: int) -> None:
    entry: dict[str, object] = {
        "status": "ok",
        "runs": runs,
        "workload": WORKLOAD,
        "metrics": {THROUGHPUT: 1000.0, TPOT: 10.0, "completed": 8.0},
        "tolerances": {THROUGHPUT: 20.0, TPOT: 20.0},
    }
    if spread:
        entry["spread"] = spread
    path = store.baseline_path(root, "cpu", "m", "vllm")
    store.record_entry(path, "short", entry, header={"hardware": "cpu", "model": "m"})


class Scripted:
    """measure_once: the given (throughput, TPOT) pairs in turn; counts the calls."""

    def __init__(self, values: list[tuple[float, float]]) -> None:
        self.values = values
        self.calls = 0

    def __call__(self) -> Measurement:
        throughput, tpot = self.values[min(self.calls, len(self.values) - 1)]
        self.calls += 1
        metrics = {THROUGHPUT: throughput, TPOT: tpot, "completed": 8.0}
        return Measurement(metrics=metrics, workload=dict(WORKLOAD), errors=(), failed=0)


def _gate(
    root: Path, values: list[tuple[float, float]], budget: int | None, cv: float = 5.0
) -> tuple[ProfileResult, Scripted]:
    """Record a baseline of 5 runs with spread ``cv``, then gate scripted runs against it."""
    _record(root, {THROUGHPUT: cv, TPOT: cv}, runs=5)
    measure = Scripted(values)
    return run_gate(_request(root, budget=budget), measure), measure


def test_a_profile_near_its_baseline_passes_after_one_run(tmp_path: Path) -> None:
    result, measure = _gate(tmp_path, [(1010.0, 9.9)], budget=10)
    assert result.verdict.outcome is Outcome.PASS
    assert measure.calls == 1
    assert result.runs == 1
    gated = [row for row in result.verdict.comparisons if row.tolerance_pct is not None]
    assert {row.decided_by for row in gated} == {"sequential"}
    assert any("sequential rule" in note and "1 run(s)" in note for note in result.verdict.notes)


def test_a_regression_fails_when_decided_without_a_confirm_rerun(tmp_path: Path) -> None:
    result, measure = _gate(tmp_path, [(500.0, 20.0)], budget=10)
    assert result.verdict.outcome is Outcome.REGRESSED
    assert measure.calls == 1
    assert not result.verdict.confirmed
    assert any("98.4%" in note for note in result.verdict.notes)  # the first look's confidence


def test_an_undecided_profile_measures_up_to_the_budget_then_the_usual_rule_judges(
    tmp_path: Path,
) -> None:
    # About -20 %: on the tolerance.
    result, measure = _gate(tmp_path, [(790.0, 10.0), (820.0, 10.0)], budget=4, cv=10.0)
    assert measure.calls == 4
    assert result.runs == 4
    assert any("undecided at the budget" in note for note in result.verdict.notes)
    assert result.verdict.outcome in (Outcome.PASS, Outcome.REGRESSED)


def test_without_the_option_the_usual_repeats_and_confirm_rerun_apply(tmp_path: Path) -> None:
    result, measure = _gate(tmp_path, [(500.0, 20.0)], budget=None)
    assert result.verdict.outcome is Outcome.REGRESSED
    assert result.verdict.confirmed
    assert measure.calls == 2  # one run, one confirm rerun


@pytest.mark.parametrize("changed", [{"num_prompts": 16}])
def test_a_changed_workload_is_reported_after_one_run(tmp_path: Path, changed: dict) -> None:
    _record(tmp_path, {THROUGHPUT: 5.0}, runs=5)
    measure = Scripted([(1000.0, 10.0)])

    def other_workload() -> Measurement:
        run = measure()
        return Measurement(run.metrics, {**WORKLOAD, **changed}, (), 0)

    result = run_gate(_request(tmp_path, budget=10), other_workload)
    assert result.verdict.outcome is Outcome.WORKLOAD_CHANGED
    assert measure.calls == 1
