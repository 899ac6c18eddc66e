"""What the engine itself counted during a measured run, read from its Prometheus metrics.

The client sees latencies; only the engine knows why: how much of the prompts its prefix cache
served, how long requests queued before being scheduled, whether it preempted any, how full the
KV cache got. The engine's metrics page is read just before the measured requests and again
after them; counters and histograms give the run's deltas, and gauges (which only say "now")
are sampled about once a second in between for their peaks.

Every key starts with ``engine_`` and lands in the run's metrics next to the client's, so the
baseline records them, reports show them and a tolerance can gate them (the hit rate improves
upwards; see ``gate.verdict.direction_of``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import httpx

from pytest_llmperf.engines.base import EngineMetricNames

__all__ = ["EngineMetricsProbe", "Snapshot", "deltas", "families_of", "parse"]

# Seconds between gauge samples during a run: often enough to see a peak of a run that lasts
# seconds, rare enough that parsing the page (milliseconds) does not compete with the client.
# The first sample is taken sooner and the gap doubles up to the interval.
SAMPLE_INTERVAL_S = 1.0
FIRST_SAMPLE_S = 0.1

# Counters settle after the last response: the engine records a step's stats around the time
# it sends the tokens. Scrape again until two reads agree, at most this many times.
SETTLE_READS = 5
SETTLE_GAP_S = 0.2

Fetch = Callable[[str], tuple[int, str]]


@dataclass(frozen=True)
class Snapshot:
    """One read of a metrics page: each sample name's sum and max over its label sets."""

    sums: dict[str, float] = field(default_factory=dict)
    maxes: dict[str, float] = field(default_factory=dict)

    def counter(self, name: str | None) -> float | None:
        if name is None:
            return None
        return self.sums.get(f"{name}_total", self.sums.get(name))

    def histogram(self, name: str | None) -> tuple[float, float] | None:
        if name is None or f"{name}_count" not in self.sums:
            return None
        return self.sums.get(f"{name}_sum", 0.0), self.sums[f"{name}_count"]

    def gauge(self, name: str | None, *, largest: bool = False) -> float | None:
        """Summed over label sets (requests of several engine cores add up), or the
        largest of them (a usage fraction does not add up)."""
        if name is None:
            return None
        return (self.maxes if largest else self.sums).get(name)


_SUFFIXES = ("", "_total", "_sum", "_count")


def _wanted_lines(text: str, families: Collection[str]) -> str:
    """Only the lines of ``families`` (their samples, HELP and TYPE), so the parser reads a
    few lines instead of every histogram bucket (vLLM's page is about 50 kB)."""
    names = {family + suffix for family in families for suffix in _SUFFIXES}
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(maxsplit=3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE") and parts[2] in names:
                kept.append(line)
            continue
        end = len(line)
        for mark in ("{", " "):
            found = line.find(mark)
            if 0 <= found < end:
                end = found
        if line[:end] in names:
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse(text: str, families: Collection[str] | None = None) -> Snapshot:
    """A Prometheus text page read by prometheus-client's parser (ValueError when malformed);
    only ``families`` when given."""
    from prometheus_client.parser import text_string_to_metric_families

    if families is not None:
        text = _wanted_lines(text, families)
    sums: dict[str, float] = {}
    maxes: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith(("_bucket", "_created")) or math.isnan(sample.value):
                continue
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
            maxes[sample.name] = max(maxes.get(sample.name, -math.inf), sample.value)
    return Snapshot(sums, maxes)


def families_of(names: EngineMetricNames, *, gauges_only: bool = False) -> list[str]:
    gauges = [names.kv_cache_usage, names.running, names.waiting]
    others = [names.prefix_cache_queries, names.prefix_cache_hits, names.preemptions]
    chosen = gauges if gauges_only else [*gauges, *others, names.queue_time]
    return [name for name in chosen if name]


def deltas(
    names: EngineMetricNames, before: Snapshot, after: Snapshot, samples: list[Snapshot]
) -> dict[str, float]:
    """The run's engine-side metrics: counter and histogram deltas, gauge peaks."""
    result: dict[str, float] = {}

    def moved(name: str | None) -> float | None:
        end = after.counter(name)
        if end is None:
            return None
        # A labelled counter appears when first counted: absent before is zero before.
        start = before.counter(name) or 0.0
        # A counter that went down means the engine restarted in between: no delta to give.
        return end - start if end >= start else None

    queries, hits = moved(names.prefix_cache_queries), moved(names.prefix_cache_hits)
    if queries is not None and hits is not None:
        result["engine_prefix_cache_queries"] = queries
        result["engine_prefix_cache_hits"] = hits
        # No lookups (caching off, or nothing sent) is no hit: 0 %, so a gate on the rate
        # fails a run with the cache turned off instead of missing the metric.
        result["engine_prefix_cache_hit_rate"] = 100.0 * hits / queries if queries > 0 else 0.0
    preemptions = moved(names.preemptions)
    if preemptions is not None:
        result["engine_preemptions"] = preemptions
    start_hist = before.histogram(names.queue_time) or (0.0, 0.0)
    end_hist = after.histogram(names.queue_time)
    if end_hist is not None and end_hist[1] > start_hist[1]:
        waited = end_hist[0] - start_hist[0]
        result["engine_mean_queue_time_ms"] = 1000.0 * waited / (end_hist[1] - start_hist[1])
    seen = [*samples, after]
    for key, name, largest, scale in (
        ("engine_peak_kv_cache_usage_pct", names.kv_cache_usage, True, 100.0),
        ("engine_peak_running", names.running, False, 1.0),
        ("engine_peak_waiting", names.waiting, False, 1.0),
    ):
        values = [v for s in seen if (v := s.gauge(name, largest=largest)) is not None]
        if values:
            result[key] = scale * max(values)
    return result


def _http_fetch(base_url: str, headers: dict[str, str]) -> Fetch:
    def fetch(path: str) -> tuple[int, str]:
        response = httpx.get(base_url + path, headers=headers, timeout=10.0, trust_env=False)
        return response.status_code, response.text

    return fetch


class EngineMetricsProbe:
    """Reads an engine's metrics around one measured run (``with probe: run...``).

    Never fails the run: a page that cannot be read leaves the metrics out and says why in
    ``note``.
    """

    def __init__(
        self,
        names: EngineMetricNames,
        base_url: str,
        headers: dict[str, str] | None = None,
        *,
        fetch: Fetch | None = None,
        interval: float = SAMPLE_INTERVAL_S,
    ) -> None:
        self.names = names
        self._fetch = fetch or _http_fetch(base_url, headers or {})
        self._interval = interval
        self._before: Snapshot | None = None
        self._samples: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.metrics: dict[str, float] = {}
        self.note: str | None = None

    def _read(self, *, gauges_only: bool = False) -> Snapshot:
        status, body = self._fetch(self.names.path)
        if status != 200:
            hint = f" ({self.names.hint})" if self.names.hint else ""
            raise ValueError(f"GET {self.names.path} answered {status}{hint}")
        return parse(body, families_of(self.names, gauges_only=gauges_only))

    def _sample(self) -> None:
        # The first samples come quickly and then less often, so that a run lasting well
        # under a second still shows its peak, and a long one is read once a second.
        gap = min(FIRST_SAMPLE_S, self._interval)
        while not self._stop.wait(gap):
            gap = min(2 * gap, self._interval)
            try:
                self._samples.append(self._read(gauges_only=True))
            except (httpx.HTTPError, ValueError):
                continue  # a missed sample only makes the peak coarser

    def __enter__(self) -> EngineMetricsProbe:
        try:
            before = self._read()
        except (httpx.HTTPError, ValueError) as exc:
            self.note = f"engine metrics not read: {exc}"
            return self
        if not before.sums:
            wanted = ", ".join(families_of(self.names))
            self.note = f"engine metrics not read: GET {self.names.path} has none of {wanted}"
            return self
        self._before = before
        self._thread = threading.Thread(target=self._sample, name="engine-metrics", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._before is None or exc_info[0] is not None:
            return
        try:
            after = self._settled()
        except (httpx.HTTPError, ValueError) as exc:
            self.note = f"engine metrics not read after the run: {exc}"
            return
        self.metrics = deltas(self.names, self._before, after, self._samples)

    def _settled(self) -> Snapshot:
        last = self._read()
        for _ in range(SETTLE_READS):
            time.sleep(SETTLE_GAP_S)
            again = self._read()
            if self._counters(again) == self._counters(last):
                return again
            last = again
        return last

    def _counters(self, snapshot: Snapshot) -> tuple[float | None, ...]:
        names = self.names
        queued = snapshot.histogram(names.queue_time)
        return (
            snapshot.counter(names.prefix_cache_queries),
            snapshot.counter(names.prefix_cache_hits),
            snapshot.counter(names.preemptions),
            queued[1] if queued else None,
        )
