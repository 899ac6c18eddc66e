"""Run-to-run spread of every profile of the embedded default, at the scale CI runs it.

A script, not a test: it prints figures. One vLLM server (CPU build, embedded tiny model,
started as the plugin starts it); then ``--rounds`` rounds, each measuring every profile
once with ``runner.measure`` (warm-ups, prefix-cache reset, the profile's load). Profiles are
interleaved, so a burst of load from elsewhere on the machine hits all of them alike.

For each profile and metric it prints the median, the coefficient of variation (CV, sample
standard deviation over the mean) and the largest distance of one run from the median
(what a single-run gate with a fixed tolerance has to absorb), plus the machine's load.

    python tests/bench/noise_spread.py [--rounds 10] [--profiles short,medium] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from noise_support import (
    WATCHED,
    cv_pct,
    embedded_server,
    load_average,
    wait_for_quiet,
    worst_pct,
)

from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import measure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--profiles", default=",".join(builtin_profiles()))
    parser.add_argument("--warmups", type=int, default=None, help="default: the plugin's")
    parser.add_argument("--engine-args", default="", help="extra vLLM arguments")
    parser.add_argument("--json", type=Path, help="write every run's metrics here")
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=None,
        help="before each round, wait (at most 10 min) until the 1-minute load average is "
        "under this (the machine may be shared)",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.profiles.split(",") if n.strip()]

    values: dict[str, dict[str, list[float]]] = {n: {m: [] for m in WATCHED} for n in names}
    seconds: dict[str, list[float]] = {n: [] for n in names}
    loads: list[float] = []
    raw: list[dict[str, object]] = []
    started = time.monotonic()
    with embedded_server(args.engine_args.split(), warmups=args.warmups) as embedded:
        print(f"server up in {time.monotonic() - started:.0f} s; {embedded.target.command}")
        for round_no in range(args.rounds):
            wait_for_quiet(args.quiet_below, 600.0)
            for name in names:
                profile = embedded.profile(name)
                loads.append(load_average())
                t0 = time.monotonic()
                run = measure(
                    embedded.target, profile, embedded.workloads, embedded.settings, headers={}
                )
                seconds[name].append(time.monotonic() - t0)
                if run.failed:
                    print(f"  {name}: {run.failed} failed: {run.errors[:1]}")
                for metric in WATCHED:
                    value = run.metrics.get(metric)
                    if isinstance(value, (int, float)):
                        values[name][metric].append(float(value))
                raw.append({"round": round_no, "profile": name, "load": loads[-1], **run.metrics})
            line = "  ".join(f"{n}={values[n]['total_token_throughput'][-1]:.0f}" for n in names)
            print(
                f"round {round_no + 1}/{args.rounds} load {loads[-1]:.2f}  tok/s: {line}",
                flush=True,
            )
    print()
    print(
        f"load average (1 min) during the runs: min {min(loads):.2f}, median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}"
    )
    print()
    header = f"{'profile':<13} {'metric':<23} {'median':>11} {'CV %':>6} {'worst %':>8}  runs"
    print(header)
    print("-" * len(header))
    for name in names:
        for metric in WATCHED:
            series = values[name][metric]
            if not series:
                continue
            print(
                f"{name:<13} {metric:<23} {statistics.median(series):>11.4g} "
                f"{cv_pct(series):>6.1f} {worst_pct(series):>8.1f}  {len(series)}"
            )
        print(f"{name:<13} {'(seconds per run)':<23} {statistics.median(seconds[name]):>11.1f}")
    if args.json:
        args.json.write_text(json.dumps({"runs": raw, "loads": loads}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
