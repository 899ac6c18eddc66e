"""The end of a session: summary lines for the terminal and the files the user asked for."""

from __future__ import annotations

import datetime
import json
import math
import subprocess
from pathlib import Path
from typing import Any

from pytest_llmperf.ledger import Ledger, ProfileResult
from pytest_llmperf.settings import Settings
from pytest_llmperf.tables import EngineRow, engine_comparison

KEY_METRICS = ("total_token_throughput", "mean_ttft_ms", "mean_tpot_ms")


def _metric(result: ProfileResult, key: str) -> float | None:
    value = result.metrics.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def compact_line(result: ProfileResult) -> str:
    parts = [f"{result.engine}/{result.profile}:"]
    labels = {
        "total_token_throughput": "total {:,.1f} tok/s",
        "mean_ttft_ms": "TTFT {:.1f} ms",
        "mean_tpot_ms": "TPOT {:.2f} ms",
    }
    for key in KEY_METRICS:
        value = _metric(result, key)
        if value is not None:
            parts.append(labels[key].format(value))
    verdict = result.verdict.outcome.value
    gated = [c for c in result.verdict.comparisons if c.tolerance_pct is not None]
    if gated:
        verdict += " (" + ", ".join(f"{c.metric} {c.change_pct:+.1f}%" for c in gated) + ")"
    parts.append(f"-> {verdict}")
    return " ".join(parts)


def terminal_lines(ledger: Ledger, *, verbose: bool) -> list[str]:
    lines = [compact_line(result) for result in ledger.results]
    for engine, error in ledger.failed_starts.items():
        lines.append(f"{engine}: failed to start: {error}")
    if verbose:
        from pytest_llmperf.report import format_result_block

        for result in ledger.results:
            lines.append("")
            lines.append(f"{result.engine}/{result.profile}")
            lines.append(
                format_result_block(
                    result.metrics,
                    max_concurrency=result.workload.get("max_concurrency"),
                    request_rate=_rate(result.workload.get("request_rate")),
                    errors=result.errors,
                )
            )
    engines = list(dict.fromkeys([r.engine for r in ledger.results] + list(ledger.failed_starts)))
    if len(engines) > 1:
        lines.append("")
        lines.append("engine comparison (total token throughput against the first engine):")
        lines.append(engine_comparison(comparison_rows(ledger, engines)))
    return lines


def comparison_rows(ledger: Ledger, engines: list[str]) -> list[EngineRow]:
    rows = []
    profiles = list(dict.fromkeys(r.profile for r in ledger.results))
    for profile in profiles:
        for engine in engines:
            found = [r for r in ledger.results if r.engine == engine and r.profile == profile]
            if found:
                rows.append(
                    EngineRow(
                        engine,
                        profile,
                        _metric(found[-1], "total_token_throughput"),
                        _metric(found[-1], "mean_tpot_ms"),
                    )
                )
            elif engine in ledger.failed_starts:
                rows.append(EngineRow(engine, profile, None, None, ledger.failed_starts[engine]))
    return rows


def _rate(value: Any) -> float:
    if value in (None, "inf"):
        return math.inf
    return float(value)


def _git_commit(cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def result_record(result: ProfileResult) -> dict[str, Any]:
    verdict = result.verdict
    return {
        "test": result.nodeid,
        "engine": result.engine,
        "profile": result.profile,
        "hardware": result.hardware,
        "model": result.model,
        "engine_version": result.engine_version,
        "command": result.command,
        "outcome": verdict.outcome.value,
        "confirmed": verdict.confirmed,
        "notes": list(verdict.notes) + list(result.notes),
        "runs": result.runs,
        "workload": result.workload,
        "metrics": result.metrics,
        "spread_pct": result.spread,
        "comparisons": [
            {
                "metric": c.metric,
                "baseline": c.baseline,
                "measured": c.measured,
                "change_pct": c.change_pct,
                "tolerance_pct": c.tolerance_pct,
                "threshold_pct": c.threshold_pct,
                "decided_by": c.decided_by,
                "status": c.status,
            }
            for c in verdict.comparisons
        ],
        "errors": list(result.errors),
        "baseline_file": result.baseline_file,
    }


def session_document(ledger: Ledger, *, hardware: str, root: Path) -> dict[str, Any]:
    from pytest_llmperf import __version__

    document: dict[str, Any] = _jsonable(
        {
            "plugin_version": __version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hardware": hardware,
            "git_commit": _git_commit(root),
            "failed_starts": ledger.failed_starts,
            "results": [result_record(r) for r in ledger.results],
        }
    )
    return document


def write_outputs(ledger: Ledger, settings: Settings, *, hardware: str) -> None:
    from pytest_llmperf.baseline import atomic_write

    if settings.json_path is not None and (ledger.results or ledger.failed_starts):
        document = session_document(ledger, hardware=hardware, root=Path.cwd())
        atomic_write(settings.json_path, json.dumps(document, indent=2) + "\n")
