"""The HTML report: the session's tables and plots in one self-contained file.

Plots (plotly, the optional ``report`` extra; its JavaScript is inlined once, so the file opens
offline and as a CI artifact):

- latency distributions per profile: TTFT, TPOT, ITL and E2EL, one box per configuration;
- measured against baseline, per test: each metric's change in percent, coloured by verdict,
  with the allowed change of the gated metrics marked on their worse side;
- throughput over the run per profile: output tokens per second, one line per configuration;
- the trend of the history file, when there is one;
- per sweep profile: its steps' table, latency against load with the SLO lines and the
  baseline's curve, and the Pareto front (``sweep_plots``).
"""

from __future__ import annotations

import datetime
import html
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.escape import plot_text
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.models import Direction, MetricComparison
from pytest_llmperf.reports.tables import SessionView, Table, key_comparisons, variant_table

EXTRA_HINT = "install the extra: pip install 'pytest-llmperf[report]'"
LATENCIES = (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("itl_ms", "ITL (ms)"),
             ("e2el_ms", "E2EL (ms)"))  # fmt: skip
STATUS_COLOURS = {
    "regressed": "#d62728",
    "improved": "#2ca02c",
    "pass": "#1f77b4",
    "info": "#9e9e9e",
}
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem 2rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
p.meta { color: #555; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f3f3f3; } td.fail { color: #b00020; font-weight: 600; }
.llmperf-plot { margin: 0.5rem 0 1.5rem; }
.notes { font-size: 0.85rem; color: #444; }
"""


def require_plotly() -> None:
    """Fail early (at configure time, before any engine starts) when plotly is missing."""
    import importlib.util

    try:
        found = importlib.util.find_spec("plotly") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"--llmperf-html: the HTML report draws its plots with plotly, which is not "
            f"installed; {EXTRA_HINT}"
        )


def _plotly() -> Any:
    try:
        import plotly
        import plotly.graph_objects
        import plotly.subplots
    except ImportError:
        raise ConfigError(
            f"--llmperf-html: the HTML report draws its plots with plotly, which is not "
            f"installed; {EXTRA_HINT}"
        ) from None
    return plotly


def _colours(labels: Sequence[str]) -> dict[str, str]:
    from plotly.colors import qualitative

    palette = qualitative.Plotly
    return {label: palette[i % len(palette)] for i, label in enumerate(labels)}


def _div(figure: Any, name: str) -> str:
    # The id lands in an attribute and in the script that draws the plot: letters only.
    div_id = "plot-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)
    body = figure.to_html(
        full_html=False, include_plotlyjs=False, div_id=div_id, config=PLOT_CONFIG
    )
    return f'<div class="llmperf-plot" data-plot="{html.escape(name)}">{body}</div>'


def html_table(table: Table, failed_rows: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in table.header)
    rows = []
    for index, row in enumerate(table.rows):
        css = ' class="fail"' if index in failed_rows else ""
        rows.append("<tr>" + "".join(f"<td{css}>{html.escape(c)}</td>" for c in row) + "</tr>")
    notes = "".join(f"<p class='notes'>{html.escape(n)}</p>" for n in table.notes)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>{notes}"


# -- figures -----------------------------------------------------------------------------------


def latency_figure(profile: str, results: Sequence[ProfileResult], colours: dict[str, str]) -> Any:
    from plotly import graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(rows=1, cols=len(LATENCIES), subplot_titles=[t for _, t in LATENCIES])
    for result in results:
        for column, (key, _) in enumerate(LATENCIES, start=1):
            values = result.series.get(key) or []
            figure.add_trace(
                go.Box(
                    y=values,
                    name=plot_text(result.label),
                    legendgroup=plot_text(result.label),
                    showlegend=column == 1,
                    marker_color=colours[result.label],
                    boxpoints=False,
                ),
                row=1,
                col=column,
            )
    figure.update_layout(
        title=plot_text(f"{profile}: latency distributions"),
        height=380,
        margin={"t": 70, "b": 40},
    )
    return figure


def _worse_side(row: MetricComparison) -> float:
    limit = row.threshold_pct if row.threshold_pct is not None else row.tolerance_pct or 0.0
    return -limit if row.direction is Direction.HIGHER_IS_BETTER else limit


def baseline_figure(result: ProfileResult) -> Any:
    from plotly import graph_objects as go

    # plotly draws the first bar at the bottom
    rows = key_comparisons(result.verdict.comparisons)[::-1]
    figure = go.Figure()
    figure.add_trace(
        go.Bar(
            x=[row.change_pct for row in rows],
            y=[row.metric for row in rows],
            orientation="h",
            marker_color=[STATUS_COLOURS.get(row.status, "#9e9e9e") for row in rows],
            customdata=[[row.baseline, row.measured, row.status] for row in rows],
            hovertemplate=(
                "%{y}: %{x:+.1f}%<br>baseline %{customdata[0]:,.2f}"
                "<br>measured %{customdata[1]:,.2f}<br>%{customdata[2]}<extra></extra>"
            ),
            name="change against baseline (%)",
        )
    )
    gated = [row for row in rows if row.tolerance_pct is not None]
    if gated:
        figure.add_trace(
            go.Scatter(
                x=[_worse_side(row) for row in gated],
                y=[row.metric for row in gated],
                mode="markers",
                marker={"symbol": "line-ns-open", "size": 22, "color": "#000"},
                name="allowed change (worse side)",
            )
        )
    figure.update_layout(
        title=plot_text(
            f"{result.label}/{result.profile}: {result.verdict.outcome.value} "
            f"(measured against baseline, %)"
        ),
        height=120 + 24 * len(rows),
        margin={"l": 180, "t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.15},
    )
    figure.add_vline(x=0, line_color="#444", line_width=1)
    return figure


def throughput_figure(
    profile: str, results: Sequence[ProfileResult], colours: dict[str, str]
) -> Any:
    from plotly import graph_objects as go

    figure = go.Figure()
    for result in results:
        line = result.series.get("timeline") or {}
        values = line.get("output_tok_s") or []
        width = float(line.get("bucket_s") or 1.0)
        # A step per bucket, closed at the end of the last one.
        figure.add_trace(
            go.Scatter(
                x=[index * width for index in range(len(values) + 1)],
                y=[*values, *values[-1:]],
                mode="lines",
                line_shape="hv",
                name=plot_text(result.label),
                line_color=colours[result.label],
            )
        )
    figure.update_layout(
        title=plot_text(f"{profile}: output tokens per second over the run"),
        xaxis_title="seconds since the first request",
        yaxis_title="output tok/s",
        height=340,
    )
    return figure


def trend_figure(items: Sequence[Mapping[str, Any]]) -> Any:
    from plotly import graph_objects as go
    from plotly.subplots import make_subplots

    from pytest_llmperf.reports.history import series_key

    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        subplot_titles=("total token throughput (tok/s)", "mean TPOT (ms)"),
    )
    keys = list(dict.fromkeys(series_key(item) for item in items))
    colours = _colours(keys)
    for key in keys:
        points = [item for item in items if series_key(item) == key]
        for row, metric in ((1, "total_token_throughput"), (2, "mean_tpot_ms")):
            figure.add_trace(
                go.Scatter(
                    x=[plot_text(str(item["timestamp"])) for item in points],
                    y=[(item.get("metrics") or {}).get(metric) for item in points],
                    mode="lines+markers",
                    # A shared history file is not ours: its names reach plotly's HTML-ish
                    # labels escaped, and never its template language.
                    name=plot_text(key),
                    legendgroup=plot_text(key),
                    showlegend=row == 1,
                    line_color=colours[key],
                    text=[plot_text(str(item.get("git_commit") or "")[:10]) for item in points],
                    hovertemplate="%{x}<br>%{y:,.2f}<br>commit %{text}<extra>%{fullData.name}"
                    "</extra>",
                ),
                row=row,
                col=1,
            )
    figure.update_layout(title="history", height=560)
    return figure


# -- pages -------------------------------------------------------------------------------------


def _page(title: str, meta: str, sections: Sequence[str]) -> str:
    plotly = _plotly()
    script = plotly.offline.get_plotlyjs()
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f'<script type="text/javascript">{script}</script></head><body>'
        f"<h1>{html.escape(title)}</h1><p class='meta'>{html.escape(meta)}</p>"
        + "\n".join(sections)
        + "</body></html>\n"
    )


def _per_profile(
    title: str,
    kind: str,
    figure: Callable[[str, Sequence[ProfileResult], dict[str, str]], Any],
    results: Sequence[ProfileResult],
    colours: dict[str, str],
) -> list[str]:
    """A section with one plot per profile of the results that carry series (none: nothing)."""
    if not results:
        return []
    sections = [f"<h2>{title}</h2>"]
    for profile in dict.fromkeys(r.profile for r in results):
        chosen = [r for r in results if r.profile == profile]
        sections.append(_div(figure(profile, chosen, colours), f"{kind}-{profile}"))
    return sections


def render(
    view: SessionView,
    *,
    history: Sequence[Mapping[str, Any]] = (),
    meta: Mapping[str, Any] | None = None,
) -> str:
    """The report page of a session."""
    from pytest_llmperf.reports.markdown import results_table
    from pytest_llmperf.reports.tables import machine_lines

    _plotly()
    results = view.ledger.results
    labels = list(dict.fromkeys([r.label for r in results] + list(view.ledger.failed_starts)))
    colours = _colours(labels)
    info = {"hardware": view.hardware, **(meta or {})}
    meta_line = " · ".join(f"{key}: {value}" for key, value in info.items() if value)
    sections = [
        "".join(f"<p class='meta'>{html.escape(line)}</p>" for line in machine_lines(results)),
        "<h2>Results</h2>",
    ]
    table = results_table(results, marks=("ok", "FAIL"))  # no emoji font in every browser
    failed = [i for i, r in enumerate(results) if r.verdict.failed]
    sections.append(html_table(table, failed))
    for name, error in view.ledger.failed_starts.items():
        sections.append(f"<p class='notes'>{html.escape(name)}: failed to start: "
                        f"{html.escape(error)}</p>")  # fmt: skip
    if view.compares_configurations:
        sections.append(f"<h2>Against {html.escape(view.reference or '')}</h2>")
        sections.append(html_table(variant_table(view.comparison, view.reference)))
    with_series = [r for r in results if r.series]
    sections.extend(
        _per_profile("Latency distributions", "latency", latency_figure, with_series, colours)
    )
    experiments = [r for r in results if r.ab is not None]
    if experiments:
        from pytest_llmperf.reports import ab_report

        sections.append("<h2>A/B experiments: ratio B/A per pair</h2>")
        for index, result in enumerate(experiments):
            sections.append(html_table(ab_report.ab_table(result)))
            sections.append(_div(ab_report.ratio_figure(result), f"ab-{index}"))
    sections.append("<h2>Measured against baseline</h2>")
    for index, result in enumerate(r for r in results if r.ab is None):
        if result.verdict.comparisons:
            sections.append(_div(baseline_figure(result), f"baseline-{index}"))
        else:
            notes = "; ".join(result.verdict.notes) or "no comparison"
            sections.append(
                f"<p class='notes'>{html.escape(result.label)}/{html.escape(result.profile)}: "
                f"{html.escape(result.verdict.outcome.value)} ({html.escape(notes)})</p>"
            )
    sections.extend(
        _per_profile(
            "Throughput over the run", "throughput", throughput_figure, with_series, colours
        )
    )
    sections.extend(_sweep_sections(results))
    if history:
        sections.append("<h2>Trend</h2>")
        sections.append(_div(trend_figure(history), "trend"))
    return _page("pytest-llmperf report", meta_line, sections)


def _sweep_sections(results: Sequence[ProfileResult]) -> list[str]:
    """Per sweep: its table, the latency curve against load and the Pareto front."""
    from pytest_llmperf.reports.sweep_plots import curve_figure, pareto_figure
    from pytest_llmperf.reports.sweep_table import sweep_table

    sweeps = [(index, r) for index, r in enumerate(results) if r.sweep]
    if not sweeps:
        return []
    sections = ["<h2>Sweeps</h2>"]
    for index, result in sweeps:
        sections.append(f"<h3>{html.escape(result.label)}/{html.escape(result.profile)}</h3>")
        sections.append(html_table(sweep_table(result.sweep, result.baseline_sweep)))
        sections.append(_div(curve_figure(result), f"sweep-curve-{index}"))
        sections.append(_div(pareto_figure(result), f"sweep-pareto-{index}"))
    return sections


def write(path: Path, page: str) -> None:
    write_atomically(path, page)


def write_trend(path: Path, items: Sequence[Mapping[str, Any]]) -> None:
    """A page with the trend plot of a history file alone."""
    _plotly()
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    page = _page(
        "pytest-llmperf history",
        f"{len(items)} records · created {created}",
        [_div(trend_figure(items), "trend")],
    )
    write(path, page)
