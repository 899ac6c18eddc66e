"""The session as Markdown: what a nightly CI job shows in its summary page.

One results table (configuration, profile, the KPIs, the verdict), the seeds' comparison table
when several configurations ran, then the details of every test that did not simply pass,
folded so that a green run stays one screen long.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.escape import md_code, md_text
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.models import Outcome
from pytest_llmperf.reports.tables import (
    SessionView,
    Table,
    comparison_grid,
    key_comparisons,
    machine_lines,
    md_cell,
    variant_table,
    verdict_summary,
)

HIT_RATE = "engine_prefix_cache_hit_rate"


def _number(value: object, fmt: str) -> str:
    return fmt.format(value) if isinstance(value, (int, float)) else "-"


def results_table(results: Sequence[ProfileResult], marks: tuple[str, str] = ("✅", "❌")) -> Table:
    """One row per test; ``marks`` are the pass and fail signs of the first column. A column
    of the engine's prefix-cache hit rate joins when any result has it."""
    hits = any(HIT_RATE in r.metrics for r in results)
    rows = tuple(
        (
            marks[1] if r.verdict.failed else marks[0],
            r.label,
            r.profile,
            _number(r.metrics.get("total_token_throughput"), "{:,.1f}"),
            _number(r.metrics.get("mean_ttft_ms"), "{:,.1f}"),
            _number(r.metrics.get("mean_tpot_ms"), "{:,.2f}"),
            str(r.metrics.get("completed", "-")),
            *((_number(r.metrics.get(HIT_RATE), "{:.1f}"),) if hits else ()),
            verdict_summary(r.verdict),
        )
        for r in results
    )
    header = (
        "",
        "configuration",
        "profile",
        "total tok/s",
        "mean TTFT (ms)",
        "mean TPOT (ms)",
        "completed",
        *(("prefix cache hits (%)",) if hits else ()),
        "verdict",
    )
    return Table(header, rows)


def _details(result: ProfileResult) -> list[str]:
    # Notes and errors quote servers (their error messages) and files (names): escaped, so
    # that no server can put a link or an image into the job's summary page.
    title = md_text(f"{result.label}/{result.profile}: {result.verdict.outcome.value}")
    lines = [f"#### {title}", ""]
    lines.extend(f"- {md_text(note)}" for note in (*result.verdict.notes, *result.notes))
    lines.extend(f"- failed request: {md_code(error)}" for error in result.errors)
    if result.verdict.comparisons:
        lines.append("")
        lines.append(comparison_grid(key_comparisons(result.verdict.comparisons)).markdown())
    lines.append("")
    lines.append(f"baseline: {md_code(result.baseline_file)}  ")
    lines.append(f"command: {md_code(result.command)}")
    lines.append("")
    return lines


def session_markdown(view: SessionView, *, title: str = "pytest-llmperf") -> str:
    """The whole summary; with several configurations, the seeds' table against the reference."""
    ledger = view.ledger
    failed = sum(1 for r in ledger.results if r.verdict.failed) + len(ledger.failed_starts)
    state = f"{failed} failed" if failed else "all passed"
    lines = [f"## {title}: {view.hardware}, {len(ledger.results)} profiles, {state}", ""]
    machines = machine_lines(ledger.results)
    if machines:
        lines.extend(f"{md_cell(line)}  " for line in machines)
        lines.append("")
    if ledger.results:
        lines.append(results_table(ledger.results).markdown())
        lines.append("")
    if ledger.failed_starts:
        lines.append("**Failed to start:**")
        lines.append("")
        lines.extend(
            f"- {md_code(name)}: {md_code(error)}" for name, error in ledger.failed_starts.items()
        )
        lines.append("")
    from pytest_llmperf.reports.sweep_table import sweep_tables

    for name, table in sweep_tables(ledger.results):
        lines.extend([f"### Sweep {md_text(name)}", "", table.markdown(), ""])
    if view.compares_configurations:
        lines.append(
            f"### Against {md_text(view.reference or '')}: total token throughput and mean TPOT"
        )
        lines.append("")
        lines.append(variant_table(view.comparison, view.reference).markdown())
        lines.append("")
    from pytest_llmperf.reports.ab_report import markdown as ab_markdown

    experiments = ab_markdown(ledger.results)
    if experiments:
        lines.append(experiments)
    attention = [
        r
        for r in ledger.results
        if r.verdict.outcome not in (Outcome.PASS, Outcome.RECORDED, Outcome.SAME)
    ]
    if attention:
        lines.append(f"<details><summary>{len(attention)} not a plain pass</summary>")
        lines.append("")
        for result in attention:
            lines.extend(_details(result))
        lines.append("</details>")
        lines.append("")
    return "\n".join(lines)
