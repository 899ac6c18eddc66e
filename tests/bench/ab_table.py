"""A/B experiments on the real CPU server: false alarms, detections, pairs and minutes.

A script, not a test: it prints a table. Two vLLM servers (CPU build, embedded tiny model,
started as the plugin starts them) serve at once: A as is, B slowed inside the engine, by an
amount read from a control file, so one pair of servers serves every row. ``--mechanism step``
(the default) loads tests/bench/engine_slowdown into B's vLLM: every engine step then waits,
asleep, for the set share of its time; ``--mechanism stop`` runs B under
tests/bench/cpu_slowdown.py (SIGSTOP for a share of every 100 ms; not calibratable on two
cores, docs/noise.md). With ``step``, B's engine logs the busy and added seconds, and the table
shows the share really added. Per
profile and slowdown, ``--experiments`` A/B experiments (``gate.ab.run_ab`` exactly as
``pytest --llmperf-ab`` runs it: runs A,B,B,A,..., warm-ups and a fresh cache salt before
each, the sequential rule with ``--budget`` pairs, by default the plugin's for the profile
on the embedded default). Rows run in a shuffled order per round, so
that load from elsewhere falls on every row alike.

A slowdown of 0 % that ends "regressed" is a false alarm; a slowed B that ends "regressed" is
a detection. "B/A TPOT" is the median over the row's experiments of the measured median ratio
of mean TPOT: the calibration (what the nominal CPU slowdown did to this workload).

    python tests/bench/ab_table.py [--profiles short,medium] [--experiments 20]
                                   [--slowdowns 0,5,10,20] [--budget N] [--json out.json]
                                   [--tolerances total_token_throughput=5]
    python tests/bench/ab_table.py --from-json first.json second.json   # saved runs, pooled

``--tolerances`` gates the named metrics only, as a test's
``@pytest.mark.llmperf(tolerances={...})`` does (default: gate.ab.AB_TOLERANCES, throughput and
mean TPOT at 5 %).

``--from-json`` prints the table of saved runs; given several files (say a table stopped for
time and its continuation, on the same machine class and with the same budget), it pools
their experiments cell by cell.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, Python puts only tests/bench on the path; tests.support is the repository's.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from noise_support import parse_tolerances

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.config import Settings
from pytest_llmperf.engines.held_interrupts import interrupts_held
from pytest_llmperf.engines.session import EngineSession
from pytest_llmperf.gate.ab import AB_TOLERANCES, ABRequest, run_ab
from pytest_llmperf.gate.paired import SequentialPlan
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Workloads, ab_budget, measure, scaled_profile
from tests.support.engine_slowdown import pythonpath_with_slowdown

HERE = Path(__file__).resolve().parent
DECIDED = ("same", "regressed", "improved", "inconclusive")


def _row(profile: str, slowdown: float, results: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = [r["outcome"] for r in results]
    ratios = [r["tpot_ratio"] for r in results if r["tpot_ratio"] is not None]
    speeds = [r["throughput_ratio"] for r in results if r.get("throughput_ratio") is not None]
    added = [r["added_pct"] for r in results if r.get("added_pct") is not None]
    spreads = [r["tpot_log_sd"] for r in results if r.get("tpot_log_sd") is not None]
    speed_spreads = [
        r["throughput_log_sd"] for r in results if r.get("throughput_log_sd") is not None
    ]
    return {
        "profile": profile,
        "slowdown_pct": slowdown,
        "experiments": len(results),
        "regressed": outcomes.count("regressed"),
        "same": outcomes.count("same"),
        "improved": outcomes.count("improved"),
        "inconclusive": outcomes.count("inconclusive"),
        "other": len(outcomes)
        - sum(outcomes.count(k) for k in ("regressed", "same", "improved", "inconclusive")),
        "median_pairs": statistics.median(r["pairs"] for r in results) if results else None,
        "median_minutes": statistics.median(r["minutes"] for r in results) if results else None,
        "tpot_ratio": statistics.median(ratios) if ratios else None,
        "throughput_ratio": statistics.median(speeds) if speeds else None,
        "added_pct": statistics.median(added) if added else None,
        "tpot_log_sd": statistics.median(spreads) if spreads else None,
        "throughput_log_sd": statistics.median(speed_spreads) if speed_spreads else None,
    }


def _slowed_settings(
    mechanism: str,
    warmups: int,
    control: Path,
    log: Path,
    burn: bool = False,
    pinned: tuple[tuple[str, str], ...] = (),
) -> Settings:
    """B's settings: the same engine, slowed by the percent in ``control`` (``burn``: the
    step plugin keeps the CPU busy for it instead of sleeping; ``pinned``: the environment
    that binds its compute threads)."""
    if mechanism == "stop":
        return Settings(
            engines=("vllm",),
            warmups=warmups,
            engine_bin=str(HERE / "python-slowed"),
            engine_env=(
                ("LLMPERF_SLOWDOWN_PYTHON", sys.executable),
                ("LLMPERF_SLOWDOWN_FILE", str(control)),
            ),
        )
    return Settings(
        engines=("vllm",),
        warmups=warmups,
        engine_env=(
            ("PYTHONPATH", pythonpath_with_slowdown()),
            ("LLMPERF_SLOWDOWN_FILE", str(control)),
            ("LLMPERF_SLOWDOWN_LOG", str(log)),
            *((("LLMPERF_SLOWDOWN_BURN", "1"),) if burn else ()),
            *pinned,
        ),
    )


def _log_sd(ratios: list[float] | None) -> float | None:
    """The spread of one experiment's pair ratios: the standard deviation of their logs
    (``tests/bench/ab_power.py`` turns it into detection rates for a budget)."""
    logs = [math.log(r) for r in ratios or [] if r and r > 0]
    return round(statistics.stdev(logs), 4) if len(logs) >= 3 else None


def _median_or_none(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


Totals = tuple[float, float]  # the engine's busy and added seconds


def _added_share(log: Path, before: Totals) -> tuple[Totals, float | None]:
    """The engine's (busy, added) seconds now, and the share added since ``before``."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return before, None
    if not lines:
        return before, None
    last = json.loads(lines[-1])
    now = (float(last["busy_s"]), float(last["added_s"]))
    busy = now[0] - before[0]
    return now, ((now[1] - before[1]) / busy if busy > 0 else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="short")
    parser.add_argument("--experiments", type=int, default=20)
    parser.add_argument("--slowdowns", default="0,5,10,20")
    # Default: the plugin's (20, or the profile's embedded_ab_budget).
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--warmups", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--mechanism", choices=("step", "stop"), default="step")
    parser.add_argument(
        "--burn",
        action="store_true",
        help="step mechanism: B's engine burns the CPU for its share instead of sleeping",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="A's engine computes on core 0 and B's on core 1 (VLLM_CPU_OMP_THREADS_BIND)",
    )
    parser.add_argument(
        "--simultaneous",
        action="store_true",
        help="each pair's A and B run at the same time (gate.ab ABRequest.simultaneous)",
    )
    parser.add_argument(
        "--tolerances",
        default=None,
        help="gate only these metrics: METRIC=PERCENT,... (default: throughput and mean TPOT, 5)",
    )
    parser.add_argument(
        "--from-json", type=Path, nargs="+", default=None, help="print saved runs' table, pooled"
    )
    args = parser.parse_args()
    if args.from_json:
        print_table(pooled_rows(args.from_json))
        return
    # The table reads these two metrics' ratios; another metric would gate unseen.
    tolerances = parse_tolerances(args.tolerances, allowed=AB_TOLERANCES)
    slowdowns = [float(s) for s in args.slowdowns.split(",")]
    profiles = args.profiles.split(",")
    work = Path(tempfile.mkdtemp(prefix="llmperf-ab-table-"))
    control = work / "slowdown"
    control.write_text("0", encoding="utf-8")
    # --pin: each engine's compute threads on a core of their own, so simultaneous runs do
    # not take compute time from each other (the API servers and the client still float).
    pin_a = (("VLLM_CPU_OMP_THREADS_BIND", "0"),) if args.pin else ()
    pin_b = (("VLLM_CPU_OMP_THREADS_BIND", "1"),) if args.pin else ()
    settings = Settings(engines=("vllm",), warmups=args.warmups)
    reference_settings = Settings(engines=("vllm",), warmups=args.warmups, engine_env=pin_a)
    added_log = work / "added.jsonl"  # B's engine writes it (step mechanism only)
    if args.burn and args.mechanism != "step":
        raise SystemExit("--burn: only the step mechanism can burn the CPU; drop --mechanism")
    if args.pin and args.mechanism != "step":
        raise SystemExit(
            "--pin: only the step mechanism's B takes an environment; drop --mechanism"
        )
    slowed = _slowed_settings(args.mechanism, args.warmups, control, added_log, args.burn, pin_b)
    reference = EngineSession(reference_settings, "vllm", work / "a", variant="A")
    candidate = EngineSession(slowed, "vllm", work / "b", variant="B")
    shuffle = random.Random(args.seed)
    results: dict[tuple[str, float], list[dict[str, Any]]] = {}
    started = time.monotonic()
    engine_seconds = (0.0, 0.0)
    try:
        a = reference.start()
        b = candidate.start()
        print(f"servers up after {time.monotonic() - started:.0f} s", flush=True)
        workloads = Workloads(settings, work / "data")
        for round_index in range(args.experiments):
            for name in profiles:
                profile = scaled_profile(builtin_profiles()[name], settings, embedded=True)
                order = list(slowdowns)
                shuffle.shuffle(order)
                for slowdown in order:
                    control.write_text(str(slowdown), encoding="utf-8")
                    request = ABRequest(
                        reference=a,
                        candidate=b,
                        profile=profile,
                        hardware="cpu",
                        plan=SequentialPlan(
                            budget=args.budget or ab_budget(profile, settings, embedded=True)
                        ),
                        tolerances=tolerances,
                        # The metric --tolerances left ungated keeps its pairs' ratios.
                        watch=tuple(AB_TOLERANCES),
                        simultaneous=args.simultaneous,
                    )

                    def run_on(target: Any, chosen: Any = profile) -> Any:
                        return lambda: measure(target, chosen, workloads, settings, headers={})

                    result = run_ab(request, run_on(a), run_on(b))
                    time.sleep(0.5)  # B's engine logs its totals every 0.2 s
                    engine_seconds, added = _added_share(added_log, engine_seconds)
                    ab = result.ab or {}
                    metrics = ab.get("metrics", {})
                    tpot = metrics.get("mean_tpot_ms", {})
                    watched = ab.get("watched_ratios", {})
                    throughput = metrics.get("total_token_throughput", {})
                    record = {
                        "round": round_index,
                        "outcome": result.verdict.outcome.value,
                        "pairs": ab.get("pairs"),
                        "minutes": ab.get("minutes"),
                        "tpot_ratio": tpot.get("median_ratio")
                        or _median_or_none(watched.get("mean_tpot_ms")),
                        "throughput_ratio": throughput.get("median_ratio")
                        or _median_or_none(watched.get("total_token_throughput")),
                        "added_pct": None if added is None else round(100 * added, 2),
                        "tpot_log_sd": _log_sd(
                            ab.get("ratios", {}).get("mean_tpot_ms") or watched.get("mean_tpot_ms")
                        ),
                        "throughput_log_sd": _log_sd(
                            ab.get("ratios", {}).get("total_token_throughput")
                            or watched.get("total_token_throughput")
                        ),
                        "load": round(os.getloadavg()[0], 2),
                        # Every pair's ratio B/A and each metric's tolerance, so that another
                        # stopping rule can be replayed on the same pairs (ab_replay.py).
                        "ratios": ab.get("ratios", {}),
                        # The same for a metric watched but not gated (--tolerances left it
                        # out): what the slowdown did to it, outside the verdict.
                        "watched_ratios": watched,
                        "tolerances": {
                            metric: fields.get("tolerance_pct")
                            for metric, fields in metrics.items()
                        },
                        # An inconclusive verdict's planning notes: the budget that would
                        # decide each undecided metric (gate.paired.budget_to_decide).
                        "advice": list(result.verdict.notes[1:])
                        if result.verdict.outcome.value == "inconclusive"
                        else [],
                        # Why an experiment ended without a verdict (a run that failed
                        # requests or gave no ratio): kept, since the table only counts it.
                        "reason": list(result.verdict.notes)
                        if result.verdict.outcome.value not in DECIDED
                        else [],
                        # Pairs measured again after a run with no TPOT sample (gate.ab).
                        "remeasured": list(ab.get("remeasured", [])),
                    }
                    results.setdefault((name, slowdown), []).append(record)
                    print(f"{name} {slowdown:g}% round {round_index}: {record}", flush=True)
                    if args.json:  # after every experiment: a stopped table keeps its rows
                        _write(args.json, profiles, slowdowns, results)
    finally:
        control.write_text("0", encoding="utf-8")
        with interrupts_held():  # a second Ctrl-C must not leave the reference running
            candidate.stop()
            reference.stop()
    # Only after a clean end: a failed or stopped table keeps the servers' logs to read.
    # The JSON keeps what the table needs; the folders and B's step log are scratch.
    shutil.rmtree(work, ignore_errors=True)
    print_table(_rows(profiles, slowdowns, results))
    print(f"total {(time.monotonic() - started) / 60:.1f} min")


def _rows(
    profiles: list[str],
    slowdowns: list[float],
    results: dict[tuple[str, float], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """One row per (profile, slowdown) asked for, in the order asked, empty ones included."""
    return [_row(p, s, results.get((p, s), [])) for p in profiles for s in slowdowns]


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        "profile    slowdown  n   regressed  same  inconcl.  other  pairs  min   "
        "B/A TPOT  B/A thr.  added  spread TPOT/thr."
    )
    print(header)
    for row in rows:
        added = "-" if row["added_pct"] is None else f"{row['added_pct']:.2f}"
        spread = "/".join(
            "-" if row.get(key) is None else f"{row[key]:.3f}"
            for key in ("tpot_log_sd", "throughput_log_sd")
        )
        print(
            f"{row['profile']:<10} {row['slowdown_pct']:>6g} %  {row['experiments']:<3} "
            f"{row['regressed']:<10} {row['same']:<5} {row['inconclusive']:<9} "
            f"{row['other']:<6} {row['median_pairs'] or '-':<6} "
            f"{(row['median_minutes'] or 0):<5.1f} {(row['tpot_ratio'] or 0):<9.3f} "
            f"{(row['throughput_ratio'] or 0):<9.3f} {added:<6} {spread}"
        )


def saved_runs(paths: list[Path]) -> dict[tuple[str, float], list[dict[str, Any]]]:
    """Every experiment saved by ``--json`` in ``paths``, pooled per (profile, slowdown)."""
    pooled: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for path in paths:
        try:
            runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
        except (OSError, ValueError, KeyError) as error:
            raise SystemExit(f"{path}: not a table saved by --json ({error})") from None
        for key, records in runs.items():
            profile, _, slowdown = key.rpartition(" ")
            pooled.setdefault((profile, float(slowdown)), []).extend(records)
    return pooled


def pooled_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """One row per (profile, slowdown) over every experiment saved in ``paths``."""
    pooled = saved_runs(paths)
    return [
        _row(profile, slowdown, pooled[profile, slowdown]) for profile, slowdown in sorted(pooled)
    ]


def _write(
    path: Path,
    profiles: list[str],
    slowdowns: list[float],
    results: dict[tuple[str, float], list[dict[str, Any]]],
) -> None:
    rows = _rows(profiles, slowdowns, results)
    runs = {f"{k[0]} {k[1]}": v for k, v in results.items()}
    write_atomically(path, json.dumps({"rows": rows, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
