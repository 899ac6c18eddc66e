"""The stored-baseline gate's sequential rule (gate/sequential.py): its decisions, its error
rates by simulation, and run_gate measuring run by run against a real baseline file."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.gate import paired, sequential, session_spread, store
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.gate.loop import GateRequest, gate_request, run_gate
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.models import Outcome
from pytest_llmperf.reports import history
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


def _simulate(
    true_change: float, sd: float, tolerance: float, runs: int, seed: int
) -> dict[str, float]:
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


PROMPTS = 8
WORKLOAD = {"dataset": "random", "num_prompts": PROMPTS}


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
    assert any("no between-session spread (--llmperf-history" in n for n in result.verdict.notes)


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
def test_a_changed_workload_is_reported_after_one_run(
    tmp_path: Path, changed: dict[str, Any]
) -> None:
    _record(tmp_path, {THROUGHPUT: 5.0}, runs=5)
    measure = Scripted([(1000.0, 10.0)])

    def other_workload() -> Measurement:
        run = measure()
        return Measurement(run.metrics, {**WORKLOAD, **changed}, (), 0)

    result = run_gate(_request(tmp_path, budget=10), other_workload)
    assert result.verdict.outcome is Outcome.WORKLOAD_CHANGED
    assert measure.calls == 1


# The machine's phases: a baseline recorded in one phase, runs today in another. The
# back-to-back spread does not see them; the history's between-session spread does.

WITHIN = 0.03  # back-to-back spread of one run (log sd)
PHASE = 0.08  # how far a session's phase moves its runs (log sd)


def _simulate_phases(true_change: float, session_sd: float | None, seed: int) -> dict[str, float]:
    """Baseline (5 runs) and today's runs each in a phase of their own."""
    generator = np.random.default_rng(seed)
    tally = {paired.SAME: 0, paired.REGRESSED: 0, paired.IMPROVED: 0, paired.INCONCLUSIVE: 0}
    experiments = 1000
    for _ in range(experiments):
        recorded = generator.normal(generator.normal(0.0, PHASE), WITHIN / math.sqrt(5))
        baseline = sequential.Baseline(
            1000.0 * math.exp(recorded), cv=WITHIN * 100.0, runs=5, session_sd=session_sd
        )
        today = generator.normal(0.0, PHASE) - true_change
        draws = 1000.0 * np.exp(generator.normal(today, WITHIN, RULE.budget))
        for count in range(1, RULE.budget + 1):
            status = _decide(baseline, draws[:count].tolist(), 10.0)
            if status != paired.UNDECIDED:
                tally[status] += 1
                break
    return {key: value / experiments for key, value in tally.items()}


# What the history of such a machine shows: each session's median moves by the phase and by
# the noise of its own five runs.
SESSIONS_SD = math.sqrt(PHASE**2 + WITHIN**2 / 5)


def test_phases_the_baseline_cannot_see_raise_false_alarms() -> None:
    blind = _simulate_phases(0.0, session_sd=None, seed=21)
    # 13.6 % here: more than twice the alpha / 2 the rule promises. The problem the history solves.
    assert blind[paired.REGRESSED] > RULE.alpha


def test_the_history_spread_holds_false_alarms_under_phases() -> None:
    informed = _simulate_phases(0.0, session_sd=SESSIONS_SD, seed=21)
    assert informed[paired.REGRESSED] <= RULE.alpha / 2 + 0.01


def test_with_the_history_spread_a_collapse_is_still_caught() -> None:
    informed = _simulate_phases(math.log(2.0), session_sd=SESSIONS_SD, seed=22)
    assert informed[paired.REGRESSED] >= 0.95


def test_the_history_spread_widens_the_interval_by_the_phase_part_only() -> None:
    values = [920.0, 915.0, 925.0]
    blind = sequential.Baseline(1000.0, cv=2.0, runs=5)
    steady = sequential.Baseline(1000.0, cv=2.0, runs=5, session_sd=0.001)
    phased = sequential.Baseline(1000.0, cv=2.0, runs=5, session_sd=0.08)
    share = 0.05
    narrow = sequential.change_interval(blind, values, THROUGHPUT, share)
    same = sequential.change_interval(steady, values, THROUGHPUT, share)
    wide = sequential.change_interval(phased, values, THROUGHPUT, share)
    assert narrow is not None
    assert same is not None
    assert wide is not None
    # A history as steady as the baseline's own error adds nothing ...
    assert (same.low, same.high) == pytest.approx((narrow.low, narrow.high))
    # ... a phased one widens the interval about the same center.
    assert wide.estimate == pytest.approx(narrow.estimate)
    assert wide.low < narrow.low
    assert wide.high > narrow.high
    assert paired.classify(narrow, 5.0) == paired.REGRESSED
    assert paired.classify(wide, 5.0) == paired.UNDECIDED


def test_without_a_recorded_spread_the_history_widens_the_distribution_free_interval() -> None:
    values = [930.0, 925.0, 935.0, 928.0, 932.0, 931.0]
    blind = sequential.Baseline(1000.0, cv=None, runs=1)
    phased = sequential.Baseline(1000.0, cv=None, runs=1, session_sd=0.05)
    narrow = sequential.change_interval(blind, values, THROUGHPUT, 0.05)
    wide = sequential.change_interval(phased, values, THROUGHPUT, 0.05)
    assert narrow is not None
    assert wide is not None
    widen = NormalDist().inv_cdf(1 - 0.025) * math.sqrt(2) * 0.05
    assert wide.low == pytest.approx(narrow.low - widen)
    assert wide.high == pytest.approx(narrow.high + widen)


def test_run_gate_says_what_the_history_added(tmp_path: Path) -> None:
    _record(tmp_path, {THROUGHPUT: 3.0, TPOT: 3.0}, runs=5)
    request = replace(
        _request(tmp_path, budget=4),
        between_sessions={THROUGHPUT: session_spread.SessionSpread(0.08, 9)},
    )
    # -7.5 % against a 20 % tolerance: decided "pass" even with the wider interval.
    result = run_gate(request, Scripted([(925.0, 10.0)]))
    assert result.verdict.outcome is Outcome.PASS
    note = next(n for n in result.verdict.notes if n.startswith("sequential rule"))
    assert "between-session spread from 9 history sessions: total_token_throughput 8.3%" in note
    assert "unusual phase" not in note  # no center known: nothing to say about the baseline


def test_run_gate_points_out_a_baseline_recorded_in_an_unusual_phase(tmp_path: Path) -> None:
    _record(tmp_path, {THROUGHPUT: 3.0, TPOT: 3.0}, runs=5)  # throughput 1000
    # The last nine nights ran at 800 +- 3 %: the baseline is 25 % above them.
    request = replace(
        _request(tmp_path, budget=4),
        between_sessions={THROUGHPUT: session_spread.SessionSpread(0.03, 9, 800.0)},
    )
    result = run_gate(request, Scripted([(800.0, 10.0)]))
    note = next(n for n in result.verdict.notes if n.startswith("sequential rule"))
    assert "total_token_throughput lies +25% from the median of those sessions" in note
    assert "--update-baselines" in note


def test_gate_request_reads_the_spread_of_its_own_series_from_history_lines(
    tmp_path: Path,
) -> None:
    """The history lines the plugin writes for a profile's results are the ones gate_request
    finds for that profile again: the keys of both sides agree."""
    target = unreachable_target(command="vllm serve")
    profile = builtin_profiles()["short"].scaled(PROMPTS)
    _record(tmp_path, {THROUGHPUT: 3.0, TPOT: 3.0}, runs=5)

    def request(budget: int | None, history: list[dict[str, Any]]) -> GateRequest:
        settings = Settings(baseline_dir=tmp_path, sequential_budget=budget)
        return gate_request(
            settings, target=target, profile=profile, hardware="cpu", machine=None, history=history
        )

    lines = []
    for session, throughput in enumerate([1000.0, 1040.0, 970.0, 1010.0, 990.0, 1060.0]):
        result = run_gate(request(None, []), Scripted([(throughput, 10.0)]))
        lines.append(
            history.record(
                result, timestamp=f"2026-11-0{session + 1}", git_commit=None, plugin_version="t"
            )
        )
    assert request(None, lines).between_sessions == {}  # only the sequential rule reads it
    found = request(10, lines).between_sessions
    assert found[THROUGHPUT].sessions == 6
    assert found[THROUGHPUT].sd > 0
    other = builtin_profiles()["medium"].scaled(PROMPTS)
    settings = Settings(baseline_dir=tmp_path, sequential_budget=10)
    elsewhere = gate_request(
        settings, target=target, profile=other, hardware="cpu", machine=None, history=lines
    )
    assert elsewhere.between_sessions == {}
