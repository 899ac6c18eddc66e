"""The A/B loop with scripted measurements: the interleaving order, when it stops, and what
it records (no server: the measurements are the loop's only input)."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from pytest_llmperf.engines.session import Target
from pytest_llmperf.gate import paired
from pytest_llmperf.gate.ab import ABRequest, order, run_ab
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.models import Outcome
from tests.support.targets import unreachable_target


def _target(name: str) -> Target:
    return unreachable_target(
        model="tiny", command=f"vllm serve ({name})", version="0", embedded=True, variant=name
    )


def _runs(
    log: list[str], who: str, slower: float, noise: float, seed: int, failed: int = 0
) -> Callable[[], Measurement]:
    draw = random.Random(seed)

    def measure() -> Measurement:
        log.append(who)
        factor = slower * (1.0 + draw.gauss(0.0, noise))
        return Measurement(
            metrics={"total_token_throughput": 1000.0 / factor, "mean_tpot_ms": 10.0 * factor},
            workload={"profile": "short"},
            errors=("boom",) * failed,
            failed=failed,
        )

    return measure


def _request(**changes: object) -> ABRequest:
    base = {
        "reference": _target("main"),
        "candidate": _target("candidate"),
        "profile": builtin_profiles()["short"],
        "hardware": "cpu",
    }
    base.update(changes)
    return ABRequest(**base)  # type: ignore[arg-type]


def test_runs_alternate_a_b_b_a() -> None:
    assert [order(n) for n in range(4)] == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]
    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.0, 0.01, 2))
    assert result.ab is not None
    assert "".join(log) == result.ab["order"]
    assert result.ab["order"].startswith("ABBAABBAABBA")
    assert result.runs == len(log) == 2 * result.ab["pairs"]


def test_equal_configurations_are_the_same_at_the_first_look() -> None:
    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.0, 0.01, 2))
    assert result.verdict.outcome is Outcome.SAME
    assert not result.verdict.failed
    assert result.ab is not None
    assert result.ab["pairs"] == 6
    row = result.ab["metrics"]["mean_tpot_ms"]
    assert row["verdict"] == "same"
    assert 0.95 < row["ratio_low"] <= row["median_ratio"] <= row["ratio_high"] < 1.05


def test_a_slower_candidate_regressed_on_both_metrics() -> None:
    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.2, 0.01, 2))
    assert result.verdict.outcome is Outcome.REGRESSED
    assert result.verdict.failed
    statuses = {row.metric: row.status for row in result.verdict.comparisons}
    assert statuses == {"total_token_throughput": "regressed", "mean_tpot_ms": "regressed"}
    assert result.ab is not None
    assert result.ab["metrics"]["total_token_throughput"]["median_ratio"] < 0.9  # direction
    assert result.ab["metrics"]["mean_tpot_ms"]["median_ratio"] > 1.1


def test_a_faster_candidate_improved() -> None:
    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 0.8, 0.01, 2))
    assert result.verdict.outcome is Outcome.IMPROVED
    assert not result.verdict.failed


def test_noise_beyond_the_budget_is_inconclusive() -> None:
    log: list[str] = []
    plan = paired.SequentialPlan(budget=6)
    result = run_ab(
        _request(plan=plan), _runs(log, "A", 1.0, 0.3, 1), _runs(log, "B", 1.05, 0.3, 2)
    )
    assert result.verdict.outcome is Outcome.INCONCLUSIVE
    assert len(log) == 12
    assert "--llmperf-ab-budget" in result.verdict.notes[0]
    # Each undecided metric says how far it was from a verdict, in pairs.
    advice = result.verdict.notes[1:]
    undecided = [row.metric for row in result.verdict.comparisons if row.status == "inconclusive"]
    assert [note.split(":")[0] for note in advice] == undecided
    for note in advice:
        assert "the pairs spread by" in note
        assert "pairs would decide it 80% of the time" in note or "no budget up to" in note


def test_the_budget_advice_names_a_budget_the_noise_allows() -> None:
    log: list[str] = []
    plan = paired.SequentialPlan(budget=6)
    result = run_ab(
        _request(plan=plan), _runs(log, "A", 1.0, 0.05, 1), _runs(log, "B", 1.12, 0.05, 2)
    )
    # 12 % slower at a 5 % noise per run: six pairs are not enough, fourteen would be.
    assert result.verdict.outcome is Outcome.INCONCLUSIVE
    advice = " ".join(result.verdict.notes[1:])
    budget = int(advice.split("a budget of about ")[1].split()[0])
    assert 6 < budget <= 60


def test_the_time_budget_ends_the_experiment() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 30.0  # each reading half a minute later
        return now[0]

    log: list[str] = []
    result = run_ab(
        _request(minutes=1.0),
        _runs(log, "A", 1.0, 0.3, 1),
        _runs(log, "B", 1.05, 0.3, 2),
        clock=clock,
    )
    assert result.verdict.outcome is Outcome.INCONCLUSIVE
    assert "time budget" in result.verdict.notes[0]
    assert result.ab is not None
    assert result.ab["pairs"] < 6


def test_failed_requests_end_the_experiment_and_name_the_configuration() -> None:
    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.0, 0.01, 2, 3))
    assert result.verdict.outcome is Outcome.REQUESTS_FAILED
    assert "B (candidate): 3 of" in result.verdict.notes[0]
    assert log == ["A", "B"]


def _meeting(
    barrier: threading.Barrier, run: Callable[[], Measurement]
) -> Callable[[], Measurement]:
    """``run`` that first waits for the other side's run to start: it returns only when A and
    B are in flight together, and raises BrokenBarrierError when they are not."""

    def measure() -> Measurement:
        barrier.wait()
        return run()

    return measure


def test_simultaneous_pairs_run_a_and_b_at_the_same_time() -> None:
    log: list[str] = []
    barrier = threading.Barrier(2, timeout=10)
    result = run_ab(
        _request(simultaneous=True),
        _meeting(barrier, _runs(log, "A", 1.0, 0.01, 1)),
        _meeting(barrier, _runs(log, "B", 1.2, 0.01, 2)),
    )
    assert result.verdict.outcome is Outcome.REGRESSED
    assert result.ab is not None
    assert result.ab["pairing"] == "simultaneous"
    # Each pair is one A and one B, whichever thread logged first.
    assert sorted(log) == sorted("AB" * result.ab["pairs"])
    assert result.ab["order"] == "AB" * result.ab["pairs"]


def test_interleaved_pairs_never_overlap() -> None:
    # The same meeting point as above fails when runs follow each other: the default order
    # is one run at a time.
    barrier = threading.Barrier(2, timeout=0.2)
    log: list[str] = []
    with pytest.raises(threading.BrokenBarrierError):
        run_ab(
            _request(),
            _meeting(barrier, _runs(log, "A", 1.0, 0.01, 1)),
            _meeting(barrier, _runs(log, "B", 1.0, 0.01, 2)),
        )


def test_a_simultaneous_pair_with_failed_requests_names_the_side() -> None:
    log: list[str] = []
    result = run_ab(
        _request(simultaneous=True),
        _runs(log, "A", 1.0, 0.01, 1),
        _runs(log, "B", 1.0, 0.01, 2, 3),
    )
    assert result.verdict.outcome is Outcome.REQUESTS_FAILED
    assert "B (candidate): 3 of" in result.verdict.notes[0]
    assert sorted(log) == ["A", "B"]


def _stalled(log: list[str], who: str) -> Measurement:
    # What a run on two shared cores sent when the API server was starved through the whole
    # decode: every request completed, each answer in a single chunk, so no TPOT sample.
    log.append(who)
    return Measurement(
        metrics={"total_token_throughput": 1000.0, "mean_tpot_ms": 0.0, "completed": 16},
        workload={"profile": "short"},
        errors=(),
        failed=0,
        samples={"ttft": 16, "tpot": 0, "itl": 0, "e2el": 16},
    )


def test_a_run_that_never_measures_tpot_ends_the_experiment_with_the_reason() -> None:
    log: list[str] = []
    result = run_ab(
        _request(remeasure=2), _runs(log, "A", 1.0, 0.01, 1), lambda: _stalled(log, "B")
    )
    assert result.verdict.outcome is Outcome.INSUFFICIENT_DATA
    reason = (
        "B (candidate): mean_tpot_ms has no samples (no request produced the chunks tpot needs)"
    )
    assert result.verdict.notes == (
        reason,
        f"pair 1 measured again: {reason}",
        f"pair 1 measured again: {reason}",
    )
    # The pair was tried three times (the first and two more), each in its A,B order.
    assert log == ["A", "B"] * 3
    assert result.ab is not None
    assert result.ab["pairs"] == 0
    assert len(result.ab["remeasured"]) == 2


def test_a_single_stalled_run_is_measured_again_not_a_verdict() -> None:
    log: list[str] = []
    good_b = _runs(log, "B", 1.0, 0.01, 2)
    calls = [0]

    def candidate() -> Measurement:
        calls[0] += 1
        return _stalled(log, "B") if calls[0] == 3 else good_b()

    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), candidate)
    assert result.verdict.outcome is Outcome.SAME
    assert result.ab is not None
    assert result.ab["pairs"] == 6
    # Pair 3 (A,B order) lost its B run and was measured again whole, still A first.
    assert result.ab["order"].startswith("ABBA" + "AB" + "AB" + "BA")
    assert result.runs == 2 * 6 + 2
    assert result.ab["remeasured"] == [
        "pair 3 measured again: B (candidate): mean_tpot_ms has no samples "
        "(no request produced the chunks tpot needs)"
    ]
    assert result.ab["remeasured"][0] in result.notes


def test_the_report_table_shows_ratios_intervals_and_pairs() -> None:
    from pytest_llmperf.reports.ab_report import ab_message, ab_table

    log: list[str] = []
    result = run_ab(_request(), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.2, 0.01, 2))
    table = ab_table(result)
    assert table.header == ("metric", "A", "B", "B/A", "interval", "tolerance", "verdict", "pairs")
    tpot = next(row for row in table.rows if row[0] == "mean_tpot_ms")
    assert tpot[3].startswith("1.")  # 1.2 +- noise
    assert tpot[5:] == ("±5%", "REGRESSED", "6")
    assert "A = main, B = candidate; 6 pairs (budget 20)" in table.notes[0]
    assert ab_message(result).startswith("llmperf: A/B short: candidate against main -> regressed")


def test_an_interval_too_few_pairs_can_bound_is_shown_as_unbounded() -> None:
    from pytest_llmperf.reports.ab_report import ab_table

    log: list[str] = []
    plan = paired.SequentialPlan(budget=3)
    result = run_ab(
        _request(plan=plan), _runs(log, "A", 1.0, 0.01, 1), _runs(log, "B", 1.0, 0.01, 2)
    )
    assert result.verdict.outcome is Outcome.INCONCLUSIVE
    assert {row[4] for row in ab_table(result).rows} == {"unbounded (too few pairs)"}


def test_a_watched_metric_keeps_its_pair_ratios_without_gating() -> None:
    # Gated on throughput alone; B's TPOT is 20 % longer but its throughput unchanged, so
    # the verdict is same, and TPOT's pairs are still recorded, pair by pair.
    log: list[str] = []

    def candidate() -> Measurement:
        run = _runs(log, "B", 1.0, 0.01, 2)()
        metrics = dict(run.metrics)
        metrics["mean_tpot_ms"] = metrics["mean_tpot_ms"] * 1.2
        return Measurement(metrics=metrics, workload=run.workload, errors=(), failed=0)

    request = _request(
        tolerances={"total_token_throughput": 5.0},
        watch=("total_token_throughput", "mean_tpot_ms", "mean_tpot_ms"),
    )
    result = run_ab(request, _runs(log, "A", 1.0, 0.01, 1), candidate)
    assert result.verdict.outcome is Outcome.SAME
    assert result.ab is not None
    assert set(result.ab["ratios"]) == {"total_token_throughput"}  # the gated one stays there
    watched = result.ab["watched_ratios"]
    assert set(watched) == {"mean_tpot_ms"}
    assert len(watched["mean_tpot_ms"]) == result.ab["pairs"]
    assert all(1.15 < ratio < 1.25 for ratio in watched["mean_tpot_ms"])


def test_watched_ratios_come_from_the_kept_pairs_after_a_remeasure() -> None:
    # Pair 3's B run stalls; the pair is measured again. The watched ratios must pair each
    # kept A with its own B, not with the discarded run (which a tally by position would).
    log: list[str] = []
    good_b = _runs(log, "B", 1.0, 0.0, 2)
    calls = [0]

    def candidate() -> Measurement:
        calls[0] += 1
        if calls[0] == 3:
            stalled = _stalled(log, "B")
            metrics = {**stalled.metrics, "output_throughput": 1.0}  # far from every kept B
            return Measurement(
                metrics=metrics,
                workload=stalled.workload,
                errors=(),
                failed=0,
                samples=stalled.samples,
            )
        run = good_b()
        return Measurement(
            metrics={**run.metrics, "output_throughput": 500.0},
            workload=run.workload,
            errors=(),
            failed=0,
        )

    def reference() -> Measurement:
        run = _runs(log, "A", 1.0, 0.0, 1)()
        return Measurement(
            metrics={**run.metrics, "output_throughput": 1000.0},
            workload=run.workload,
            errors=(),
            failed=0,
        )

    result = run_ab(_request(watch=("output_throughput",)), reference, candidate)
    assert result.ab is not None
    assert len(result.ab["remeasured"]) == 1
    assert result.ab["watched_ratios"] == {"output_throughput": [0.5] * result.ab["pairs"]}
