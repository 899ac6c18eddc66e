"""Reports show the engine's own metrics next to the client's, where the engine gave them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.gate.verdict import judge
from pytest_llmperf.reports.markdown import results_table
from pytest_llmperf.reports.summary import compact_line
from pytest_llmperf.reports.tables import key_comparisons
from tests.reports import factory
from tests.support.baseline_entries import recorded_entry

ENGINE = {
    "engine_prefix_cache_hit_rate": 69.75,
    "engine_mean_queue_time_ms": 12.5,
    "engine_preemptions": 0.0,
    "engine_peak_kv_cache_usage_pct": 3.2,
}


def _with_engine(result: ProfileResult) -> ProfileResult:
    return dataclasses.replace(result, metrics={**result.metrics, **ENGINE})


def test_terminal_line_and_markdown_table() -> None:
    plain = factory.result("vllm", "short")
    cached = _with_engine(factory.result("vllm", "shared"))
    assert "prefix cache hits" not in compact_line(plain)
    line = compact_line(cached)
    assert "TPOT" in line
    assert "prefix cache hits 69.8 %" in line

    table = results_table([plain, cached]).markdown()
    header = table.splitlines()[0]
    assert "prefix cache hits (%)" in header
    assert "| 69.8 |" in table
    assert "prefix cache hits" not in results_table([plain]).markdown()  # no empty column


def test_comparison_rows_include_engine_metrics() -> None:
    measured = factory.result("vllm", "shared")
    base = {**measured.metrics, **ENGINE}
    entry = recorded_entry("shared", base, {"engine_prefix_cache_hit_rate": 20.0})
    now = {**measured.metrics, **ENGINE, "engine_prefix_cache_hit_rate": 0.0}
    verdict = judge(entry, now, {}, engine_version=None, baseline_file=Path("b.yaml"))
    shown = {c.metric: c.status for c in key_comparisons(verdict.comparisons)}
    # The gated hit rate first, then the key rows, the engine's informational ones among them.
    assert next(iter(shown)) == "engine_prefix_cache_hit_rate"
    assert shown["engine_prefix_cache_hit_rate"] == "regressed"
    assert shown["engine_mean_queue_time_ms"] == "info"
    assert shown["mean_ttft_ms"] == "info"
