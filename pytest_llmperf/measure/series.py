"""A compact picture of one run for the plots: latency distributions and throughput over time.

The metrics keep aggregates only; the HTML report also wants the shape of each distribution and
how throughput moved during the run. Per-request arrays of a 1000-prompt run (and ITL gaps by
the hundred thousand) would bloat the ledger and the JSON, so each distribution is kept as at
most ``QUANTILES`` evenly spaced quantiles (all values when there are fewer), which is what a
box plot or an ECDF needs, and the timeline as about ``TARGET_BUCKETS`` buckets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pytest_llmperf.models import RequestRecord

QUANTILES = 201
TARGET_BUCKETS = 100  # enough to see ramp-up, steady state and tail; few enough to stay small
MIN_BUCKET_S = 0.01
DISTRIBUTIONS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")


def _compact(values: Any) -> list[float]:
    data: Any = np.sort(np.asarray(values, dtype=np.float64))
    if data.size > QUANTILES:
        data = np.quantile(data, np.linspace(0.0, 1.0, QUANTILES))
    return [round(float(v), 3) for v in data]


def summarize(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Distributions (ms) of the successful requests and output tokens per second over time."""
    ok = [r for r in records if r.success]
    if not ok:
        return {}
    ttft = [r.ttft * 1000.0 for r in ok]
    tpot = [
        (r.latency - r.ttft) / (r.output_tokens - 1) * 1000.0 for r in ok if r.output_tokens > 1
    ]
    itl = np.concatenate([np.frombuffer(r.itl, dtype=np.float64) for r in ok]) * 1000.0
    e2el = [r.latency * 1000.0 for r in ok]
    series: dict[str, Any] = {
        "requests": len(ok),
        "ttft_ms": _compact(ttft),
        "tpot_ms": _compact(tpot),
        "itl_ms": _compact(itl),
        "e2el_ms": _compact(e2el),
    }
    series["timeline"] = timeline(ok)
    return series


def timeline(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Output tokens per second in time buckets from the first request's start (at most
    ``TARGET_BUCKETS`` buckets of a round width; see ``bucket_width``).

    A record knows when each chunk arrived (first token at ``ttft``, then the ITL gaps); its
    output tokens are spread evenly over its chunks, since an engine may send several tokens
    in one chunk.
    """
    t0 = min(r.start_time for r in records)
    times: list[Any] = []
    weights: list[Any] = []
    for r in records:
        if r.output_tokens <= 0:
            continue
        arrivals = r.start_time - t0 + r.ttft + np.concatenate(([0.0], np.cumsum(r.itl)))
        times.append(arrivals)
        weights.append(np.full(arrivals.size, r.output_tokens / arrivals.size))
    end = max(max(r.start_time - t0 + r.latency for r in records), 1e-3)
    width = bucket_width(end)
    count = max(1, math.ceil(end / width))
    tokens: Any = np.zeros(count)
    if times:
        index = np.minimum((np.concatenate(times) / width).astype(np.int64), count - 1)
        tokens = np.bincount(np.maximum(index, 0), weights=np.concatenate(weights), minlength=count)
    # The last bucket is cut short by the end of the run: a rate over its real length.
    lengths = np.full(count, width)
    lengths[-1] = max(end - (count - 1) * width, 1e-3)
    return {
        "bucket_s": width,
        "output_tok_s": [round(float(v), 2) for v in tokens[:count] / lengths],
    }


def bucket_width(duration: float) -> float:
    """The smallest round width (1, 2 or 5 times a power of ten, at least ``MIN_BUCKET_S``)
    that cuts ``duration`` into at most ``TARGET_BUCKETS`` buckets."""
    raw = duration / TARGET_BUCKETS
    power = 10.0 ** math.floor(math.log10(raw))
    for step in (1.0, 2.0, 5.0, 10.0):
        if raw <= step * power:
            return max(round(step * power, 6), MIN_BUCKET_S)
    return max(10.0 * power, MIN_BUCKET_S)  # pragma: no cover - the loop always returns
