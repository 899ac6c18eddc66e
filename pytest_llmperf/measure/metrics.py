"""Request records -> the aggregate numbers `vllm bench serve --save-result` writes.

Pure and numpy-only. Every definition follows vLLM 0.32.0 so that a run of the plugin and a
run of vLLM's own client over the same requests give the same figures:

- only successful requests feed sums and distributions;
- TPOT is per request, ``(latency - ttft) / (n_out - 1)``, and only for ``n_out > 1``;
- ITL is pooled over every chunk gap of every successful request;
- statistics use the population std and NumPy's linear percentiles; an empty distribution
  reports 0 everywhere (the gate must use :func:`sample_counts` to tell "no data" from 0);
- the two peaks use one-second buckets anchored at the first successful request's start and
  count token *chunks*, not tokens (vllm-project/vllm issue #37666 explains why that
  undercounts; we keep it for parity).

The work is vectorised: 100,000 records of 100 chunks each take well under the seconds a
Python loop per chunk would.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_llmperf.models import RequestRecord

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Every distribution vLLM can report, in the order it prints and saves them (its fixed order,
# not the order the user selected them in).
PERCENTILE_METRICS: tuple[str, ...] = (
    "ttft",
    "tpot",
    "itl",
    "e2el",
    "client_queue_time",
    "e2el_including_client_queue",
)
DEFAULT_SELECTED: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
GOODPUT_KEYS: tuple[str, ...] = ("ttft", "tpot", "e2el")

# vLLM compares an SLO given in milliseconds with values in seconds after dividing the SLO,
# not after multiplying the value; keeping the same side keeps the inclusive boundary exact.
_MS_PER_S = 1000.0

# Below this many records still streaming at a chunk position, finishing them one by one is
# cheaper than a vectorised step per position.
_FEW_RECORDS = 16


def percentile_key(p: float) -> str:
    """The spelling vLLM uses for a percentile in keys and labels: ``99``, ``99.9``, ``50``."""
    return str(int(p)) if int(p) == p else str(p)


def validate_percentiles(percentiles: Sequence[float]) -> tuple[float, ...]:
    """Check the requested percentiles once, before any work, with a message naming the bad one."""
    checked = []
    for p in percentiles:
        value = float(p)
        if not 0.0 <= value <= 100.0:  # also rejects NaN
            raise ValueError(f"percentile {p!r} is outside [0, 100]")
        checked.append(value)
    return tuple(checked)


def validate_selected(selected: Sequence[str]) -> tuple[str, ...]:
    """Check the metric names whose distributions are wanted (vLLM's --percentile-metrics)."""
    for name in selected:
        if name not in PERCENTILE_METRICS:
            raise ValueError(
                f"unknown percentile metric {name!r}; choose from {', '.join(PERCENTILE_METRICS)}"
            )
    return tuple(selected)


def validate_goodput_slos(slos: Mapping[str, float]) -> dict[str, float]:
    """Check goodput SLOs (milliseconds) the way vLLM's --goodput does, naming the bad key."""
    checked: dict[str, float] = {}
    for key, raw in slos.items():
        if key not in GOODPUT_KEYS:
            raise ValueError(f"goodput SLO key {key!r} is not one of {', '.join(GOODPUT_KEYS)}")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(f"goodput SLO {key!r} must be a number of ms, got {raw!r}") from None
        if math.isnan(value) or value < 0:
            raise ValueError(f"goodput SLO {key!r} must be non-negative ms, got {raw!r}")
        checked[key] = value
    return checked


@dataclass(frozen=True)
class _Columns:
    """The successful records, turned into arrays once."""

    start: FloatArray
    ttft: FloatArray
    latency: FloatArray
    queue_time: FloatArray
    n_out: IntArray
    prompt_len: IntArray
    itl: FloatArray  # every successful request's gaps, concatenated in record order
    itl_lens: IntArray  # how many of those gaps belong to each record
    failed: int

    @property
    def completed(self) -> int:
        return int(self.start.size)


def _columns(records: Sequence[RequestRecord]) -> _Columns:
    ok = [r for r in records if r.success]
    n = len(ok)
    pooled: array[float] = array("d")
    for r in ok:
        # array.extend from another array('d') is a memcpy: the pooled ITL list costs no
        # Python work per chunk.
        pooled.extend(r.itl)
    return _Columns(
        start=np.fromiter((r.start_time for r in ok), np.float64, n),
        ttft=np.fromiter((r.ttft for r in ok), np.float64, n),
        latency=np.fromiter((r.latency for r in ok), np.float64, n),
        queue_time=np.fromiter((r.queue_time for r in ok), np.float64, n),
        n_out=np.fromiter((r.output_tokens for r in ok), np.int64, n),
        prompt_len=np.fromiter((r.prompt_len for r in ok), np.int64, n),
        itl=np.frombuffer(pooled, dtype=np.float64) if pooled else np.zeros(0, np.float64),
        itl_lens=np.fromiter((len(r.itl) for r in ok), np.int64, n),
        failed=len(records) - n,
    )


def _tpots(cols: _Columns) -> FloatArray:
    """Per-request TPOT for the requests that produced more than one token."""
    many = cols.n_out > 1
    return (cols.latency[many] - cols.ttft[many]) / (cols.n_out[many] - 1).astype(np.float64)


def _distribution(cols: _Columns, name: str) -> FloatArray:
    if name == "ttft":
        return cols.ttft
    if name == "tpot":
        return _tpots(cols)
    if name == "itl":
        return cols.itl
    if name == "e2el":
        return cols.latency
    if name == "client_queue_time":
        return cols.queue_time
    if name == "e2el_including_client_queue":
        return cols.latency + cols.queue_time
    raise ValueError(f"unknown percentile metric {name!r}")  # guarded by validate_selected


def _statistics(values: FloatArray, name: str, percentiles: Sequence[float]) -> dict[str, float]:
    # vLLM replaces an empty list by the scalar 0, so every statistic reads 0, not NaN.
    x = values if values.size else np.zeros(1, np.float64)
    out = {
        f"mean_{name}_ms": float(np.mean(x)) * _MS_PER_S,
        f"median_{name}_ms": float(np.median(x)) * _MS_PER_S,
        f"std_{name}_ms": float(np.std(x)) * _MS_PER_S,  # ddof=0: population std, as vLLM
    }
    if percentiles:
        # One call partitions once for all percentiles; the default method is the linear one.
        values_at = np.percentile(x, list(percentiles))
        for p, v in zip(percentiles, values_at, strict=True):
            out[f"p{percentile_key(p)}_{name}_ms"] = float(v) * _MS_PER_S
    return out


def _chunk_times(cols: _Columns) -> FloatArray:
    """Arrival time of every token chunk of every successful request.

    A request's chunks arrive at ``start + ttft`` and then after each of its ITL gaps. The
    running sum is taken gap by gap, exactly as a sequential loop would add them, because a
    differently rounded time can land on the other side of a bucket boundary. Records are
    walked column by column (every record's j-th gap at once), longest first, so the Python
    loop runs once per chunk *position*, not once per chunk.
    """
    n = cols.completed
    lens = cols.itl_lens
    order = np.argsort(-lens, kind="stable")
    lens_desc = lens[order]
    offsets = np.zeros(n, np.int64)
    if n > 1:
        np.cumsum(lens[:-1], out=offsets[1:])
    base = offsets[order]
    current = cols.start[order] + cols.ttft[order]
    out = np.empty(n + int(lens.sum()), np.float64)
    out[:n] = current
    pos = n
    max_len = int(lens_desc[0]) if n else 0
    # active[j]: how many records have a (j+1)-th gap; they are the first active[j] in `order`.
    ascending = lens_desc[::-1]
    active = n - np.searchsorted(ascending, np.arange(max_len), side="right")
    j = 0
    while j < max_len and active[j] >= _FEW_RECORDS:
        k = int(active[j])
        current[:k] += cols.itl[base[:k] + j]
        out[pos : pos + k] = current[:k]
        pos += k
        j += 1
    # The few long records left would cost one loop turn per chunk position; finish each
    # with its own cumsum instead, which also adds sequentially and so rounds the same way.
    for i in range(int(active[j]) if j < max_len else 0):
        rest = cols.itl[base[i] + j : base[i] + lens_desc[i]]
        tail = np.cumsum(np.concatenate(([current[i]], rest)))[1:]
        out[pos : pos + tail.size] = tail
        pos += tail.size
    return out


def _peaks(cols: _Columns) -> tuple[float, int]:
    """Peak chunks per one-second bucket and peak requests active within one bucket."""
    if cols.completed == 0:
        return 0.0, 0
    t0 = float(cols.start.min())
    ends = cols.start + cols.latency
    n_buckets = int(np.ceil(float(ends.max()) - t0)) + 1

    # Python's int() truncates toward zero; astype does the same, so a time a hair before t0
    # (a negative offset) falls into bucket 0 as it does in vLLM.
    buckets = (_chunk_times(cols) - t0).astype(np.int64)
    buckets = buckets[(buckets >= 0) & (buckets < n_buckets)]
    tokens = np.bincount(buckets, minlength=n_buckets)

    # A request counts in every bucket from its start's to its end's, both inclusive: add +1
    # at the first and -1 after the last, then a running sum.
    first = (cols.start - t0).astype(np.int64)
    last = (ends - t0).astype(np.int64)
    alive = last >= first  # a negative latency covers no bucket, as an empty range()
    delta = np.bincount(first[alive], minlength=n_buckets + 1) - np.bincount(
        last[alive] + 1, minlength=n_buckets + 1
    )
    concurrent = np.cumsum(delta[:n_buckets])
    return float(tokens.max()), int(concurrent.max())


def _good_count(cols: _Columns, slos_ms: Mapping[str, float]) -> int:
    good = np.ones(cols.completed, dtype=bool)
    if "ttft" in slos_ms:
        good &= slos_ms["ttft"] / _MS_PER_S >= cols.ttft
    if "tpot" in slos_ms:
        # Requests with a single output token have no TPOT; vLLM counts them as 0 here.
        tpot = np.zeros(cols.completed, np.float64)
        many = cols.n_out > 1
        tpot[many] = _tpots(cols)
        good &= slos_ms["tpot"] / _MS_PER_S >= tpot
    if "e2el" in slos_ms:
        good &= slos_ms["e2el"] / _MS_PER_S >= cols.latency
    return int(good.sum())


def compute_metrics(
    records: Sequence[RequestRecord],
    duration: float,
    *,
    percentiles: Sequence[float] = (99,),
    selected: Sequence[str] = DEFAULT_SELECTED,
    goodput_slos_ms: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The aggregate metrics of one run, keyed and defined as vLLM's result JSON.

    ``duration`` is the wall time from the first dispatch to the last completion (seconds).
    ``selected`` picks the distributions (vLLM's --percentile-metrics); ``percentiles`` their
    percentiles; ``goodput_slos_ms`` the goodput SLOs in ms (``request_goodput`` is None
    without them). Keys come in vLLM's order: the run totals, the two peaks, then for each
    selected distribution (in vLLM's fixed order) mean, median, std and one key per
    percentile. Values are plain ``int``/``float``.
    """
    if not duration > 0:
        raise ValueError(f"duration must be a positive number of seconds, got {duration!r}")
    wanted = set(validate_selected(selected))
    ps = validate_percentiles(percentiles)
    slos = validate_goodput_slos(goodput_slos_ms) if goodput_slos_ms else None

    cols = _columns(records)
    total_input = int(cols.prompt_len.sum())
    total_output = int(cols.n_out.sum())
    peak_chunks, peak_concurrency = _peaks(cols)

    result: dict[str, Any] = {
        "duration": float(duration),
        "completed": cols.completed,
        "failed": cols.failed,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": cols.completed / duration,
        "request_goodput": None if slos is None else _good_count(cols, slos) / duration,
        "output_throughput": total_output / duration,
        "total_token_throughput": (total_input + total_output) / duration,
        "max_output_tokens_per_s": peak_chunks,
        "max_concurrent_requests": peak_concurrency,
    }
    for name in PERCENTILE_METRICS:
        if name in wanted:
            result.update(_statistics(_distribution(cols, name), name, ps))
    return result


def sample_counts(records: Sequence[RequestRecord]) -> dict[str, int]:
    """How many samples each gated distribution had, so that 0 samples reads "no data".

    vLLM reports 0 for an empty distribution; a gate that compared that 0 with a baseline
    would call a run that measured nothing a huge improvement. A request whose whole answer
    came in its first chunk has a TPOT of 0 by vLLM's formula: it stays in the mean, as in
    vLLM, but is no sample of the time per token. A run made only of such requests (what an API
    server stalled through the whole decode would send) measured no TPOT.
    """
    ok = [r for r in records if r.success]
    return {
        "ttft": len(ok),
        "tpot": sum(1 for r in ok if r.output_tokens > 1 and r.latency > r.ttft),
        "itl": sum(len(r.itl) for r in ok),
        "e2el": len(ok),
    }


# The mean each sample count stands behind: a gated mean whose count is 0 measured nothing.
SAMPLE_KEYS = {"ttft": "mean_ttft_ms", "tpot": "mean_tpot_ms", "itl": "mean_itl_ms"}


def missing_samples(samples: Mapping[str, int], gated: Sequence[str]) -> str | None:
    """Why a gated mean is no evidence: its distribution had no sample (``sample_counts``)."""
    for kind, key in SAMPLE_KEYS.items():
        if key in gated and samples.get(kind, 1) == 0:
            return f"{key} has no samples (no request produced the chunks {kind} needs)"
    return None
