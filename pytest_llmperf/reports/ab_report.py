"""The A/B experiment of a profile (``ProfileResult.ab``, gate/ab.py) as tables and a plot:
per metric A, B, the median ratio B/A, its interval, the tolerance, the verdict and the
pairs used; the plot shows each pair's ratio against the tolerance band."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.reports.tables import Table


def _number(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:,.2f}"


def _ratio(value: Any) -> str:
    if not isinstance(value, (int, float)) or math.isinf(value) or math.isnan(value):
        return "-"
    return f"{value:.3f}"


def _interval(row: Mapping[str, Any]) -> str:
    low, high = row.get("ratio_low"), row.get("ratio_high")
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
        return "-"
    if math.isinf(low) or math.isinf(high) or low == 0.0:
        return "unbounded (too few pairs)"
    confidence = row.get("confidence")
    level = f" ({confidence * 100:.1f} %)" if isinstance(confidence, float) else ""
    return f"{low:.3f}-{high:.3f}{level}"


def ab_table(result: ProfileResult) -> Table:
    """metric | A | B | B/A (median) | interval | tolerance | verdict | pairs."""
    ab = result.ab or {}
    header = ("metric", "A", "B", "B/A", "interval", "tolerance", "verdict", "pairs")
    rows = tuple(
        (
            metric,
            _number(row.get("a")),
            _number(row.get("b")),
            _ratio(row.get("median_ratio")),
            _interval(row),
            f"±{row.get('tolerance_pct'):g}%",
            str(row.get("verdict", "")).upper(),
            str(row.get("pairs", "")),
        )
        for metric, row in ab.get("metrics", {}).items()
    )
    notes = (
        f"A = {ab.get('reference')}, B = {ab.get('candidate')}; {ab.get('pairs')} pairs "
        f"(budget {ab.get('budget_pairs')}) in {ab.get('minutes', 0):.1f} min, order "
        f"{_order(str(ab.get('order', '')))}",
    )
    return Table(header, rows, notes)


def _order(order: str, shown: int = 16) -> str:
    return order if len(order) <= shown else order[:shown] + "..."


def headline(result: ProfileResult) -> str:
    ab = result.ab or {}
    return (
        f"A/B {result.profile}: {ab.get('candidate')} against {ab.get('reference')} -> "
        f"{result.verdict.outcome.value}"
    )


def ab_message(result: ProfileResult) -> str:
    """The text of a failed or warned A/B test: what was decided, why, and the table."""
    lines = [f"llmperf: {headline(result)}"]
    lines.extend(f"note: {note}" for note in result.verdict.notes)
    if result.ab and result.ab.get("metrics"):
        lines.append("")
        lines.append(ab_table(result).text())
    return "\n".join(lines)


def terminal_lines(results: Sequence[ProfileResult]) -> list[str]:
    lines: list[str] = []
    for result in results:
        if result.ab is None:
            continue
        lines.append("")
        lines.append(headline(result))
        lines.append(ab_table(result).text())
    return lines


def markdown(results: Sequence[ProfileResult]) -> str:
    from pytest_llmperf.escape import md_text

    parts: list[str] = []
    for result in results:
        if result.ab is None:
            continue
        parts.append(f"### {md_text(headline(result))}")
        parts.append("")
        parts.append(ab_table(result).markdown())
        parts.append("")
    return "\n".join(parts)


def ratio_figure(result: ProfileResult) -> Any:
    """Each pair's ratio B/A per metric, with the tolerance band around 1."""
    import plotly.graph_objects as go

    ab = result.ab or {}
    figure = go.Figure()
    widest = 0.0
    for metric, ratios in ab.get("ratios", {}).items():
        figure.add_trace(
            go.Scatter(
                x=list(range(1, len(ratios) + 1)),
                y=ratios,
                mode="lines+markers",
                name=metric,
            )
        )
        row = ab.get("metrics", {}).get(metric, {})
        widest = max(widest, float(row.get("tolerance_pct") or 0.0))
    if widest:
        figure.add_hrect(
            y0=1.0 / (1.0 + widest / 100.0),
            y1=1.0 + widest / 100.0,
            fillcolor="green",
            opacity=0.1,
            line_width=0,
        )
    figure.add_hline(y=1.0, line_dash="dot")
    figure.update_layout(
        title=headline(result),
        xaxis_title="pair",
        yaxis_title="B / A",
        height=360,
    )
    return figure
