"""How steady this machine's CPU is, with no server running: a check before trusting a table.

A script, not a test: it prints figures. It times the same fixed piece of CPU work many times,
with a pause between (as runs of a table are spaced), once as pure Python (what vLLM's API
server and the client spend their time in) and once as a single-threaded numpy matrix product
(what the engine's kernels are). On a machine whose cores keep one speed the times agree
within a few percent; a shared VM whose host throttles or lends its cores shows a CV of tens
of percent, and then every serving figure taken on it spreads as much (docs/noise.md, "A
noisy VM of `cpu-amx-2c`").

    python tests/bench/cpu_steadiness.py [--samples 40] [--pause 0.2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

# One BLAS thread: the figure is one core's speed, not how two cores share the work.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# After the thread settings, which numpy's BLAS reads when it loads.
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from noise_support import cv_pct, load_average, worst_pct


def python_work() -> None:
    total = 0
    for k in range(300_000):
        total += k * k


def matmul_work(matrix: np.ndarray) -> Callable[[], None]:
    def work() -> None:
        for _ in range(60):
            matrix @ matrix

    return work


def timed(work: Callable[[], None], samples: int, pause: float) -> list[float]:
    work()  # the first call pays for caches and page faults, not for the CPU's speed
    seconds = []
    for _ in range(samples):
        started = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - started)
        time.sleep(pause)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between samples")
    args = parser.parse_args()
    if args.samples < 3:
        parser.error("--samples must be at least 3 (a CV needs a spread)")
    if args.pause < 0:
        parser.error("--pause must be 0 or more seconds")
    matrix = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    print(f"load average (1 min) before: {load_average():.2f}")
    header = f"{'work':<22} {'median s':>9} {'CV %':>6} {'worst %':>8} {'slowest/fastest':>16}"
    print(header)
    print("-" * len(header))
    for name, work in (
        ("pure Python loop", python_work),
        ("numpy 512x512 matmul", matmul_work(matrix)),
    ):
        seconds = timed(work, args.samples, args.pause)
        print(
            f"{name:<22} {statistics.median(seconds):>9.3f} {cv_pct(seconds):>6.1f} "
            f"{worst_pct(seconds):>8.1f} {max(seconds) / min(seconds):>16.2f}"
        )
    print(f"load average (1 min) after: {load_average():.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
