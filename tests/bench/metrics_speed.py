"""Micro-benchmark: how long compute_metrics takes for a large run.

Prints seconds for 100,000 synthetic successful records of 100 token chunks each (10 million
ITL samples), with three percentiles and goodput on. Run:

    python tests/bench/metrics_speed.py [n_records] [chunks_per_record]
"""

from __future__ import annotations

import sys
import time
from array import array

import numpy as np

from pytest_llmperf.measure.metrics import compute_metrics
from pytest_llmperf.models import RequestRecord


def synthetic_records(n: int, chunks: int, seed: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    starts = np.sort(rng.uniform(0.0, 600.0, n))
    ttfts = rng.gamma(2.0, 0.05, n)
    gaps = rng.gamma(2.0, 0.01, (n, chunks - 1))
    records = []
    for i in range(n):
        itl = array("d", gaps[i].tobytes())
        records.append(
            RequestRecord(
                success=True,
                start_time=float(starts[i]),
                ttft=float(ttfts[i]),
                itl=itl,
                latency=float(ttfts[i] + gaps[i].sum()),
                output_tokens=chunks,
                prompt_len=512,
                chunks=chunks,
            )
        )
    return records


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    chunks = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    t = time.perf_counter()
    records = synthetic_records(n, chunks)
    build = time.perf_counter() - t
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        metrics = compute_metrics(
            records,
            700.0,
            percentiles=(50, 90, 99),
            goodput_slos_ms={"ttft": 200, "tpot": 30, "e2el": 3000},
        )
        best = min(best, time.perf_counter() - t)
    print(f"records: {n} x {chunks} chunks (built in {build:.2f} s)")
    print(f"compute_metrics: {best:.3f} s (best of 3)")
    print(
        f"max_output_tokens_per_s={metrics['max_output_tokens_per_s']:.0f} "
        f"mean_itl_ms={metrics['mean_itl_ms']:.3f}"
    )


if __name__ == "__main__":
    main()
