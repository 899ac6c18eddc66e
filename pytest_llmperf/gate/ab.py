"""One profile as an A/B experiment: a reference (A) and a candidate (B), both serving, runs
interleaved A,B,B,A,A,B,... until the paired statistics decide or the budget is spent.

pytest-free. The order A,B then B,A makes a drift of the machine during a block (the other
sessions' load, thermal state) hit A and B alike instead of always favouring whichever runs
first. Each run is one ``measure()`` (warm-up requests, then a fresh prefix-cache salt or
the engine's reset), so no run is served from what the other configuration, or its own
previous run, left in a cache. The statistics are in ``paired``.

``simultaneous`` measures a pair's A and B at the same time instead (two threads, one run
each), for the bench (tests/bench/ab_table.py --simultaneous) and not as an option: on a noisy
2-core VM it cut the pairs' spread tenfold, but A and B then share the cores, and a 10 %
slower engine measured as 3 % (docs/ab.md, "Simultaneous pairs, measured").
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from pytest_llmperf.engines.session import Target
from pytest_llmperf.gate import paired
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.gate.verdict import direction_of
from pytest_llmperf.measure.metrics import missing_samples
from pytest_llmperf.measure.profiles import WorkloadProfile
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.models import MetricComparison, Outcome, Verdict

# Gated in an A/B experiment unless the test names its own: the smallest change that matters
# on each of the two figures the seeds optimize. 5 %: the target is to catch a 10 %
# engine slowdown; a tolerance at half of it leaves the interval room to lie beyond it.
AB_TOLERANCES: dict[str, float] = {"total_token_throughput": 5.0, "mean_tpot_ms": 5.0}

_STATUS_OF = {
    paired.SAME: "pass",
    paired.REGRESSED: "regressed",
    paired.IMPROVED: "improved",
    paired.INCONCLUSIVE: "inconclusive",
    paired.UNDECIDED: "inconclusive",
}
_OUTCOME_OF = {
    paired.SAME: Outcome.SAME,
    paired.REGRESSED: Outcome.REGRESSED,
    paired.IMPROVED: Outcome.IMPROVED,
    paired.INCONCLUSIVE: Outcome.INCONCLUSIVE,
}


@dataclass(frozen=True)
class ABRequest:
    reference: Target
    candidate: Target
    profile: WorkloadProfile
    hardware: str
    plan: paired.SequentialPlan = field(default_factory=paired.SequentialPlan)
    tolerances: Mapping[str, float] | None = None  # None: AB_TOLERANCES
    minutes: float | None = None  # a time budget besides plan.budget pairs
    max_failed_requests: int = 0
    # How many pairs an experiment measures again, in all, when one of their runs measured
    # no TPOT: on two shared cores an API server starved through a whole decode sends
    # every answer in one chunk (2 of 64 `long` experiments, docs/noise.md). That is the
    # machine's hiccup, not the configuration's; a configuration that never yields a second
    # chunk fails every try and still ends insufficient-data.
    remeasure: int = 2
    nodeid: str = ""
    machine: dict[str, Any] | None = None
    # Metrics whose per-pair ratios are recorded though not gated (``watched_ratios``): what a
    # candidate did to a figure the test chose not to gate, from the very pairs it measured.
    watch: Sequence[str] = ()
    # Both runs of a pair at once, not one after the other (measured only: see above).
    simultaneous: bool = False


def order(pair: int) -> tuple[str, str]:
    """Which configuration runs first in pair ``pair`` (0-based): A,B then B,A, and so on."""
    return ("A", "B") if pair % 2 == 0 else ("B", "A")


class _Stop(Exception):
    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict


class _Unmeasured(_Stop):
    """A run that completed but measured no sample of a gated latency: worth measuring again."""


def _check(run: Measurement, who: str, gated: Sequence[str], budget: int) -> None:
    """A run that cannot give a ratio ends the experiment with the reason."""
    if run.failed > budget:
        total = run.metrics.get("completed", 0) + run.failed
        reasons = "; ".join(dict.fromkeys(run.errors)) or "no reason recorded"
        raise _Stop(
            Verdict(
                Outcome.REQUESTS_FAILED,
                notes=(
                    f"{who}: {run.failed} of {total} requests failed (allowed: {budget}, "
                    f"--llmperf-max-failed); first reasons: {reasons}",
                ),
            )
        )
    missing = missing_samples(run.samples, gated)
    if missing:
        raise _Unmeasured(Verdict(Outcome.INSUFFICIENT_DATA, notes=(f"{who}: {missing}",)))
    for metric in gated:
        value = run.metrics.get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise _Stop(
                Verdict(
                    Outcome.INSUFFICIENT_DATA,
                    notes=(f"{who}: {metric} is {value!r}; a ratio needs a positive value",),
                )
            )


def both_at_once(runs: Mapping[str, Callable[[], Measurement]]) -> dict[str, Measurement]:
    """A's and B's runs started together, each in a thread of its own. A run that raised
    raises here (A's error before B's, as in a pair run one after the other)."""
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="llmperf-ab")
    try:
        futures = {who: pool.submit(runs[who]) for who in ("A", "B")}
        return {who: future.result() for who, future in futures.items()}
    finally:
        # On an interrupt, return to the caller at once: its cleanup stops both servers,
        # which fails the other run's requests and so ends its thread (the interpreter waits
        # for it at exit, up to a request timeout). Waiting here would only delay the stop.
        pool.shutdown(wait=False, cancel_futures=True)


def _worse_logs(pairs: Sequence[tuple[Measurement, Measurement]], metric: str) -> list[float]:
    """Each pair's ``ln(B/A)`` of ``metric``, signed so that positive means B is worse."""
    direction = direction_of(metric)
    return [
        paired.worse_log(float(a.metrics[metric]), float(b.metrics[metric]), direction)
        for a, b in pairs
    ]


def _decisions(
    pairs: Sequence[tuple[Measurement, Measurement]],
    tolerances: Mapping[str, float],
    plan: paired.SequentialPlan,
    *,
    final: bool,
) -> list[paired.MetricDecision]:
    """Each gated metric's decision at the latest look. ``final``: the budget (pairs or
    minutes) is spent, so an undecided metric is inconclusive."""
    looks = [n for n in plan.looks() if n <= len(pairs)]
    at = looks[-1] if looks else len(pairs)
    decisions = []
    for metric, tolerance in tolerances.items():
        direction = direction_of(metric)
        values = _worse_logs(pairs[:at], metric)
        decision = paired.decide_metric(metric, direction, tolerance, values, plan)
        if final and decision.status == paired.UNDECIDED:
            decision = paired.MetricDecision(
                metric, direction, tolerance, paired.INCONCLUSIVE, decision.interval, at
            )
        decisions.append(decision)
    return decisions


def run_ab(
    request: ABRequest,
    measure_reference: Callable[[], Measurement],
    measure_candidate: Callable[[], Measurement],
    clock: Callable[[], float] = time.monotonic,
) -> ProfileResult:
    """Measure pairs in A,B,B,A order until the verdict is decided, or the budget of pairs
    (or minutes) is spent; one ``ProfileResult`` whose ``ab`` holds the experiment."""
    tolerances = dict(request.tolerances or AB_TOLERANCES)
    plan = request.plan
    started = clock()
    pairs: list[tuple[Measurement, Measurement]] = []
    sequence: list[str] = []
    decisions: list[paired.MetricDecision] = []
    stop_reason = ""
    verdict: Verdict | None = None
    runs = {"A": measure_reference, "B": measure_candidate}
    names = {"A": request.reference.variant, "B": request.candidate.variant}
    discarded: list[str] = []
    try:
        while True:
            taken: dict[str, Measurement] = {}
            try:
                together = both_at_once(runs) if request.simultaneous else {}
                for who in ("A", "B") if together else order(len(pairs)):
                    run = together[who] if together else runs[who]()
                    sequence.append(who)
                    gated = list(tolerances)
                    _check(run, f"{who} ({names[who]})", gated, request.max_failed_requests)
                    taken[who] = run
            except _Unmeasured as unmeasured:
                if len(discarded) >= request.remeasure:
                    raise
                # The whole pair again, in the same order, so the A,B/B,A balance holds.
                discarded.append(
                    f"pair {len(pairs) + 1} measured again: {unmeasured.verdict.notes[0]}"
                )
                continue
            pairs.append((taken["A"], taken["B"]))
            minutes = (clock() - started) / 60.0
            out_of_pairs = len(pairs) >= plan.budget
            out_of_time = request.minutes is not None and minutes >= request.minutes
            decisions = _decisions(pairs, tolerances, plan, final=out_of_pairs or out_of_time)
            answer = paired.overall([d.status for d in decisions])
            if answer is not None:
                if answer == paired.INCONCLUSIVE:
                    stop_reason = (
                        f"budget spent ({len(pairs)} pairs)"
                        if out_of_pairs
                        else f"time budget spent ({minutes:.1f} of {request.minutes:g} min)"
                    )
                verdict = _verdict(answer, decisions, pairs, stop_reason, plan)
                break
    except _Stop as stop:
        verdict = stop.verdict
        if discarded:
            verdict = Verdict(verdict.outcome, verdict.comparisons, (*verdict.notes, *discarded))
    minutes = (clock() - started) / 60.0
    experiment = _experiment(request, pairs, sequence, decisions, tolerances, minutes)
    experiment["remeasured"] = discarded
    return _result(request, verdict, pairs, experiment)


def _median(runs: Sequence[Measurement], metric: str) -> float | None:
    values = [run.metrics.get(metric) for run in runs]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(numbers) if numbers else None


def _comparisons(
    decisions: Sequence[paired.MetricDecision], pairs: Sequence[tuple[Measurement, Measurement]]
) -> tuple[MetricComparison, ...]:
    rows = []
    for decision in decisions:
        a = _median([p[0] for p in pairs], decision.metric)
        b = _median([p[1] for p in pairs], decision.metric)
        if a is None or b is None:
            continue
        rows.append(
            MetricComparison(
                metric=decision.metric,
                baseline=a,
                measured=b,
                tolerance_pct=decision.tolerance_pct,
                direction=decision.direction,
                status=_STATUS_OF[decision.status],
                threshold_pct=decision.tolerance_pct,
                decided_by="paired",
            )
        )
    return tuple(rows)


def _verdict(
    answer: str,
    decisions: Sequence[paired.MetricDecision],
    pairs: Sequence[tuple[Measurement, Measurement]],
    stop_reason: str,
    plan: paired.SequentialPlan,
) -> Verdict:
    notes = []
    if answer == paired.INCONCLUSIVE:
        undecided = [d for d in decisions if d.status == paired.INCONCLUSIVE]
        notes.append(
            f"inconclusive: {stop_reason} before the interval of "
            f"{', '.join(d.metric for d in undecided)} lay inside or outside its tolerance; "
            f"raise --llmperf-ab-budget (or --llmperf-ab-minutes) for a verdict"
        )
        notes.extend(_budget_advice(d, pairs, plan) for d in undecided)
    return Verdict(
        _OUTCOME_OF[answer], comparisons=_comparisons(decisions, pairs), notes=tuple(notes)
    )


def _budget_advice(
    decision: paired.MetricDecision,
    pairs: Sequence[tuple[Measurement, Measurement]],
    plan: paired.SequentialPlan,
) -> str:
    """How far this experiment was from a verdict on ``decision.metric``, in pairs: what the
    user sizes --llmperf-ab-budget from (docs/ab.md, "Choosing the budget")."""
    values = _worse_logs(pairs, decision.metric)
    if len(values) < 3:
        return f"{decision.metric}: too few pairs to say how many more would decide it"
    spread = math.expm1(statistics.stdev(values)) * 100.0
    change = math.expm1(paired.hodges_lehmann_estimate(values)) * 100.0
    side = "worse" if change >= 0 else "better"
    seen = (
        f"{decision.metric}: the pairs spread by {spread:.1f} % around B {abs(change):.1f} % "
        f"{side} than A (tolerance {decision.tolerance_pct:g} %)"
    )
    largest = 500
    budget = paired.budget_to_decide(values, decision.tolerance_pct, plan, largest)
    if budget is None:
        # Either the estimate lies on the tolerance or the spread is too wide for its distance.
        return f"{seen}: at that spread no budget up to {largest} pairs would decide it"
    return (
        f"{seen}: at that spread a budget of about {budget} pairs would decide it "
        f"{paired.PLANNING_POWER:.0%} of the time"
    )


def _experiment(
    request: ABRequest,
    pairs: Sequence[tuple[Measurement, Measurement]],
    sequence: Sequence[str],
    decisions: Sequence[paired.MetricDecision],
    tolerances: Mapping[str, float],
    minutes: float,
) -> dict[str, Any]:
    """What the reports need: per metric A, B, the median ratio and its interval, and the
    ratio of every pair (the plot)."""
    metrics: dict[str, Any] = {}
    for decision in decisions:
        bounds = decision.ratio_bounds()
        metrics[decision.metric] = {
            "a": _median([p[0] for p in pairs], decision.metric),
            "b": _median([p[1] for p in pairs], decision.metric),
            "median_ratio": decision.median_ratio(),
            "ratio_low": None if bounds is None else bounds[0],
            "ratio_high": None if bounds is None else bounds[1],
            "confidence": None if decision.interval is None else decision.interval.confidence,
            "tolerance_pct": decision.tolerance_pct,
            "direction": decision.direction.value,
            "verdict": decision.status,
            "pairs": decision.pairs,
        }
    watched = [m for m in dict.fromkeys(request.watch) if m not in tolerances]
    return {
        "reference": request.reference.variant,
        "candidate": request.candidate.variant,
        "reference_command": request.reference.command,
        "candidate_command": request.candidate.command,
        "pairs": len(pairs),
        "budget_pairs": request.plan.budget,
        "budget_minutes": request.minutes,
        "alpha": request.plan.alpha,
        "minutes": round(minutes, 3),
        "order": "".join(sequence),
        "pairing": "simultaneous" if request.simultaneous else "interleaved",
        "metrics": metrics,
        "ratios": {metric: _pair_ratios(pairs, metric) for metric in tolerances},
        "watched_ratios": {metric: _pair_ratios(pairs, metric) for metric in watched},
    }


def _pair_ratios(pairs: Sequence[tuple[Measurement, Measurement]], metric: str) -> list[float]:
    """B/A of ``metric`` in each pair where A's value is a positive number and B has one."""
    ratios = []
    for a, b in pairs:
        before, after = a.metrics.get(metric), b.metrics.get(metric)
        if _is_number(before) and _is_number(after) and before > 0:
            ratios.append(float(after) / float(before))
    return ratios


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _result(
    request: ABRequest,
    verdict: Verdict,
    pairs: Sequence[tuple[Measurement, Measurement]],
    experiment: dict[str, Any],
) -> ProfileResult:
    """The candidate's side of the experiment as a result: medians of its runs, the pairs'
    notes, and ``experiment`` (``_experiment``) for the reports."""
    candidates = [p[1] for p in pairs]
    center = {}
    if candidates:
        for key in candidates[0].metrics:
            value = _median(candidates, key)
            center[key] = value if value is not None else candidates[0].metrics[key]
    last = pairs[-1][1] if pairs else None
    notes = [note for pair in pairs for run in pair for note in run.notes]
    notes.extend(experiment.get("remeasured", ()))
    target = request.candidate
    return ProfileResult(
        nodeid=request.nodeid,
        engine=target.engine,
        profile=request.profile.name,
        hardware=request.hardware,
        model=target.served_model if target.embedded else target.model,
        metrics=center,
        workload=last.workload if last else request.profile.workload(),
        verdict=verdict,
        engine_version=target.version,
        command=target.command,
        baseline_file=f"A/B against {request.reference.variant}",
        runs=len(experiment["order"]),  # every run, an unfinished pair's too
        errors=last.errors if last else (),
        notes=tuple(dict.fromkeys([*target.notes, *notes])),
        variant=target.variant,
        series=last.series if last else {},
        machine=request.machine,
        ab=experiment,
    )
