"""The gate of one profile: measure (repeatedly), judge against the baseline, confirm, record.

pytest-free: the plugin turns the ``ProfileResult`` this returns into a pass or a failure.
"""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_llmperf import baseline
from pytest_llmperf.ledger import ProfileResult
from pytest_llmperf.modelkey import check_model
from pytest_llmperf.models import Outcome, Verdict
from pytest_llmperf.profiles import WorkloadProfile
from pytest_llmperf.runner import Measurement, Target

# Metrics whose absence of samples makes a gated comparison meaningless.
SAMPLE_KEYS = {"ttft": "mean_ttft_ms", "tpot": "mean_tpot_ms", "itl": "mean_itl_ms"}


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
    gate: baseline.GateSettings | None = None
    nodeid: str = ""


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
            mean = statistics.fmean(numbers)
            if mean:
                spread[key] = statistics.stdev(numbers) / abs(mean) * 100.0
        else:
            center[key] = first
    return center, spread


def baseline_file(request: GateRequest) -> Path:
    return baseline.baseline_path(
        request.baseline_root, request.hardware, _model_key(request.target), request.target.engine
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
    for kind, key in SAMPLE_KEYS.items():
        if key in gated and any(run.samples.get(kind, 1) == 0 for run in runs):
            return Verdict(
                Outcome.INSUFFICIENT_DATA,
                notes=(f"{key} has no samples (no request produced the chunks {kind} needs)",),
            )
    return None


def run_gate(
    request: GateRequest,
    measure_once: Callable[[], Measurement],
) -> ProfileResult:
    """Measure ``repeat`` times, then record or judge; a regression is measured again before
    it counts (``confirm_reruns``), because one noisy run must not fail a pull request."""
    path = baseline_file(request)

    def measure_round() -> list[Measurement]:
        return [measure_once() for _ in range(request.repeat)]

    # Read the baseline before measuring: a malformed file fails the test at once, not
    # after minutes of load whose numbers could not be compared or recorded anyway.
    variant = _variant_key(request.target)
    check_model(path, _model_key(request.target))
    entry = baseline.load_entry(path, request.profile.name, variant)
    runs = measure_round()
    center, spread = summarize(runs)
    workload = runs[0].workload
    notes = [note for run in runs for note in run.notes]
    gated = list((entry.tolerances if entry else None) or baseline.DEFAULT_TOLERANCES)
    verdict = _too_many_failures(runs, request.max_failed_requests) or _insufficient(runs, gated)
    if verdict is None and request.update:
        baseline.record_entry(
            path,
            request.profile.name,
            _entry(request, center, spread, workload, len(runs)),
            header={
                "hardware": request.hardware,
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
        verdict = Verdict(Outcome.RECORDED, notes=(f"recorded in {path}",))
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
    )


def _judge(
    request: GateRequest,
    entry: baseline.BaselineEntry | None,
    center: Mapping[str, Any],
    spread: Mapping[str, float],
    workload: Mapping[str, Any],
    path: Path,
) -> Verdict:
    return baseline.judge(
        entry,
        center,
        workload,
        engine_version=request.target.version,
        baseline_file=path,
        tolerance_overrides=request.tolerance_overrides,
        measured_spread=spread,
        measured_runs=request.repeat,
        gate=request.gate,
    )


def _entry(
    request: GateRequest,
    center: Mapping[str, Any],
    spread: Mapping[str, float],
    workload: Mapping[str, Any],
    runs: int,
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
        "runs": runs,
        "workload": dict(workload),
        "metrics": numeric,
    }
    if spread:
        entry["spread"] = {key: spread[key] for key in sorted(spread) if key in numeric}
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
