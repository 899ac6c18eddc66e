"""False alarms and detections of the gate on the real CPU server, at the scale CI uses.

A script, not a test: it prints a table. One vLLM server (CPU build, embedded tiny model,
started as the plugin starts it) behind the latency-injecting proxy
(tests/support/slow_proxy.py, its own process). Then:

1. the baseline: the profile measured ``--baseline-runs`` times through the proxy at factor
   1 and recorded by the gate itself (``gate.run_gate`` with ``update``: median and spread),
   with the plugin's default tolerances (``--shipped``: those the repository's CPU baseline
   file gives the profile);
2. ``--trials`` rounds; each round runs one gate per level (unchanged, then each injected
   slowdown) in a shuffled order, so that load from elsewhere on the machine falls on every
   level alike. Each gate is ``gate.run_gate`` as ``pytest --engine=vllm --hardware=cpu``
   runs it: ``--repeat`` measurements, a rerun to confirm a regression (``--confirm``).

``--sequential N`` decides each gate with the sequential rule (``--llmperf-sequential N``)
instead; ``--compare N`` runs both gates in every round, on the same baseline and in a
shuffled order, so that the two methods meet the same machine and the same phases.
``--history`` (with ``--compare``) adds a third: the sequential rule with the between-session
spread of a history file (gate/session_spread.py). Its history is what a team's would be: one
line per earlier session, here the median of each earlier round's unchanged repeat-rule gate
(the baseline's own session first); it joins the rounds once the history holds enough
sessions to be used (``session_spread.MIN_SESSIONS``), so its rows count fewer gates.

An unchanged run that ends regressed is a false alarm; a slowed one that ends regressed is a
detection. A slowdown of 20 % stretches TTFT and every gap between chunks by 1.2: TPOT
+20 %, total token throughput -17 %. The "first look" column counts gates whose first
measurement looked regressed, before the confirm rerun.

    python tests/bench/noise_table.py [--trials 20] [--levels 1.1,1.2,1.5] [--profile medium]
                                      [--repeat 5] [--confirm 1] [--sequential N | --compare N]
                                      [--history]
                                      [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

import yaml
from noise_support import embedded_server, load_average, parse_tolerances, wait_for_quiet
from slow_proxy import SlowProxyProcess

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.errors import BaselineError
from pytest_llmperf.gate import session_spread, store
from pytest_llmperf.gate.loop import GateRequest, run_gate
from pytest_llmperf.measure.run import measure
from pytest_llmperf.models import Outcome

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "baselines" / "cpu" / "tiny-qwen3" / "vllm.yaml"
UNCONFIRMED = "the rerun did not confirm it"


def shipped_tolerances(profile: str) -> dict[str, float] | None:
    """The tolerances the repository's CPU baseline gives the profile, if it has any."""
    try:
        entry = store.load_entry(SHIPPED, profile)
    except BaselineError:
        return None
    return dict(entry.tolerances) if entry and entry.tolerances else None


def set_tolerances(path: Path, profile: str, tolerances: dict[str, float]) -> None:
    document = yaml.safe_load(path.read_text())
    document["profiles"][profile]["tolerances"] = dict(tolerances)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="gates per level")
    parser.add_argument("--levels", default="1.1,1.2,1.5", help="slowdown factors")
    parser.add_argument("--profile", default="medium")
    parser.add_argument("--repeat", type=int, default=5, help="--llmperf-repeat of each gate")
    parser.add_argument("--confirm", type=int, default=1, help="--llmperf-confirm of each gate")
    parser.add_argument(
        "--sequential",
        type=int,
        default=None,
        help="decide each gate with --llmperf-sequential N instead of --repeat and --confirm",
    )
    parser.add_argument(
        "--compare",
        type=int,
        default=None,
        help="run both gates in every round: --repeat/--confirm, and --llmperf-sequential N",
    )
    parser.add_argument("--baseline-runs", type=int, default=10)
    parser.add_argument(
        "--tolerances", default=None, help="metric=pct,... (default: the plugin's defaults)"
    )
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="use the tolerances baselines/cpu/tiny-qwen3/vllm.yaml gives the profile",
    )
    parser.add_argument(
        "--warmups",
        type=int,
        default=None,
        help="warm-up requests before each measurement (default: the plugin's); very-long "
        "sends 32,000-token prompts, so fewer warm-ups save minutes per trial",
    )
    parser.add_argument("--seed", type=int, default=0, help="shuffles the order of levels")
    parser.add_argument("--json", type=Path, help="write every gate's outcome here")
    parser.add_argument(
        "--quiet-below",
        type=float,
        default=None,
        help="before the baseline and each round, wait (at most 10 min) until the 1-minute "
        "load average is under this (the machine may be shared)",
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="with --compare: also the sequential rule widened by the spread between earlier "
        "rounds (a history file's between-session spread)",
    )
    args = parser.parse_args()
    levels = [1.0, *(float(x) for x in args.levels.split(","))]
    if args.compare and args.sequential:
        parser.error("give --sequential N or --compare N, not both")
    if args.history and not args.compare:
        parser.error("--history needs --compare N")
    methods: list[tuple[str, int | None]] = (
        [("repeat", None), ("sequential", args.compare)]
        + ([("sequential+history", args.compare)] if args.history else [])
        if args.compare
        else [("sequential", args.sequential)]
        if args.sequential
        else [("repeat", None)]
    )
    given = parse_tolerances(args.tolerances)
    if given:
        tolerances = given
    elif args.shipped:
        found = shipped_tolerances(args.profile)
        if not found:
            parser.error(f"{SHIPPED} gives {args.profile} no tolerances")
        tolerances = found
    else:
        tolerances = dict(store.DEFAULT_TOLERANCES)

    started = time.monotonic()
    loads: list[float] = []
    trials: list[dict[str, Any]] = []
    with (
        embedded_server(warmups=args.warmups) as embedded,
        SlowProxyProcess(embedded.target.base_url) as proxy,
        tempfile.TemporaryDirectory(prefix="llmperf-noise-table-") as tmp,
    ):
        target = dataclasses.replace(embedded.target, base_url=proxy.base_url, notes=[])
        profile = embedded.profile(args.profile)

        def measure_once() -> Any:
            return measure(target, profile, embedded.workloads, embedded.settings, headers={})

        def gate(
            update: bool,
            repeat: int,
            confirm: int,
            budget: int | None = None,
            between: dict[str, session_spread.SessionSpread] | None = None,
        ) -> Any:
            request = GateRequest(
                target=target,
                profile=profile,
                hardware="cpu",
                baseline_root=Path(tmp),
                update=update,
                repeat=repeat,
                confirm_reruns=confirm,
                sequential_budget=None if update else budget,
                between_sessions=between or {},
            )
            return run_gate(request, measure_once)

        series = session_spread.Series("here", "vllm", "vllm", "tiny", profile.name, None)
        history: list[dict[str, Any]] = []  # one line per earlier "session"

        def remember(result: Any) -> None:
            history.append(
                {
                    "timestamp": str(len(history)),
                    **dataclasses.asdict(series),
                    "metrics": dict(result.metrics),
                }
            )

        print(
            f"server up in {time.monotonic() - started:.0f} s; profile {profile.name} at "
            f"{profile.num_prompts} prompts; load {load_average():.2f}",
            flush=True,
        )
        proxy.set_factor(1.0)
        wait_for_quiet(args.quiet_below, 600.0)
        recorded = gate(update=True, repeat=args.baseline_runs, confirm=0)
        if recorded.verdict.outcome is not Outcome.RECORDED:
            print(f"baseline not recorded: {recorded.verdict.notes}")
            return 1
        remember(recorded)
        path = Path(recorded.baseline_file)
        set_tolerances(path, profile.name, tolerances)
        entry = store.load_entry(path, profile.name)
        assert entry is not None
        print(
            "baseline: "
            + ", ".join(
                f"{m} {entry.metrics[m]:.4g} (CV {entry.spread.get(m, 0.0):.1f} %, "
                f"tolerance {t:g} %)"
                for m, t in tolerances.items()
            ),
            flush=True,
        )
        order = random.Random(args.seed)
        for trial in range(args.trials):
            between = session_spread.session_spread(history, series)
            shuffled = [
                (level, (method, budget))
                for level in levels
                for method, budget in methods
                if method != "sequential+history" or between
            ]
            order.shuffle(shuffled)
            wait_for_quiet(args.quiet_below, 600.0)
            for level, (method, budget) in shuffled:
                proxy.set_factor(level)
                loads.append(load_average())
                began = time.monotonic()
                with_history = between if method == "sequential+history" else None
                result = gate(False, args.repeat, args.confirm, budget, with_history)
                if method == "repeat" and level == 1.0:
                    remember(result)
                verdict = result.verdict
                trials.append(
                    {
                        "trial": trial,
                        "level": level,
                        "method": method,
                        "outcome": verdict.outcome.value,
                        "confirmed": verdict.confirmed,
                        "first_look": verdict.confirmed
                        or any(UNCONFIRMED in note for note in verdict.notes)
                        or (args.confirm == 0 and verdict.outcome is Outcome.REGRESSED),
                        "load": loads[-1],
                        "runs": result.runs,
                        "seconds": round(time.monotonic() - began, 1),
                        "changes": {
                            c.metric: c.change_pct
                            for c in verdict.comparisons
                            if c.tolerance_pct is not None
                        },
                        "thresholds": {
                            c.metric: c.threshold_pct
                            for c in verdict.comparisons
                            if c.tolerance_pct is not None
                        },
                        "between_sessions_pct": {
                            m: round(100 * s.sd, 2) for m, s in (with_history or {}).items()
                        },
                    }
                )
            if args.json:
                write_json(args.json, args, profile.num_prompts, tolerances, entry.spread, trials)
            done = [t for t in trials if t["trial"] == trial]
            print(
                f"trial {trial + 1}/{args.trials}  load {loads[-1]:.2f}  "
                + "  ".join(f"x{t['level']:g} {t['method']}:{t['outcome']}" for t in done),
                flush=True,
            )
        proxy.set_factor(1.0)
        proxy_stats = proxy.stats()

    for method, budget in methods:
        print()
        print_table(
            method, [t for t in trials if t["method"] == method], levels, args, budget,
            tolerances, entry.spread,
        )  # fmt: skip
    print(
        f"load average (1 min) during the gates: min {min(loads):.2f}, median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}; proxy released pieces at "
        f"most {proxy_stats['max_late_ms']:.1f} ms late; {time.monotonic() - started:.0f} s"
    )
    return 0


def write_json(
    path: Path,
    args: argparse.Namespace,
    num_prompts: int,
    tolerances: dict[str, float],
    spread: dict[str, float],
    trials: list[dict[str, Any]],
) -> None:
    """Every gate so far; rewritten after each round (atomically), so that an interrupted
    table keeps what it measured."""
    document = {
        "profile": args.profile,
        "num_prompts": num_prompts,
        "repeat": args.repeat,
        "confirm": args.confirm,
        "sequential": args.sequential or args.compare,
        "compared": bool(args.compare),
        "warmups": args.warmups,
        "tolerances": tolerances,
        "baseline_spread": spread,
        "trials": trials,
    }
    write_atomically(path, json.dumps(document, indent=1))


def print_table(
    method: str,
    trials: list[dict[str, Any]],
    levels: list[float],
    args: argparse.Namespace,
    budget: int | None,
    tolerances: dict[str, float],
    spread: dict[str, float],
) -> None:
    # Named by the caller: a method that never ran (the history joins from its fifth round)
    # still gets its heading, over empty rows.
    history = " with the history's between-session spread" if method == "sequential+history" else ""
    how = (
        f"sequential{history}, at most {budget} runs"
        if budget
        else f"repeat {args.repeat}, confirm {args.confirm}"
    )
    print(
        f"profile {args.profile}, gate: {how}; "
        + ", ".join(
            f"{m} tolerance {t:g} % (baseline CV {spread.get(m, 0.0):.1f} %)"
            for m, t in tolerances.items()
        )
    )
    metrics = list(tolerances)
    header = f"{'injected':<10} {'regressed':>10} {'first look':>11}  " + "  ".join(
        f"{'median ' + m:>30}" for m in metrics
    )
    header += f"  {'median runs':>11} {'median min':>10}"
    print(header)
    print("-" * len(header))
    for level in levels:
        rows = [t for t in trials if t["level"] == level]
        alarms = sum(1 for t in rows if t["outcome"] == Outcome.REGRESSED.value)
        first = sum(1 for t in rows if t["first_look"])
        label = "none" if level == 1.0 else f"+{(level - 1) * 100:.0f}%"
        changes = []
        for metric in metrics:
            values = [t["changes"][metric] for t in rows if metric in t["changes"]]
            changes.append(f"{statistics.median(values):>+29.1f}%" if values else f"{'-':>30}")
        kind = "false alarms" if level == 1.0 else "detected"
        runs = statistics.median(t.get("runs", 0) for t in rows) if rows else 0
        minutes = statistics.median(t.get("seconds", 0.0) for t in rows) / 60 if rows else 0.0
        print(
            f"{label:<10} {alarms:>3}/{len(rows):<6} {first:>4}/{len(rows):<6}  "
            + "  ".join(changes)
            + f"  {runs:>11g} {minutes:>10.2f}"
            + f"   ({kind})"
        )
    others = sorted({t["outcome"] for t in trials} - {Outcome.PASS.value, Outcome.REGRESSED.value})
    if others:
        print("other outcomes: " + ", ".join(others))


if __name__ == "__main__":
    raise SystemExit(main())
