"""A sweep's steps as a table (terminal and Markdown): one row per load, whether it met the
SLOs, its key latencies and throughputs, and the baseline's p99 TTFT at the same load."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.reports.tables import Table

COLUMNS: tuple[tuple[str, str], ...] = (
    ("p99_ttft_ms", "p99 TTFT ms"),
    ("p99_tpot_ms", "p99 TPOT ms"),
    ("request_throughput", "req/s done"),
    ("request_goodput", "goodput req/s"),
    ("output_throughput", "output tok/s"),
)


def _cell(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "-"
    return f"{value:,.1f}" if abs(value) < 1e5 else f"{value:,.0f}"


def _load(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else "-"


def _by_load(curve: Sequence[Mapping[str, Any]]) -> dict[float, Mapping[str, Any]]:
    return {float(row["load"]): row for row in curve if isinstance(row.get("load"), (int, float))}


def sweep_table(sweep: Mapping[str, Any], baseline: Mapping[str, Any] | None = None) -> Table:
    """The steps of ``sweep`` (a ``SweepResult.record()``), with the baseline's where it has
    the same load; notes: the capacity and where the SLO broke, now and in the baseline."""
    axis = "req/s" if sweep.get("axis") == "request_rate" else "concurrency"
    curve = list(sweep.get("curve") or ())
    old = _by_load((baseline or {}).get("curve") or ())
    header = [axis, "SLO", *(title for _, title in COLUMNS)]
    if old:
        header.append("baseline p99 TTFT ms")
    rows = []
    for row in curve:
        broken = row.get("broken") or []
        cells = [_load(float(row["load"])), "met" if not broken else "broke " + ", ".join(broken)]
        cells.extend(_cell(row.get(key)) for key, _ in COLUMNS)
        if old:
            match = old.get(float(row["load"]))
            cells.append(_cell(match.get("p99_ttft_ms")) if match else "-")
        rows.append(tuple(cells))
    notes = [_capacity_line("capacity at SLO", sweep.get("capacity") or {}, axis)]
    if baseline and baseline.get("capacity"):
        notes.append(_capacity_line("baseline", baseline["capacity"], axis))
    return Table(tuple(header), tuple(rows), tuple(notes))


def _capacity_line(label: str, capacity: Mapping[str, Any], axis: str) -> str:
    value, lower, upper = capacity.get("value"), capacity.get("lower"), capacity.get("upper")
    if value is None:
        return f"{label}: below {_load(upper)} {axis}, the lowest load tried" if upper else label
    if upper is None:
        return f"{label}: at least {_load(value)} {axis} (no step broke an SLO)"
    broken = ", ".join(capacity.get("broken") or ()) or "an SLO"
    return (
        f"{label}: {value:.4g} {axis}, between {_load(lower)} (met every SLO) and "
        f"{_load(upper)} (broke {broken})"
    )


def sweep_tables(results: Sequence[ProfileResult]) -> list[tuple[str, Table]]:
    """(``label/profile``, table) of every sweep among the results."""
    return [
        (f"{r.label}/{r.profile}", sweep_table(r.sweep, r.baseline_sweep))
        for r in results
        if r.sweep
    ]
