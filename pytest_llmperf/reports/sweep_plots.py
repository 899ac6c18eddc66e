"""A sweep's plots for the HTML report (plotly, the ``report`` extra):

- the curve: each SLO'd latency (p99 TTFT and TPOT when no SLO names one) against the load,
  with the SLO as a horizontal line, the capacity as a vertical one, and the baseline's
  curve dashed;
- the Pareto front: output tokens per second per user (1000 / mean TPOT) against the total
  output throughput, every step a point labelled with its load, the undominated ones joined,
  the baseline's front dashed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.escape import plot_text
from pytest_llmperf.gate.ledger import ProfileResult

DEFAULT_CURVES = ("p99_ttft_ms", "p99_tpot_ms")
MEASURED, BASELINE, LIMIT = "#1f77b4", "#9e9e9e", "#d62728"


def _axis(sweep: Mapping[str, Any]) -> str:
    return "request rate (req/s)" if sweep.get("axis") == "request_rate" else "max concurrency"


def curve_metrics(sweep: Mapping[str, Any]) -> list[str]:
    """The latencies to plot: those an SLO limits (the curve keeps them), else the defaults."""
    curve = sweep.get("curve") or []
    named = [m for m in (sweep.get("slo") or {}) if m.endswith("_ms")]
    chosen = [m for m in named if any(m in row for row in curve)]
    return chosen or list(DEFAULT_CURVES)


def _points(curve: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[float], list[float]]:
    rows = [r for r in curve if isinstance(r.get(metric), (int, float))]
    return [float(r["load"]) for r in rows], [float(r[metric]) for r in rows]


def curve_figure(result: ProfileResult) -> Any:
    from plotly import graph_objects as go
    from plotly.subplots import make_subplots

    sweep = result.sweep
    metrics = curve_metrics(sweep)
    figure = make_subplots(rows=1, cols=len(metrics), subplot_titles=metrics)
    slos = sweep.get("slo") or {}
    capacity = (sweep.get("capacity") or {}).get("value")
    baseline = (result.baseline_sweep or {}).get("curve") or []
    for column, metric in enumerate(metrics, start=1):
        x, y = _points(sweep.get("curve") or [], metric)
        figure.add_trace(
            go.Scatter(x=x, y=y, mode="lines+markers", name="measured", legendgroup="measured",
                       showlegend=column == 1, line={"color": MEASURED}),
            row=1, col=column,
        )  # fmt: skip
        if baseline:
            bx, by = _points(baseline, metric)
            figure.add_trace(
                go.Scatter(x=bx, y=by, mode="lines+markers", name="baseline",
                           legendgroup="baseline", showlegend=column == 1,
                           line={"color": BASELINE, "dash": "dash"}),
                row=1, col=column,
            )  # fmt: skip
        if metric in slos:
            figure.add_hline(
                y=float(slos[metric]), line={"color": LIMIT, "dash": "dot"},
                annotation_text=f"SLO {slos[metric]:g} ms", row=1, col=column,
            )  # fmt: skip
        if isinstance(capacity, (int, float)) and capacity > 0:
            figure.add_vline(
                x=float(capacity), line={"color": MEASURED, "dash": "dot"},
                annotation_text=f"capacity {capacity:.3g}", annotation_position="bottom right",
                row=1, col=column,
            )  # fmt: skip
        figure.update_xaxes(title_text=_axis(sweep), row=1, col=column)
        figure.update_yaxes(title_text="ms", row=1, col=column)
    title = plot_text(f"{result.label}/{result.profile}: latency against load")
    figure.update_layout(title=title, height=400, margin={"t": 70, "b": 50})
    return figure


def pareto_figure(result: ProfileResult) -> Any:
    from plotly import graph_objects as go

    figure = go.Figure()
    for label, sweep, colour, dash in (
        ("baseline", result.baseline_sweep or {}, BASELINE, "dash"),
        ("measured", result.sweep, MEASURED, "solid"),
    ):
        rows = [
            r
            for r in sweep.get("curve") or []
            if isinstance(r.get("output_throughput"), (int, float)) and r.get("mean_tpot_ms")
        ]
        if not rows:
            continue
        figure.add_trace(
            go.Scatter(
                x=[float(r["output_throughput"]) for r in rows],
                y=[1000.0 / float(r["mean_tpot_ms"]) for r in rows],
                mode="markers+text",
                text=[f"{float(r['load']):g}" for r in rows],
                textposition="top center",
                name=f"{label} steps",
                marker={"color": colour},
            )
        )
        front = sweep.get("pareto") or []
        if front:
            figure.add_trace(
                go.Scatter(
                    x=[float(p[1]) for p in front],
                    y=[float(p[2]) for p in front],
                    mode="lines",
                    name=f"{label} Pareto front",
                    line={"color": colour, "dash": dash},
                )
            )
    figure.update_layout(
        title=plot_text(f"{result.label}/{result.profile}: Pareto front (points: load)"),
        xaxis_title="output throughput (tok/s)",
        yaxis_title="per user (tok/s, 1000 / mean TPOT)",
        height=420,
        margin={"t": 70, "b": 50},
    )
    return figure
