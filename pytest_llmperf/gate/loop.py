"""The gate of one profile: measure (repeatedly), judge against the baseline, confirm, record.

pytest-free: the plugin turns the ``ProfileResult`` this returns into a pass or a failure.
"""

from __future__ import annotations

import datetime
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_llmperf.config import Settings
from pytest_llmperf.engines import fingerprint
from pytest_llmperf.engines.session import Target
from pytest_llmperf.gate import paired, placement, sequential, session_spread, store
from pytest_llmperf.gate import verdict as judging
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.gate.modelkey import check_model
from pytest_llmperf.gate.sweep import SWEEP_TOLERANCES, regression_notes
from pytest_llmperf.measure.metrics import missing_samples
from pytest_llmperf.measure.profiles import WorkloadProfile
from pytest_llmperf.measure.run import Measurement
from pytest_llmperf.models import MetricComparison, Outcome, Verdict


@dataclass(frozen=True)
class GateRequest:
    target: Target
    profile: WorkloadProfile
    hardware: str
    baseline_root: Path
    update: bool
    repeat: int = 1
    confirm_reruns: int = 1
    max_failed_requests: int = 0
    tolerance_overrides: Mapping[str, float] | None = None
    gate: judging.GateSettings | None = None
    nodeid: str = ""
    # This machine; None compares nothing (callers that predate fingerprints).
    machine: fingerprint.Fingerprint | None = None
    # A profile with no comparable baseline for this machine: "record" it and pass (a first
    # run outside CI), or "fail" and say how to record it (CI).
    first_run: str = "fail"
    hardware_detected: bool = False  # no --hardware: ``hardware`` is this machine's family
    # --llmperf-sequential: decide run by run, at most this many runs (gate/sequential.py);
    # None: ``repeat`` runs and ``confirm_reruns``.
    sequential_budget: int | None = None
    # Per metric, how much a session's result moves between sessions on this machine (from
    # the history file): widens the sequential rule's interval; empty when unknown.
    between_sessions: Mapping[str, session_spread.SessionSpread] = field(default_factory=dict)

    @property
    def machine_key(self) -> str:
        return fingerprint.machine_key(self.machine) if self.machine else self.hardware


def gate_request(
    settings: Settings,
    *,
    target: Target,
    profile: WorkloadProfile,
    hardware: str,
    machine: fingerprint.Fingerprint | None,
    nodeid: str = "",
    tolerances: Sequence[Mapping[str, float] | None] = (),
    history: Sequence[Mapping[str, Any]] = (),
) -> GateRequest:
    """The gate of one profile as the session's settings ask for it. ``tolerances``: overrides
    from the weakest to the strongest (a test's marker, then ``check(tolerances=...)``);
    ``history``: the history file's lines as the session began (the sequential rule's
    between-session spread)."""
    merged = {metric: limit for layer in tolerances for metric, limit in (layer or {}).items()}
    spread: dict[str, session_spread.SessionSpread] = {}
    if settings.sequential_budget is not None and history:
        series = session_spread.Series(
            machine=fingerprint.machine_key(machine) if machine else None,
            engine=target.engine,
            variant=target.variant or target.engine,
            model=_model_key(target),
            profile=profile.name,
            num_prompts=profile.num_prompts,
        )
        spread = session_spread.session_spread(history, series)
    return GateRequest(
        target=target,
        profile=profile,
        hardware=hardware,
        baseline_root=settings.baseline_dir,
        update=settings.update_baselines,
        repeat=settings.repeat,
        confirm_reruns=settings.confirm_reruns,
        max_failed_requests=settings.max_failed_requests,
        tolerance_overrides=merged or None,
        gate=judging.GateSettings(tolerance_scale=settings.tolerance_scale),
        nodeid=nodeid,
        machine=machine,
        first_run=settings.first_run,
        hardware_detected=settings.hardware is None,
        sequential_budget=settings.sequential_budget,
        between_sessions=spread,
    )


def summarize(runs: Sequence[Measurement]) -> tuple[dict[str, Any], dict[str, float]]:
    """Median of every numeric metric over the runs, and the spread (CV, %) of each."""
    if len(runs) == 1:
        return dict(runs[0].metrics), {}
    center: dict[str, Any] = {}
    spread: dict[str, float] = {}
    for key, first in runs[0].metrics.items():
        values = [run.metrics.get(key) for run in runs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            numbers = [float(v) for v in values]  # type: ignore[arg-type]
            center[key] = statistics.median(numbers)
            cv = judging.cv_percent(numbers)
            if cv is not None:
                spread[key] = cv
        else:
            center[key] = first
    return center, spread


def baseline_file(request: GateRequest) -> Path:
    """The file of the hardware key the run names (see ``placement`` for this machine's own)."""
    return _placement(request).named


def _placement(request: GateRequest) -> placement.Placement:
    return placement.place(
        request.baseline_root,
        request.hardware,
        request.machine_key,
        _model_key(request.target),
        request.target.engine,
        detected=request.hardware_detected,
    )


def _variant_key(target: Target) -> str | None:
    # A variant named like its engine is that engine's default configuration (`profiles:`);
    # any other is stored as `variants.<name>` of the engine's file (docs/baselines.md).
    return None if target.variant in ("", target.engine) else target.variant


def _model_key(target: Target) -> str:
    # The embedded model lives in a cache folder whose name carries a content hash; its
    # baselines are keyed by its served name so they survive a cache location change.
    return target.served_model if target.embedded else target.model


def _too_many_failures(runs: Sequence[Measurement], budget: int) -> Verdict | None:
    worst = max(runs, key=lambda run: run.failed)
    if worst.failed <= budget:
        return None
    total = worst.metrics.get("completed", 0) + worst.failed
    reasons = "; ".join(dict.fromkeys(worst.errors)) or "no reason recorded"
    return Verdict(
        Outcome.REQUESTS_FAILED,
        notes=(
            f"{worst.failed} of {total} requests failed (allowed: {budget}, "
            f"--llmperf-max-failed); first reasons: {reasons}",
        ),
    )


def _insufficient(runs: Sequence[Measurement], gated: Sequence[str]) -> Verdict | None:
    """A gated latency with no samples is no evidence either way (vLLM would report 0)."""
    if not all(run.metrics.get("completed") for run in runs):
        return Verdict(Outcome.INSUFFICIENT_DATA, notes=("no request completed",))
    for run in runs:
        missing = missing_samples(run.samples, gated)
        if missing:
            return Verdict(Outcome.INSUFFICIENT_DATA, notes=(missing,))
    return None


def run_gate(
    request: GateRequest,
    measure_once: Callable[[], Measurement],
) -> ProfileResult:
    """Measure ``repeat`` times, then record or judge; a regression is measured again before
    it counts (``confirm_reruns``), because one noisy run must not fail a pull request."""
    places = _placement(request)

    def measure_round(count: int = request.repeat) -> list[Measurement]:
        return [measure_once() for _ in range(count)]

    # Read the baseline before measuring: a malformed file fails the test at once, not
    # after minutes of load whose numbers could not be compared or recorded anyway.
    variant = _variant_key(request.target)
    for candidate in dict.fromkeys((places.named, places.own)):
        check_model(candidate, _model_key(request.target))
    found = placement.find(places, request.profile.name, variant, request.machine)
    entry, path = found.entry, found.path
    started = time.monotonic()
    # The sequential rule starts from one run; recording takes the repeats asked for. A sweep
    # is judged by its curve's notes as well, which the usual rule adds: it keeps that rule.
    budget = (
        None if request.update or request.profile.sweep is not None else request.sequential_budget
    )
    runs = measure_round(request.repeat if budget is None else 1)
    center, spread = summarize(runs)
    workload = runs[0].workload
    notes = [note for run in runs for note in run.notes]
    gated = list((entry.tolerances if entry else None) or store.DEFAULT_TOLERANCES)
    verdict = _too_many_failures(runs, request.max_failed_requests) or _insufficient(runs, gated)
    changed = _machine_changes(entry, request.machine)
    if verdict is None and (request.update or entry is None or changed):
        verdict, path = _record_or_refuse(
            request, places, entry, changed, center, spread, workload, runs, path
        )
    if verdict is None and budget is not None and entry is not None:
        verdict, runs = _judge_sequentially(
            request, entry, workload, path, runs, measure_once, started, budget
        )
        center, spread = summarize(runs)
        verdict = _unknown_machine(request, entry, verdict)
    if verdict is None:
        verdict = _judge(request, entry, center, spread, workload, path)
        reruns = 0
        while verdict.outcome is Outcome.REGRESSED and reruns < request.confirm_reruns:
            reruns += 1
            again = measure_round()
            again_center, again_spread = summarize(again)
            second = _judge(request, entry, again_center, again_spread, workload, path)
            if second.outcome is not Outcome.REGRESSED:
                verdict = replace(
                    second,
                    notes=(
                        *second.notes,
                        "a first measurement looked regressed; the rerun did not confirm it",
                    ),
                )
                center, spread, runs = again_center, again_spread, again
            else:
                verdict = replace(second, confirmed=True)
                center, spread, runs = again_center, again_spread, again
        verdict = _unknown_machine(request, entry, verdict)
        if runs[-1].sweep and verdict.comparisons:
            steps = regression_notes(entry.sweep if entry else None, runs[-1].sweep)
            verdict = replace(verdict, notes=(*verdict.notes, *steps))
    return ProfileResult(
        nodeid=request.nodeid,
        engine=request.target.engine,
        profile=request.profile.name,
        hardware=request.hardware,
        model=_model_key(request.target),
        metrics=center,
        workload=workload,
        verdict=verdict,
        engine_version=request.target.version,
        command=request.target.command,
        baseline_file=str(path),
        runs=len(runs),
        spread=spread,
        errors=runs[-1].errors,
        notes=tuple(dict.fromkeys([*request.target.notes, *notes])),
        variant=request.target.variant,
        series=runs[-1].series,
        machine=_machine_record(request),
        baseline_machine=entry.machine if entry is not None else None,
        sweep=runs[-1].sweep,
        baseline_sweep=entry.sweep if entry is not None else None,
    )


_UNKNOWN_MACHINE = (
    "the baseline does not say which machine measured it (recorded before fingerprints): "
    "compared as it is; re-record it on its machine with --update-baselines to add one"
)


def _unknown_machine(
    request: GateRequest, entry: store.BaselineEntry | None, verdict: Verdict
) -> Verdict:
    """A judged verdict, with the note that the baseline names no machine where it does not."""
    if not verdict.comparisons or entry is None:
        return verdict
    if entry.machine is not None or request.machine is None:
        return verdict
    return replace(verdict, notes=(*verdict.notes, _UNKNOWN_MACHINE))


def _machine_changes(
    entry: store.BaselineEntry | None, machine: fingerprint.Fingerprint | None
) -> list[str]:
    if entry is None or entry.machine is None or machine is None:
        return []
    return fingerprint.differences(entry.machine, machine)


def _machine_record(request: GateRequest) -> dict[str, Any] | None:
    if request.machine is None:
        return None
    from pytest_llmperf import __version__

    return request.machine.with_versions(plugin=__version__).as_dict()


def _record_or_refuse(
    request: GateRequest,
    places: placement.Placement,
    entry: store.BaselineEntry | None,
    changed: list[str],
    center: Mapping[str, Any],
    spread: Mapping[str, float],
    workload: Mapping[str, Any],
    runs: Sequence[Measurement],
    found_at: Path,
) -> tuple[Verdict | None, Path]:
    """Write this machine's numbers (``--update-baselines``, or a first run outside CI), or
    say why the run has nothing to compare with. ``None``: judge as usual."""
    first = not request.update
    destination = placement.destination(places, request.machine)
    # Nothing is written in CI's first run, nor where the only file this machine may write
    # holds another machine's entries.
    if destination is None or (first and request.first_run != "record"):
        return _not_recorded(request, entry, changed, center, found_at, destination), found_at
    new_entry = _entry(request, center, spread, workload, runs)
    if first:
        new_entry["tolerances"] = first_run_tolerances(entry.tolerances if entry else None)
    elif entry is not None and destination != found_at and entry.tolerances:
        # A first entry in this machine's file starts from the tolerances chosen for the
        # same profile elsewhere: they say how noisy this workload is (docs/baselines.md).
        new_entry["tolerances"] = dict(entry.tolerances)
    _write_entry(request, destination, new_entry)
    if not first:
        return Verdict(Outcome.RECORDED, notes=(f"recorded in {destination}",)), destination
    rows = _informative(entry, center) if changed else ()
    where = _machine_words(request, changed, entry, found_at)
    note = (
        f"first run on this machine ({where}): recorded in {destination} with tolerances of "
        f"at least {FIRST_RUN_TOLERANCE_FLOOR:g} %. Review and commit it: the next runs on "
        f"this machine are gated against it; tighten the tolerances once repeated runs show "
        f"this machine's noise (docs/baselines.md)"
    )
    return Verdict(Outcome.RECORDED, comparisons=rows, notes=(note,), first_run=True), destination


# One first run is one machine-hour. On a shared two-core VM the same suite drifted by up to
# 43 % in throughput and 42 % in TPOT within twenty minutes (docs/noise.md, "A new machine's
# first run"), so a bootstrap entry gated at the shipped 20-35 % cried wolf in two runs of
# ten. 50 % absorbs that drift and still fails a real collapse (one sequence at a time costs
# medium and long 75-80 %). A reviewer tightens the entry once repeats show the machine's noise.
FIRST_RUN_TOLERANCE_FLOOR = 50.0


def first_run_tolerances(copied: Mapping[str, float] | None) -> dict[str, float]:
    """The tolerances of an entry a first run records: the same profile's tolerances from the
    file it was compared with (or the defaults), none below ``FIRST_RUN_TOLERANCE_FLOOR``."""
    source = copied or store.DEFAULT_TOLERANCES
    return {metric: max(value, FIRST_RUN_TOLERANCE_FLOOR) for metric, value in source.items()}


def _machine_words(
    request: GateRequest,
    changed: list[str],
    entry: store.BaselineEntry | None,
    found_at: Path,
) -> str:
    here = fingerprint.describe(_machine_record(request) or {})
    if changed:
        return f"{here}; {found_at} was measured on another machine: " + "; ".join(changed)
    if entry is None:
        return f"{here}; no baseline for this profile in {found_at}"
    return here


def _informative(
    entry: store.BaselineEntry | None, center: Mapping[str, Any]
) -> tuple[MetricComparison, ...]:
    """How far this machine is from another machine's numbers: shown, never judged."""
    if entry is None:
        return ()
    rows = judging.compare(entry, center)
    return tuple(replace(row, status="info", threshold_pct=None) for row in rows)


def _not_recorded(
    request: GateRequest,
    entry: store.BaselineEntry | None,
    changed: list[str],
    center: Mapping[str, Any],
    found_at: Path,
    destination: Path | None,
) -> Verdict:
    """Nothing to compare with, and nothing written: say how this machine's numbers get
    recorded (``destination``), or, when no file may take them, that it needs a key."""
    if destination is None:
        how = (
            f"{found_at} holds another machine's entries under the key this machine would "
            f"use ({request.machine_key}); nothing was written. Record this machine under a "
            f"key of its own: --hardware={request.machine_key}-<name> --update-baselines"
        )
    else:
        keep = f"; {found_at} stays as it is" if destination != found_at and entry else ""
        how = "record this machine's numbers with --update-baselines (they go to "
        how += f"{destination}{keep})"
    if not changed:
        return Verdict(
            Outcome.NO_BASELINE, notes=(f"no baseline for this profile in {found_at}", how)
        )
    where = _machine_words(request, changed, entry, found_at)
    return Verdict(
        Outcome.MACHINE_CHANGED,
        comparisons=_informative(entry, center),
        notes=(f"measured on another machine than the baseline: {where}", how),
    )


def _write_entry(request: GateRequest, path: Path, entry: dict[str, Any]) -> None:
    variant = _variant_key(request.target)
    store.record_entry(
        path,
        request.profile.name,
        entry,
        header={
            "hardware": path.parent.parent.name,
            "model": _model_key(request.target),
            "engine": request.target.engine,
        },
        variant=variant,
        variant_header={
            "command": request.target.command
            if not request.target.embedded
            else _portable_command(request.target),
            "model": _model_key(request.target),
            "engine_version": request.target.version,
        },
    )


def _judge(
    request: GateRequest,
    entry: store.BaselineEntry | None,
    center: Mapping[str, Any],
    spread: Mapping[str, float],
    workload: Mapping[str, Any],
    path: Path,
    runs: int | None = None,
) -> Verdict:
    return judging.judge(
        entry,
        center,
        workload,
        engine_version=request.target.version,
        baseline_file=path,
        tolerance_overrides=request.tolerance_overrides,
        measured_spread=spread,
        measured_runs=request.repeat if runs is None else runs,
        gate=request.gate,
    )


def _judge_sequentially(
    request: GateRequest,
    entry: store.BaselineEntry,
    workload: Mapping[str, Any],
    path: Path,
    runs: list[Measurement],
    measure_once: Callable[[], Measurement],
    started: float,
    budget: int,
) -> tuple[Verdict, list[Measurement]]:
    """Measure one run at a time until the sequential rule decides or ``budget`` runs are
    spent (gate/sequential.py). A workload or baseline state the rule does not apply to is
    judged after the first run; a budget spent undecided, by the usual rule on all runs."""
    gate = request.gate or judging.GateSettings()
    first = _judge(request, entry, *summarize(runs), workload, path, runs=len(runs))
    if not first.comparisons:  # no-baseline, workload-changed, ...: nothing to decide
        return first, runs
    rule = sequential.StoredRule(budget=budget)
    scale = gate.tolerance_scale
    tolerances = {
        metric: limit * scale
        for metric, limit in judging.gated_tolerances(
            entry, request.tolerance_overrides, gate
        ).items()
    }
    between = request.between_sessions
    baselines = {
        metric: sequential.Baseline(
            value,
            entry.spread.get(metric),
            entry.runs,
            between[metric].sd if metric in between else None,
        )
        for metric, value in entry.metrics.items()
    }
    while True:
        state, decisions = sequential.decide(
            baselines, [run.metrics for run in runs], tolerances, rule, gate.floor_ms
        )
        if state is not None or len(runs) >= rule.budget:
            break
        runs.append(measure_once())
        failing = _too_many_failures(runs[-1:], request.max_failed_requests)
        failing = failing or _insufficient(runs[-1:], list(tolerances))
        if failing is not None:
            return failing, runs
    minutes = (time.monotonic() - started) / 60.0
    center, spread = summarize(runs)
    judged = _judge(request, entry, center, spread, workload, path, runs=len(runs))
    words = (
        f"sequential rule (--llmperf-sequential {rule.budget}): {len(runs)} run(s), "
        f"{minutes:.1f} min; {sequential.describe(decisions)}"
        f"{_between_words(between, tolerances, baselines)}"
    )
    if state in (None, paired.INCONCLUSIVE):
        note = f"{words}; undecided at the budget, judged by the usual rule on the median"
        return replace(judged, notes=(*judged.notes, note)), runs
    by_metric = {decision.metric: decision for decision in decisions}
    rows = tuple(_sequential_row(row, by_metric.get(row.metric)) for row in judged.comparisons)
    notes = [note for note in judged.notes if not note.startswith("improved beyond")]
    return judging.verdict_from_rows(rows, [*notes, words]), runs


_ROW_STATUS = {paired.SAME: "pass", paired.REGRESSED: "regressed", paired.IMPROVED: "improved"}


def _between_words(
    between: Mapping[str, session_spread.SessionSpread],
    gated: Mapping[str, float],
    baselines: Mapping[str, sequential.Baseline],
) -> str:
    """What the history added to the intervals, for the verdict's note."""
    used = [(metric, between[metric]) for metric in gated if metric in between]
    if not used:
        return (
            f"; no between-session spread (--llmperf-history with {session_spread.MIN_SESSIONS}"
            "+ sessions of this profile): a slower phase of the machine reads as a regression"
        )
    parts = ", ".join(f"{m} {math.expm1(s.sd) * 100:.1f}%" for m, s in used)
    words = f"; between-session spread from {used[0][1].sessions} history sessions: {parts}"
    for metric, spread in used:
        off = spread.baseline_off(baselines[metric].value) if metric in baselines else None
        if off is not None:
            words += (
                f"; the baseline's {metric} lies {off:+.0f}% from the median of those sessions, "
                f"beyond their spread: it was recorded in an unusual phase of the machine, "
                f"consider recording it again (--update-baselines)"
            )
    return words


def _sequential_row(
    row: MetricComparison, decision: paired.MetricDecision | None
) -> MetricComparison:
    """A gated row as the sequential rule decided it; other rows as they are."""
    if decision is None or decision.status not in _ROW_STATUS or row.tolerance_pct is None:
        return row
    return replace(
        row,
        status=_ROW_STATUS[decision.status],
        threshold_pct=decision.tolerance_pct,
        decided_by="sequential",
    )


def _entry(
    request: GateRequest,
    center: Mapping[str, Any],
    spread: Mapping[str, float],
    workload: Mapping[str, Any],
    runs: Sequence[Measurement],
) -> dict[str, Any]:
    numeric = {
        key: value
        for key, value in center.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value is not None
    }
    entry: dict[str, Any] = {
        "status": "ok",
        "recorded": datetime.date.today().isoformat(),
        "engine_version": request.target.version,
        "command": request.target.command
        if not request.target.embedded
        else _portable_command(request.target),
        "runs": len(runs),
        "workload": dict(workload),
        "metrics": numeric,
    }
    machine = _machine_record(request)
    if machine is not None:
        entry["machine"] = machine
    if spread:
        entry["spread"] = {key: spread[key] for key in sorted(spread) if key in numeric}
    if runs[-1].sweep:  # the whole curve, and the capacity metrics gated by default
        entry["sweep"] = runs[-1].sweep
        entry["tolerances"] = dict(SWEEP_TOLERANCES)
    return entry


def _portable_command(target: Target) -> str:
    # The embedded model's folder and port differ per machine and run; record the shape.
    parts = target.command.split(" ")
    out = []
    skip_next = False
    for index, part in enumerate(parts):
        if skip_next:
            skip_next = False
            continue
        if part in ("--port", "--model") and index + 1 < len(parts):
            out.append(f"{part} {'<port>' if part == '--port' else '<tiny-qwen3>'}")
            skip_next = True
            continue
        if index == 0:
            out.append("python")
            continue
        out.append(part)
    return " ".join(out)
