"""A sweep in the reports: its table (terminal, Markdown) and its plots (HTML, rendered in
headless Chromium like the other plots).

The steps are measured from synthetic request records through vLLM's metrics, then summed
up by the same code a real sweep uses (gate.sweep.summarize); the baseline is a second,
faster sweep. With ``LLMPERF_SWEEP_SCREENSHOT=PATH`` the screenshot is copied there
(docs/images/sweep-report.png is made that way).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from pytest_llmperf.gate.capacity import StepResult
from pytest_llmperf.gate.ledger import Ledger, ProfileResult
from pytest_llmperf.gate.sweep import summarize
from pytest_llmperf.measure import metrics
from pytest_llmperf.measure.slo import Slo
from pytest_llmperf.reports.markdown import session_markdown
from pytest_llmperf.reports.summary import terminal_lines
from pytest_llmperf.reports.sweep_table import sweep_table
from pytest_llmperf.reports.tables import SessionView
from tests.reports import factory

SLOS = (Slo("p99_ttft_ms", 500.0), Slo("p99_tpot_ms", 40.0))


def sweep_record(slowdown: float) -> dict[str, object]:
    """Rates 2..32 req/s; TTFT grows with the load, sharply past 16/slowdown req/s."""
    steps = []
    for seed, rate in enumerate((2.0, 4.0, 8.0, 16.0, 32.0, 12.0)):
        queue = max(0.0, rate * slowdown - 10.0) * 0.08
        recs = factory.records(32, seed=seed, ttft=0.05 + queue, gap=0.01 * slowdown, tokens=40)
        duration = 32 / min(rate, 20.0 / slowdown)
        computed = metrics.compute_metrics(recs, duration)
        steps.append(StepResult(rate, computed))
    return summarize("request_rate", steps, SLOS).record()


def sweep_result() -> ProfileResult:
    base = factory.result("vllm", "embedded-sweep")
    return dataclasses.replace(
        base,
        series={},
        sweep=sweep_record(1.5),
        baseline_sweep=sweep_record(1.0),
    )


def test_the_table_names_each_step_and_where_the_slo_broke() -> None:
    result = sweep_result()
    table = sweep_table(result.sweep, result.baseline_sweep)
    assert table.header[:3] == ("req/s", "SLO", "p99 TTFT ms")
    assert table.header[-1] == "baseline p99 TTFT ms"
    assert [row[0] for row in table.rows] == ["2", "4", "8", "12", "16", "32"]
    assert table.rows[0][1] == "met"
    assert any(row[1].startswith("broke p99_ttft_ms <= 500") for row in table.rows)
    capacity, baseline = table.notes
    assert capacity.startswith("capacity at SLO: ")
    assert "broke p99_ttft_ms <= 500" in capacity
    assert baseline.startswith("baseline: ")
    text = table.text()
    assert "baseline p99 TTFT ms" in text


def test_terminal_and_markdown_show_the_sweep() -> None:
    book = Ledger()
    book.add(sweep_result())
    lines = "\n".join(terminal_lines(book, verbose=False))
    assert "vllm/embedded-sweep: sweep" in lines
    assert "capacity at SLO:" in lines
    markdown = session_markdown(SessionView(book, "cpu"))
    assert "### Sweep vllm/embedded-sweep" in markdown
    assert "| req/s | SLO | p99 TTFT ms |" in markdown


def test_html_has_the_curve_and_the_pareto_plot() -> None:
    pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")
    from pytest_llmperf.reports.html_report import render

    book = Ledger()
    book.add(sweep_result())
    page = render(SessionView(book, "cpu"))
    assert 'data-plot="sweep-curve-0"' in page
    assert 'data-plot="sweep-pareto-0"' in page
    assert "SLO 500 ms" in page  # the SLO line's label


@pytest.mark.slow
def test_sweep_plots_render_in_headless_chromium(tmp_path: Path) -> None:
    pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")
    from pytest_llmperf.reports.html_report import render, write
    from tests.reports.test_report_e2e import _browse, _chromium, _PlotFinder

    binary = _chromium()
    book = Ledger()
    book.add(sweep_result())
    page = tmp_path / "report.html"
    write(page, render(SessionView(book, "cpu")))
    dom = _browse(
        binary, tmp_path / "dom", "--virtual-time-budget=15000", "--dump-dom", page.as_uri()
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    finder = _PlotFinder()
    finder.feed(dom.stdout)
    for name in ("sweep-curve-0", "sweep-pareto-0"):
        counts = finder.plots[name]
        assert counts["main-svg"] >= 1, (name, counts)
        assert counts["marks"] >= 1, (name, counts)
    copy_to = os.environ.get("LLMPERF_SWEEP_SCREENSHOT")
    if copy_to:
        shot = tmp_path / "sweep.png"
        taken = _browse(
            binary,
            tmp_path / "shot",
            "--window-size=1280,1500",
            "--virtual-time-budget=15000",
            f"--screenshot={shot}",
            page.as_uri(),
        )
        assert taken.returncode == 0, taken.stderr[-2000:]
        Path(copy_to).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, copy_to)
