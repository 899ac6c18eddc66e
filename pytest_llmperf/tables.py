"""Pure renderers of the plugin's own tables: regression verdicts and engine comparisons.

(vLLM's own layouts, the result block and the result JSON, live in ``report.py``.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.models import MetricComparison, Outcome, Verdict


def _number(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:,.2f}"


def _change(row: MetricComparison) -> str:
    change = row.change_pct
    return "n/a" if math.isinf(change) else f"{change:+.1f}%"


def _limit(row: MetricComparison) -> str:
    if row.tolerance_pct is None:
        return "-"
    text = f"±{row.tolerance_pct:g}%"
    if row.threshold_pct is not None and row.decided_by == "spread":
        text += f" (noise ±{row.threshold_pct:.1f}%)"
    elif row.threshold_pct is not None and not math.isclose(row.threshold_pct, row.tolerance_pct):
        text += f" (x scale: ±{row.threshold_pct:.1f}%)"
    return text


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def comparison_table(comparisons: Sequence[MetricComparison], *, gated_only: bool = False) -> str:
    """metric | baseline | measured | change | tolerance | verdict, gated metrics first."""
    header = ["metric", "baseline", "measured", "change", "tolerance", "verdict"]
    rows = [
        [
            row.metric,
            _number(row.baseline),
            _number(row.measured),
            _change(row),
            _limit(row),
            row.status.upper() if row.status != "info" else "info",
        ]
        for row in comparisons
        if not gated_only or row.tolerance_pct is not None
    ]
    return "\n".join(_grid(header, rows))


def verdict_message(
    verdict: Verdict,
    *,
    profile: str,
    engine: str,
    baseline_file: str,
    accept_command: str,
) -> str:
    """The failure text of a test: what happened, the table, and how to accept the numbers."""
    title = {
        Outcome.REGRESSED: "regressed",
        Outcome.IMPROVED: "improved beyond tolerance",
        Outcome.NO_BASELINE: "has no baseline",
        Outcome.WORKLOAD_CHANGED: "ran a workload that differs from its baseline",
        Outcome.INSUFFICIENT_DATA: "has insufficient data",
        Outcome.PASS: "passed",
        Outcome.RECORDED: "was recorded",
    }[verdict.outcome]
    lines = [f"llmperf: profile {profile!r} on {engine} {title} (baseline: {baseline_file})"]
    if verdict.outcome is Outcome.REGRESSED and verdict.confirmed:
        lines.append("confirmed: a rerun measured the regression again")
    lines.extend(f"note: {note}" for note in verdict.notes)
    if verdict.comparisons:
        lines.append("")
        lines.append(comparison_table(verdict.comparisons))
    lines.append("")
    lines.append(f"to accept the new numbers: {accept_command}")
    return "\n".join(lines)


@dataclass(frozen=True)
class EngineRow:
    engine: str
    profile: str
    total_token_throughput: float | None
    mean_tpot_ms: float | None
    error: str | None = None


def engine_comparison(rows: Sequence[EngineRow]) -> str:
    """The seeds' engine-selection table: per profile, each engine's total tok/s and mean TPOT,
    and the change of throughput against the first engine."""
    if not rows:
        return ""
    reference_engine = rows[0].engine
    reference = {
        row.profile: row.total_token_throughput for row in rows if row.engine == reference_engine
    }
    header = ["profile", "engine", "total tok/s", f"vs {reference_engine}", "mean TPOT (ms)"]
    body = []
    profiles = list(dict.fromkeys(row.profile for row in rows))
    for profile in profiles:
        for row in (r for r in rows if r.profile == profile):
            if row.error is not None or row.total_token_throughput is None:
                body.append([profile, row.engine, "failed", row.error or "", "-"])
                continue
            base = reference.get(profile)
            change = (
                f"{(row.total_token_throughput - base) / base * 100:+.1f}%"
                if base and row.engine != reference_engine
                else "-"
            )
            tpot = "-" if row.mean_tpot_ms is None else f"{row.mean_tpot_ms:.2f}"
            body.append([profile, row.engine, f"{row.total_token_throughput:.2f}", change, tpot])
    return "\n".join(_grid(header, body))
