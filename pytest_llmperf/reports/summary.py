"""The end of a session: summary lines for the terminal and the files the user asked for."""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf import redact
from pytest_llmperf.atomic import append_text, write_atomically
from pytest_llmperf.config import Settings
from pytest_llmperf.errors import LLMPerfError
from pytest_llmperf.gate.ledger import Ledger, ProfileResult
from pytest_llmperf.reports.tables import SessionView, VariantRow, variant_table, verdict_summary

# The one-line summary of a test: the seeds' two KPIs and the first-token latency.
COMPACT_LABELS = {
    "total_token_throughput": "total {:,.1f} tok/s",
    "mean_ttft_ms": "TTFT {:.1f} ms",
    "mean_tpot_ms": "TPOT {:.2f} ms",
    # The engine's own count, where its metrics page was read (measure/engine_metrics).
    "engine_prefix_cache_hit_rate": "prefix cache hits {:.1f} %",
}


def _metric(result: ProfileResult, key: str) -> float | None:
    value = result.metrics.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def compact_line(result: ProfileResult) -> str:
    parts = [f"{result.label}/{result.profile}:"]
    for key, label in COMPACT_LABELS.items():
        value = _metric(result, key)
        if value is not None:
            parts.append(label.format(value))
    parts.append(f"-> {verdict_summary(result.verdict)}")
    return " ".join(parts)


def configurations(ledger: Ledger, settings: Settings | None = None) -> list[str]:
    """The configurations the session ran or tried, in the order the user gave them."""
    seen = [r.label for r in ledger.results] + list(ledger.failed_starts)
    declared = [v.name for v in settings.variants] if settings is not None else []
    return [name for name in dict.fromkeys([*declared, *seen]) if name in seen]


def reference_name(ledger: Ledger, settings: Settings | None = None) -> str | None:
    names = configurations(ledger, settings)
    if settings is not None:
        from pytest_llmperf.variants import reference_of

        chosen = reference_of(settings.variants)
        if chosen in names:
            return chosen
    return names[0] if names else None


def first_run_lines(ledger: Ledger) -> list[str]:
    """Say plainly that numbers were recorded rather than judged, and where they went."""
    recorded = [r for r in ledger.results if r.verdict.first_run]
    if not recorded:
        return []
    files: dict[str, list[str]] = {}
    for result in recorded:
        files.setdefault(result.baseline_file, []).append(result.profile)
    lines = [
        "",
        f"first run on this machine: {len(recorded)} profile(s) had no baseline measured on "
        f"a machine like this one, so their numbers were recorded, not judged:",
    ]
    lines.extend(f"  {path} ({', '.join(profiles)})" for path, profiles in files.items())
    lines.append(
        "  review and commit them: the next runs on this machine are gated against them "
        "(in CI, where CI is set, a missing baseline fails instead)"
    )
    return lines


def terminal_lines(ledger: Ledger, *, verbose: bool, settings: Settings | None = None) -> list[str]:
    from pytest_llmperf.reports.tables import machine_lines

    lines = [compact_line(result) for result in ledger.results]
    for name, error in ledger.failed_starts.items():
        lines.append(f"{name}: failed to start: {error}")
    lines.extend(first_run_lines(ledger))
    if any(r.machines_differ for r in ledger.results):
        lines.append("")
        lines.extend(machine_lines(ledger.results))
    from pytest_llmperf.reports.sweep_table import sweep_tables

    for name, table in sweep_tables(ledger.results):
        lines.extend(["", f"{name}: sweep", table.text()])
    if verbose:
        from pytest_llmperf.reports.vllm_block import format_result_block

        for result in ledger.results:
            lines.append("")
            lines.append(f"{result.label}/{result.profile}")
            lines.append(
                format_result_block(
                    result.metrics,
                    max_concurrency=result.workload.get("max_concurrency"),
                    request_rate=_rate(result.workload.get("request_rate")),
                    errors=result.errors,
                )
            )
    from pytest_llmperf.reports import ab_report

    lines.extend(ab_report.terminal_lines(ledger.results))
    names = configurations(ledger, settings)
    if len(names) > 1 and not any(r.ab for r in ledger.results):
        reference = reference_name(ledger, settings)
        lines.append("")
        lines.append(f"comparison (total token throughput and mean TPOT against {reference}):")
        lines.append(variant_table(comparison_rows(ledger, names), reference).text())
    return lines


def comparison_rows(ledger: Ledger, names: list[str]) -> list[VariantRow]:
    """The seeds' table rows: per profile, each configuration's KPIs, or its start failure."""
    rows = []
    profiles = list(dict.fromkeys(r.profile for r in ledger.results))
    for profile in profiles:
        for name in names:
            found = [r for r in ledger.results if r.label == name and r.profile == profile]
            if found:
                rows.append(
                    VariantRow(
                        name,
                        profile,
                        _metric(found[-1], "total_token_throughput"),
                        _metric(found[-1], "mean_tpot_ms"),
                    )
                )
            elif name in ledger.failed_starts:
                rows.append(VariantRow(name, profile, None, None, ledger.failed_starts[name]))
    if not profiles:  # every configuration failed to start
        rows = [VariantRow(n, "-", None, None, e) for n, e in ledger.failed_starts.items()]
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
        "variant": result.label,
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
        "machine": result.machine,
        "baseline_machine": result.baseline_machine,
        "first_run": verdict.first_run,
        "series": result.series,
        "ab": result.ab,
    }


def session_document(
    ledger: Ledger,
    *,
    hardware: str,
    root: Path,
    created: str | None = None,
    git_commit: str | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    from pytest_llmperf import __version__

    document: dict[str, Any] = _jsonable(
        {
            "plugin_version": __version__,
            "created": created or _now(),
            "hardware": hardware,
            "machine": next((r.machine for r in ledger.results if r.machine), None),
            "git_commit": git_commit if git_commit is not None else _git_commit(root),
            "reference": reference,
            "failed_starts": ledger.failed_starts,
            "results": [result_record(r) for r in ledger.results],
        }
    )
    return document


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _write(path: Path, text: str) -> None:
    write_atomically(path, redact.text(text))


def markdown_target(settings: Settings, environ: Mapping[str, str]) -> tuple[Path, bool] | None:
    """Where the Markdown summary goes and whether to append: the option's path (replaced),
    else GitHub's job summary file (appended to, as GitHub expects)."""
    if settings.summary_path is not None:
        return settings.summary_path, False
    step_summary = environ.get("GITHUB_STEP_SUMMARY")
    return (Path(step_summary), True) if step_summary else None


@contextlib.contextmanager
def _reported(ledger: Ledger, what: str, path: Path) -> Iterator[None]:
    """Write one output; a failure (a lock timeout, a full disk, a refused link) is kept in
    the ledger for the terminal summary instead of ending the session in an INTERNALERROR
    that skips the outputs after it."""
    try:
        yield
    except (LLMPerfError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        ledger.output_errors.append(f"{what} was not written to {path}: {reason}")


def write_outputs(
    ledger: Ledger,
    settings: Settings,
    *,
    hardware: str,
    environ: Mapping[str, str] | None = None,
    root: Path | None = None,
) -> list[Path]:
    """Write every file the user asked for; returns their paths."""
    from pytest_llmperf import __version__

    if not (ledger.results or ledger.failed_starts):
        return []
    root = root or Path.cwd()
    created = _now()
    commit = _git_commit(root)
    names = configurations(ledger, settings)
    reference = reference_name(ledger, settings)
    comparison = comparison_rows(ledger, names) if len(names) > 1 else []
    view = SessionView(ledger, hardware, comparison, reference)
    written: list[Path] = []
    if settings.json_path is not None:
        with _reported(ledger, "the results JSON", settings.json_path):
            document = session_document(
                ledger,
                hardware=hardware,
                root=root,
                created=created,
                git_commit=commit,
                reference=reference,
            )
            _write(settings.json_path, json.dumps(document, indent=2) + "\n")
            written.append(settings.json_path)
    target = markdown_target(settings, os.environ if environ is None else environ)
    if target is not None:
        with _reported(ledger, "the Markdown summary", target[0]):
            from pytest_llmperf.reports.markdown import session_markdown

            path, append = target
            text = session_markdown(view)
            if append:
                append_text(path, redact.text(text) + "\n")
            else:
                _write(path, text + "\n")
            written.append(path)
    history: list[dict[str, Any]] = []
    if settings.history_path is not None:
        with _reported(ledger, "the history", settings.history_path):
            from pytest_llmperf.reports import history as history_file

            history_file.append(
                settings.history_path,
                [
                    history_file.record(
                        r, timestamp=created, git_commit=commit, plugin_version=__version__
                    )
                    for r in ledger.results
                ],
            )
            history = history_file.read(settings.history_path)
            written.append(settings.history_path)
    if settings.html_path is not None:
        with _reported(ledger, "the HTML report", settings.html_path):
            from pytest_llmperf.reports import html_report

            page = html_report.render(
                view,
                history=history,
                meta={
                    "created": created,
                    "plugin": __version__,
                    "git commit": commit,
                },
            )
            _write(settings.html_path, page)
            written.append(settings.html_path)
    return written
