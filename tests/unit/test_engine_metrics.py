"""Engine-side metrics: Prometheus pages read around a run, deltas, peaks, and gating them."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.base import EngineMetricNames
from pytest_llmperf.gate.verdict import compare, direction_of
from pytest_llmperf.measure.engine_metrics import EngineMetricsProbe, deltas, families_of, parse
from pytest_llmperf.models import Direction
from tests.support.baseline_entries import recorded_entry

VLLM_NAMES = get_engine("vllm").engine_metrics
assert VLLM_NAMES is not None


class FakeVLLMRegistry:
    """vLLM's metric families, written by prometheus-client as vLLM writes them (two engine
    cores, so sums and maxima over label sets are exercised)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        labels = ["model_name", "engine"]
        self.queries = Counter("vllm:prefix_cache_queries", "", labels, registry=self.registry)
        self.hits = Counter("vllm:prefix_cache_hits", "", labels, registry=self.registry)
        self.preempt = Counter("vllm:num_preemptions", "", labels, registry=self.registry)
        self.queue = Histogram(
            "vllm:request_queue_time_seconds", "", labels, registry=self.registry
        )
        self.usage = Gauge("vllm:kv_cache_usage_perc", "", labels, registry=self.registry)
        self.running = Gauge("vllm:num_requests_running", "", labels, registry=self.registry)
        self.waiting = Gauge("vllm:num_requests_waiting", "", labels, registry=self.registry)
        self.status = 200
        # vLLM creates its label sets when it starts: the page has samples before any request.
        self.queries.labels(**self.engine(0))

    def engine(self, index: int) -> dict[str, str]:
        return {"model_name": "tiny", "engine": str(index)}

    def fetch(self, path: str) -> tuple[int, str]:
        assert path == "/metrics"
        return self.status, generate_latest(self.registry).decode()


def test_counters_histograms_and_gauges() -> None:
    fake = FakeVLLMRegistry()
    fake.queries.labels(**fake.engine(0)).inc(1000)  # before the run: not counted
    before = parse(fake.fetch("/metrics")[1])
    for index in (0, 1):
        fake.queries.labels(**fake.engine(index)).inc(2000)
        fake.hits.labels(**fake.engine(index)).inc(1500)
        fake.queue.labels(**fake.engine(index)).observe(0.2 + index * 0.2)
    fake.preempt.labels(**fake.engine(1)).inc(3)
    fake.usage.labels(**fake.engine(0)).set(0.25)
    fake.usage.labels(**fake.engine(1)).set(0.5)
    fake.running.labels(**fake.engine(0)).set(3)
    fake.running.labels(**fake.engine(1)).set(4)
    after = parse(fake.fetch("/metrics")[1])

    result = deltas(VLLM_NAMES, before, after, [])
    assert result["engine_prefix_cache_queries"] == 4000
    assert result["engine_prefix_cache_hits"] == 3000
    assert result["engine_prefix_cache_hit_rate"] == pytest.approx(75.0)
    assert result["engine_preemptions"] == 3
    assert result["engine_mean_queue_time_ms"] == pytest.approx(300.0)
    assert result["engine_peak_kv_cache_usage_pct"] == pytest.approx(50.0)  # largest core
    assert result["engine_peak_running"] == 7  # both cores' requests
    assert "engine_peak_waiting" not in result  # a gauge no core has written yet


def test_no_lookups_is_zero_hit_rate_and_a_restart_gives_no_delta() -> None:
    fake = FakeVLLMRegistry()
    fake.queries.labels(**fake.engine(0)).inc(0)
    fake.hits.labels(**fake.engine(0)).inc(0)
    snapshot = parse(fake.fetch("/metrics")[1])
    assert deltas(VLLM_NAMES, snapshot, snapshot, [])["engine_prefix_cache_hit_rate"] == 0.0

    fake.queries.labels(**fake.engine(0)).inc(50)
    fake.hits.labels(**fake.engine(0)).inc(10)
    later = parse(fake.fetch("/metrics")[1])
    # Counters that went down (the engine restarted): no deltas rather than negative ones.
    assert "engine_prefix_cache_hits" not in deltas(VLLM_NAMES, later, snapshot, [])


def test_probe_samples_gauge_peaks_during_the_run() -> None:
    fake = FakeVLLMRegistry()
    probe = EngineMetricsProbe(VLLM_NAMES, "http://unused", fetch=fake.fetch, interval=0.02)
    with probe:
        fake.waiting.labels(**fake.engine(0)).set(9)  # a queue that drains before the end
        fake.queries.labels(**fake.engine(0)).inc(100)
        fake.hits.labels(**fake.engine(0)).inc(40)
        time.sleep(0.3)
        fake.waiting.labels(**fake.engine(0)).set(0)
    assert probe.note is None
    assert probe.metrics["engine_peak_waiting"] == 9
    assert probe.metrics["engine_prefix_cache_hit_rate"] == pytest.approx(40.0)
    assert not [t for t in threading.enumerate() if t.name == "engine-metrics"]


def test_probe_waits_for_counters_to_settle() -> None:
    fake = FakeVLLMRegistry()
    calls = {"n": 0}

    def late_fetch(path: str) -> tuple[int, str]:
        # The engine records the last step's hits a moment after the last response.
        calls["n"] += 1
        if calls["n"] == 3:
            fake.hits.labels(**fake.engine(0)).inc(64)
            fake.queries.labels(**fake.engine(0)).inc(64)
        return fake.fetch(path)

    probe = EngineMetricsProbe(VLLM_NAMES, "http://unused", fetch=late_fetch, interval=60)
    with probe:
        pass
    assert probe.metrics["engine_prefix_cache_hits"] == 64


def test_unreadable_page_is_a_note_not_a_failure() -> None:
    names = get_engine("sglang").engine_metrics
    assert names is not None
    probe = EngineMetricsProbe(names, "http://unused", fetch=lambda path: (404, "Not Found"))
    with probe:
        pass
    assert probe.metrics == {}
    assert probe.note == (
        "engine metrics not read: GET /metrics answered 404 (start SGLang with --enable-metrics)"
    )
    garbage = EngineMetricsProbe(names, "http://unused", fetch=lambda path: (200, "{not prom"))
    with garbage:
        pass
    assert garbage.metrics == {}
    assert garbage.note == (
        "engine metrics not read: GET /metrics has none of sglang:token_usage, "
        "sglang:num_running_reqs, sglang:num_queue_reqs, sglang:prompt_tokens, "
        "sglang:cached_tokens, sglang:num_retracted_requests, sglang:queue_time_seconds"
    )
    broken = "sglang:num_running_reqs{a=} nope\n"
    malformed = EngineMetricsProbe(names, "http://unused", fetch=lambda path: (200, broken))
    with malformed:
        pass
    assert malformed.note is not None
    assert malformed.note.startswith("engine metrics not read")


def test_an_unreachable_server_is_a_note() -> None:
    probe = EngineMetricsProbe(EngineMetricNames(), "http://127.0.0.1:9")
    with probe:
        pass
    assert probe.metrics == {}
    assert probe.note is not None
    assert "engine metrics not read" in probe.note


def test_hit_rate_is_gated_upwards() -> None:
    assert direction_of("engine_prefix_cache_hit_rate") is Direction.HIGHER_IS_BETTER
    assert direction_of("engine_mean_queue_time_ms") is Direction.LOWER_IS_BETTER
    entry = recorded_entry(
        "shared-prefix",
        {"engine_prefix_cache_hit_rate": 72.0, "total_token_throughput": 100.0},
        {"engine_prefix_cache_hit_rate": 20.0},
    )
    off = compare(entry, {"engine_prefix_cache_hit_rate": 0.0, "total_token_throughput": 100.0})
    assert next((row.metric, row.status) for row in off) == (
        "engine_prefix_cache_hit_rate",
        "regressed",
    )
    better = compare(entry, {"engine_prefix_cache_hit_rate": 70.0})
    assert better[0].status == "pass"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed")
def test_only_the_named_families_are_parsed() -> None:
    fake = FakeVLLMRegistry()
    fake.queries.labels(**fake.engine(0)).inc(10)
    fake.queue.labels(**fake.engine(0)).observe(0.5)
    fake.running.labels(**fake.engine(0)).set(2)
    text = fake.fetch("/metrics")[1]
    whole = parse(text)
    some = parse(text, families_of(VLLM_NAMES, gauges_only=True))
    assert set(some.sums) == {"vllm:num_requests_running"}
    assert some.gauge(VLLM_NAMES.running) == whole.gauge(VLLM_NAMES.running) == 2
    named = parse(text, families_of(VLLM_NAMES))
    assert named.counter(VLLM_NAMES.prefix_cache_queries) == 10
    assert named.histogram(VLLM_NAMES.queue_time) == whole.histogram(VLLM_NAMES.queue_time)
    assert not [name for name in named.sums if name.endswith("_bucket")]


def test_vllm_names_exist_in_the_installed_vllm() -> None:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None
    assert spec.origin is not None
    source = "".join(
        path.read_text(encoding="utf-8")
        for path in (Path(spec.origin).parent / "v1" / "metrics").glob("*.py")
    )
    for name in (
        VLLM_NAMES.prefix_cache_queries,
        VLLM_NAMES.prefix_cache_hits,
        VLLM_NAMES.preemptions,
        VLLM_NAMES.queue_time,
        VLLM_NAMES.kv_cache_usage,
        VLLM_NAMES.running,
        VLLM_NAMES.waiting,
    ):
        assert f'"{name}"' in source, name


def test_a_real_vllm_page() -> None:
    """vLLM 0.32's own page (the embedded model, idle, captured from a running server):
    every family the spec names is there, and reading only those gives the whole page's
    values."""
    text = (Path(__file__).parent / "data" / "vllm-0.32-metrics.txt").read_text()
    whole = parse(text)
    named = parse(text, families_of(VLLM_NAMES))
    for counter in (
        VLLM_NAMES.prefix_cache_queries,
        VLLM_NAMES.prefix_cache_hits,
        VLLM_NAMES.preemptions,
    ):
        assert named.counter(counter) is not None, counter
        assert named.counter(counter) == whole.counter(counter)
    assert named.histogram(VLLM_NAMES.queue_time) == whole.histogram(VLLM_NAMES.queue_time)
    for gauge in (VLLM_NAMES.kv_cache_usage, VLLM_NAMES.running, VLLM_NAMES.waiting):
        assert named.gauge(gauge) is not None, gauge
    assert len(named.sums) < len(whole.sums) / 4
