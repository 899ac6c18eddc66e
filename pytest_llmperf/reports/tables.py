"""Pure renderers of the plugin's own tables: regression verdicts and variant comparisons.

(vLLM's own layouts, the result block and the result JSON, live in ``report.py``.)
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from pytest_llmperf.gate.ledger import Ledger, ProfileResult
from pytest_llmperf.models import SUMMARY_LATENCIES, MetricComparison, Outcome, Verdict


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
    if row.decided_by == "floor":
        text += " (below the ms floor)"
    elif row.decided_by == "bound":
        text += " (a lower bound: no step broke an SLO)"
    elif row.decided_by == "sequential":
        text += " (sequential)"
    elif row.threshold_pct is not None and row.decided_by == "spread":
        text += f" (noise ±{row.threshold_pct:.1f}%)"
    elif row.threshold_pct is not None and not math.isclose(row.threshold_pct, row.tolerance_pct):
        text += f" (x scale: ±{row.threshold_pct:.1f}%)"
    return text


def _width(text: str) -> int:
    """Columns a terminal gives the text: CJK characters (the seeds' labels) take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [
        max(_width(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)
    ]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c) + " " * (w - _width(str(c))) for c, w in zip(cells, widths, strict=False)
        ).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


# -- tables as data: one model, rendered as text (terminal, CI log) or Markdown (job summary) --


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()  # footnotes, printed under the table

    def text(self) -> str:
        return "\n".join([*_grid(self.header, self.rows), *self.notes])

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(md_cell(c) for c in cells) + " |"

        lines = [line(self.header), "|" + "|".join("---" for _ in self.header) + "|"]
        lines.extend(line(row) for row in self.rows)
        if self.notes:
            lines.append("")
            lines.extend(f"{md_cell(note)}  " for note in self.notes)
        return "\n".join(lines)


def md_cell(text: str) -> str:
    from pytest_llmperf.escape import md_text

    return md_text(str(text))


def comparison_grid(comparisons: Sequence[MetricComparison], *, gated_only: bool = False) -> Table:
    """metric | baseline | measured | change | tolerance | verdict, gated metrics first."""
    header = ("metric", "baseline", "measured", "change", "tolerance", "verdict")
    rows = tuple(
        (
            row.metric,
            _number(row.baseline),
            _number(row.measured),
            _change(row),
            _limit(row),
            row.status.upper() if row.status != "info" else "info",
        )
        for row in comparisons
        if not gated_only or row.tolerance_pct is not None
    )
    return Table(header, rows)


# What a failure shows a person: the gated metrics and these (all of them with -v and in the
# JSON): the rows that say whether serving got slower and whether every request completed.
FAILURE_METRICS: tuple[str, ...] = ("total_token_throughput", "output_throughput")
FAILURE_METRICS += ("mean_ttft_ms", "mean_tpot_ms", "completed", "failed")

# What a report shows of a verdict (besides its gated metrics) and what the history keeps of a
# run: the full list is in the JSON.
KEY_METRICS = (
    "total_token_throughput",
    "output_throughput",
    "request_throughput",
    *SUMMARY_LATENCIES,
    "completed",
    "failed",
    # The engine's own view (present where its metrics page was read; measure/engine_metrics)
    "engine_prefix_cache_hit_rate",
    "engine_mean_queue_time_ms",
    "engine_preemptions",
    "engine_peak_kv_cache_usage_pct",
)


def key_comparisons(
    comparisons: Sequence[MetricComparison], keys: Sequence[str] = KEY_METRICS
) -> list[MetricComparison]:
    """The gated metrics (first, as the verdict orders them), then the key ones."""
    return [c for c in comparisons if c.tolerance_pct is not None or c.metric in keys]


def comparison_table(comparisons: Sequence[MetricComparison], *, gated_only: bool = False) -> str:
    """The verdict table as text (see ``comparison_grid``)."""
    return comparison_grid(comparisons, gated_only=gated_only).text()


def verdict_summary(verdict: Verdict) -> str:
    """One line: the outcome and how each gated metric moved."""
    text = verdict.outcome.value
    gated = [c for c in verdict.comparisons if c.tolerance_pct is not None]
    if gated:
        text += " (" + ", ".join(f"{c.metric} {c.change_pct:+.1f}%" for c in gated) + ")"
    return text


def verdict_message(
    verdict: Verdict,
    *,
    profile: str,
    engine: str,
    baseline_file: str,
    accept_command: str,
    verbose: bool = False,
) -> str:
    """The failure text of a test: what happened, the table (gated and key rows; every
    metric when ``verbose``), and how to accept the numbers."""
    title = {
        Outcome.REGRESSED: "regressed",
        Outcome.IMPROVED: "improved beyond tolerance",
        Outcome.NO_BASELINE: "has no baseline",
        Outcome.WORKLOAD_CHANGED: "ran a workload that differs from its baseline",
        Outcome.INSUFFICIENT_DATA: "has insufficient data",
        Outcome.REQUESTS_FAILED: "had more failed requests than allowed",
        Outcome.PASS: "passed",
        Outcome.RECORDED: "was recorded",
        Outcome.MACHINE_CHANGED: "was measured on another machine than its baseline",
        Outcome.SAME: "measured the same as its reference",
        Outcome.INCONCLUSIVE: "was inconclusive against its reference",
    }[verdict.outcome]
    lines = [f"llmperf: profile {profile!r} on {engine} {title} (baseline: {baseline_file})"]
    if verdict.outcome is Outcome.REGRESSED and verdict.confirmed:
        lines.append("confirmed: a rerun measured the regression again")
    lines.extend(f"note: {note}" for note in verdict.notes)
    rows = verdict.comparisons if verbose else key_comparisons(verdict.comparisons, FAILURE_METRICS)
    if rows:
        lines.append("")
        lines.append(comparison_table(rows))
        hidden = len(verdict.comparisons) - len(rows)
        if hidden:
            lines.append(f"({hidden} more metrics with -v, and all of them in --llmperf-json)")
    if verdict.outcome is not Outcome.REQUESTS_FAILED:  # numbers of a failing run: never accept
        lines.append("")
        if verdict.outcome in (Outcome.NO_BASELINE, Outcome.MACHINE_CHANGED):
            lines.append(f"to record this machine's numbers: {accept_command}")
        else:
            lines.append(f"to accept the new numbers: {accept_command}")
    return "\n".join(lines)


def machine_lines(results: Sequence[ProfileResult]) -> list[str]:
    """This session's machine, and every baseline machine that differs from it, with the
    profiles compared against it: reports show both when they differ."""
    from pytest_llmperf.engines.fingerprint import describe, differences

    here = next((r.machine for r in results if r.machine), None)
    if here is None:
        return []
    lines = [f"measured on {describe(here)}"]
    others: dict[str, list[str]] = {}
    for result in results:
        if result.machines_differ and result.baseline_machine is not None:
            text = describe(result.baseline_machine)
            fields = "; ".join(differences(result.baseline_machine, here))
            others.setdefault(f"{text} (differs in {fields})", []).append(
                f"{result.label}/{result.profile}"
            )
    for text, names in others.items():
        lines.append(f"baseline of {', '.join(names)} measured on {text}")
    return lines


def change_pct(value: float, base: float) -> float:
    """(value - base) / base in percent, rounded half up to one decimal as the seeds print it.

    Decimal arithmetic on the figures as written, so that a change of exactly x.x5 % rounds the
    way a person with a calculator rounds it, not the way its binary float happens to fall.
    """
    exact = (Decimal(repr(value)) - Decimal(repr(base))) / Decimal(repr(base)) * 100
    return float(exact.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def format_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


@dataclass(frozen=True)
class VariantRow:
    """One configuration on one profile: the two KPIs of the seeds' tables, or why not."""

    variant: str
    profile: str
    total_token_throughput: float | None
    mean_tpot_ms: float | None
    error: str | None = None  # the configuration failed (to start, or in the baseline record)
    printed_change_pct: float | None = None  # a document's own figure, when reproducing one
    note: str | None = None  # footnote on this row


@dataclass(frozen=True)
class SessionView:
    """What every report of a session shows: its results, the hardware key they were gated
    under, and the configurations against the reference (``comparison``, when several ran)."""

    ledger: Ledger
    hardware: str
    comparison: Sequence[VariantRow] = ()
    reference: str | None = None

    @property
    def compares_configurations(self) -> bool:
        return len({row.variant for row in self.comparison}) > 1


def variant_table(rows: Sequence[VariantRow], reference: str | None = None) -> Table:
    """The seeds' comparison: per profile and variant, total tok/s and mean TPOT with their
    change against the reference variant (the first one unless named)."""
    if not rows:
        return Table((), ())
    reference = reference or rows[0].variant
    base = {
        row.profile: row
        for row in rows
        if row.variant == reference and row.error is None and row.total_token_throughput
    }
    printed = any(row.printed_change_pct is not None for row in rows)
    header = [
        "profile",
        "variant",
        "total tok/s",
        f"vs {reference}",
        "mean TPOT (ms)",
        f"TPOT vs {reference}",
    ]
    if printed:
        header.append("printed")
    body: list[tuple[str, ...]] = []
    notes: dict[str, int] = {}  # the same footnote on several rows is printed once
    for profile in dict.fromkeys(row.profile for row in rows):
        for row in (r for r in rows if r.profile == profile):
            mark = ""
            if row.note:
                number = notes.setdefault(row.note, len(notes) + 1)
                mark = f" [{number}]"
            if row.error is not None:
                cells = [profile, row.variant + mark, "failed", row.error, "-", "-"]
            elif row.total_token_throughput is None:
                cells = [profile, row.variant + mark, "not measured", "-", "-", "-"]
            else:
                ref = base.get(profile)
                tput = tpot = "-"
                if ref is not None and row.variant != reference:
                    tput = format_pct(
                        change_pct(row.total_token_throughput, ref.total_token_throughput or 0.0)
                    )
                    if row.mean_tpot_ms is not None and ref.mean_tpot_ms:
                        tpot = format_pct(change_pct(row.mean_tpot_ms, ref.mean_tpot_ms))
                cells = [
                    profile,
                    row.variant + mark,
                    f"{row.total_token_throughput:.2f}",
                    tput,
                    "-" if row.mean_tpot_ms is None else f"{row.mean_tpot_ms:.2f}",
                    tpot,
                ]
            if printed:
                cells.append(format_pct(row.printed_change_pct))
            body.append(tuple(cells))
    return Table(tuple(header), tuple(body), tuple(f"[{n}] {text}" for text, n in notes.items()))
