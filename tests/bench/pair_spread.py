"""How far one A/B pair's ratio spreads when A and B are the same: per profile and per server
configuration, measured in the same rounds, with what that spread means for a verdict.

A script, not a test: it prints a table. For every ``--config`` it starts two identical vLLM
servers (CPU build, embedded tiny model, started as the plugin starts them, plus the
configuration's environment), then runs ``--rounds`` rounds; a round measures every profile
on every configuration in the A,B,B,A order of ``--llmperf-ab`` (``measure``: warm-ups and a
fresh cache salt before each run). Configurations swap places every round, so the machine's
slow phases fall on each alike.

Per profile and configuration it prints the standard deviation of the pairs' log ratio B/A
(mean TPOT and total token throughput; 0.05 is a 5 % spread), the median seconds of one run
and the median throughput, and what the sequential rule (``gate.paired``, the default rule:
5 % tolerance, 20 pairs, alpha 0.10) would do at that spread, by simulation: the share of
10 % slowdowns it catches (acceptance asks 19 in 20).

    python tests/bench/pair_spread.py --profiles long,short --rounds 8 \\
        --config default --config oneproc=VLLM_ENABLE_V1_MULTIPROCESSING=0 [--json out.json]
    python tests/bench/pair_spread.py --from-json out.json     # the table of a saved run

``--pairing interleaved,simultaneous`` measures every configuration both ways in the same
rounds: ``simultaneous`` runs A and B at the same time (two threads, one run each) instead of
one after the other, so a change in the machine's own speed, which a VM's host can make from
second to second (docs/noise.md, "A noisy VM of `cpu-amx-2c`"), meets both runs of a pair
alike; the price is two servers sharing the cores during a run. Its rows are named
``config+sim``.

``--shape name=hidden_size=512,num_hidden_layers=4`` serves that configuration a larger model
than the embedded one, made by the same recipe (same tokenizer, so the same prompts) with
those shape keys changed, and started with the embedded model's engine arguments and
environment: does a model whose steps outweigh the API server's work give steadier pairs?
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.config import Settings
from pytest_llmperf.engines.embedded import embedded_engine_args
from pytest_llmperf.engines.held_interrupts import interrupts_held
from pytest_llmperf.engines.session import EMBEDDED_ENV, EngineSession, Target
from pytest_llmperf.engines.tinymodel import SHAPE, generate
from pytest_llmperf.gate.ab import AB_TOLERANCES, both_at_once
from pytest_llmperf.gate.paired import SequentialPlan, simulate
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.run import Measurement, Workloads, measure, scaled_profile

SPREAD_METRICS = tuple(AB_TOLERANCES)  # the metrics the default A/B rule gates
SIMULATED_EXPERIMENTS = 1000
PAIRINGS = ("interleaved", "simultaneous")


@dataclass
class Cell:
    """One profile on one configuration: the pairs' log ratios and the runs' figures."""

    logs: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in SPREAD_METRICS})
    seconds: list[float] = field(default_factory=list)
    throughputs: list[float] = field(default_factory=list)

    def spread(self, metric: str) -> float | None:
        values = self.logs[metric]
        return statistics.stdev(values) if len(values) >= 3 else None

    def summary(self) -> dict[str, Any]:
        return {
            "pairs": len(self.logs[SPREAD_METRICS[0]]),
            "tpot_log_sd": _rounded(self.spread("mean_tpot_ms")),
            "throughput_log_sd": _rounded(self.spread("total_token_throughput")),
            "seconds_per_run": _rounded(_median(self.seconds), 1),
            "throughput": _rounded(_median(self.throughputs), 0),
        }

    def catches_10pct(self) -> float | None:
        """The share of 10 % slowdowns the default rule would catch at these spreads: any
        metric's regression ends an experiment, so the best single metric's share is a
        floor. A simulation, so the table computes it once, not every saved round."""
        shares = [
            catch_share(sd, AB_TOLERANCES[metric])
            for metric in SPREAD_METRICS
            if (sd := self.spread(metric)) is not None
        ]
        return max(shares) if shares else None

    def saved(self) -> dict[str, Any]:
        return self.summary() | {
            "logs": self.logs,
            "seconds": self.seconds,
            "throughputs": self.throughputs,
        }

    @classmethod
    def from_saved(cls, data: dict[str, Any]) -> Cell:
        return cls(
            logs={m: list(data["logs"][m]) for m in SPREAD_METRICS},
            seconds=list(data["seconds"]),
            throughputs=list(data["throughputs"]),
        )


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def catch_share(sd: float, tolerance_pct: float) -> float:
    """The share of 10 % slowdowns the default rule (SequentialPlan's defaults: 20 pairs,
    alpha 0.10) ends `regressed` at this pair spread of one metric."""
    shares = simulate(
        math.log1p(0.10), sd, tolerance_pct, SequentialPlan(), SIMULATED_EXPERIMENTS, 0
    )
    return shares["regressed"]


def parse_config(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``name`` or ``name=KEY=VALUE,KEY=VALUE``: a name and the servers' extra environment."""
    name, _, rest = text.partition("=")
    env = []
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--config {text!r}: write name=KEY=VALUE[,KEY=VALUE]")
        env.append((key, value))
    if not name:
        raise SystemExit(f"--config {text!r}: the configuration needs a name")
    return name, tuple(env)


def parse_shape(text: str) -> tuple[str, dict[str, int]]:
    """``name=KEY=N,KEY=N``: a configuration's model shape (keys of the tiny model's SHAPE)."""
    name, _, rest = text.partition("=")
    shape: dict[str, int] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in SHAPE or not value.isdigit():
            raise SystemExit(
                f"--shape {text!r}: write name=KEY=N[,KEY=N] with KEY one of {', '.join(SHAPE)}"
            )
        shape[key] = int(value)
    if not name or not shape:
        raise SystemExit(f"--shape {text!r}: name a configuration and at least one shape key")
    return name, shape


def server_settings(
    env: tuple[tuple[str, str], ...],
    shape: dict[str, int] | None,
    work: Path,
    name: str,
    warmups: int,
) -> Settings:
    """A configuration's settings: the embedded model, or one of ``shape`` made in ``work``
    and started exactly as the embedded one is (its arguments, its environment)."""
    if shape is None:
        return Settings(engines=("vllm",), warmups=warmups, engine_env=env)
    model_dir = work / f"model-{name}"
    model_dir.mkdir(parents=True)
    generate(model_dir, shape)
    return Settings(
        engines=("vllm",),
        warmups=warmups,
        model=str(model_dir),
        engine_args=embedded_engine_args("vllm"),
        engine_env=(*EMBEDDED_ENV.items(), *env),
    )


def measure_pairs(
    a: Target, b: Target, profile: Any, workloads: Workloads, settings: Settings, cell: Cell
) -> None:
    """One A,B,B,A block: two pairs into ``cell``."""
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for who in ("A", "B", "B", "A"):
        started = time.monotonic()
        result = measure(a if who == "A" else b, profile, workloads, settings, headers={})
        cell.seconds.append(time.monotonic() - started)
        cell.throughputs.append(float(result.metrics["total_token_throughput"]))
        runs[who].append(result.metrics)
    for first, second in zip(runs["A"], runs["B"], strict=True):
        for metric in SPREAD_METRICS:
            cell.logs[metric].append(math.log(float(second[metric]) / float(first[metric])))


def measure_simultaneous_pairs(
    a: Target, b: Target, profile: Any, workloads: Workloads, settings: Settings, cell: Cell
) -> None:
    """Two pairs into ``cell``, each pair's A and B measured at the same time, as the A/B
    loop measures them (``gate.ab.both_at_once``)."""
    seconds: dict[str, float] = {}  # each side's last run; both are set in every pair

    def timed(who: str, target: Target) -> Callable[[], Measurement]:
        def run() -> Measurement:
            started = time.monotonic()
            result = measure(target, profile, workloads, settings, headers={})
            seconds[who] = time.monotonic() - started
            return result

        return run

    for _ in range(2):
        runs = both_at_once({"A": timed("A", a), "B": timed("B", b)})
        for who in ("A", "B"):
            cell.seconds.append(seconds[who])
            cell.throughputs.append(float(runs[who].metrics["total_token_throughput"]))
        for metric in SPREAD_METRICS:
            ratio = float(runs["B"].metrics[metric]) / float(runs["A"].metrics[metric])
            cell.logs[metric].append(math.log(ratio))


def _row_name(config: str, pairing: str) -> str:
    return f"{config}+sim" if pairing == "simultaneous" else config


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(cells: dict[tuple[str, str], Cell]) -> None:
    print(
        f"{'profile':<13}{'config':<14}{'pairs':>6}{'TPOT sd':>9}{'thr. sd':>9}"
        f"{'s/run':>7}{'tok/s':>9}{'10 % caught':>13}"
    )
    for (profile, config), cell in cells.items():
        row = cell.summary()
        print(
            f"{profile:<13}{config:<14}{row['pairs']:>6}{_figure(row['tpot_log_sd'], '.3f'):>9}"
            f"{_figure(row['throughput_log_sd'], '.3f'):>9}"
            f"{_figure(row['seconds_per_run'], '.1f'):>7}{_figure(row['throughput'], '.0f'):>9}"
            f"{_figure(cell.catches_10pct(), '.2f'):>13}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="long")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmups", type=int, default=8)
    parser.add_argument(
        "--config", action="append", default=None, help="name[=KEY=VALUE,...] (repeatable)"
    )
    parser.add_argument(
        "--shape", action="append", default=[], help="name=KEY=N,... a config's model shape"
    )
    parser.add_argument(
        "--pairing",
        default="interleaved",
        help=f"comma-separated, of {', '.join(PAIRINGS)}: how a pair's two runs are timed",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--from-json", type=Path, default=None, help="print a saved run's table")
    args = parser.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        loaded: dict[tuple[str, str], Cell] = {}
        for key, data in saved.items():
            profile, _, config = key.partition(" ")
            loaded[profile, config] = Cell.from_saved(data)
        print_table(loaded)
        return
    configs = dict(parse_config(c) for c in args.config or ["default"])
    shapes = dict(parse_shape(s) for s in args.shape)
    if unknown := set(shapes) - set(configs):
        raise SystemExit(f"--shape names no --config: {', '.join(sorted(unknown))}")
    profiles = args.profiles.split(",")
    pairings = args.pairing.split(",")
    if unknown_pairings := set(pairings) - set(PAIRINGS):
        raise SystemExit(
            f"--pairing {args.pairing!r}: {', '.join(sorted(unknown_pairings))} is not one of "
            f"{', '.join(PAIRINGS)}"
        )
    arms = [(config, pairing) for config in configs for pairing in pairings]
    work = Path(tempfile.mkdtemp(prefix="llmperf-pair-spread-"))
    sessions: list[EngineSession] = []
    servers: dict[str, tuple[Settings, Target, Target]] = {}
    cells = {(p, _row_name(c, pairing)): Cell() for p in profiles for c, pairing in arms}
    started = time.monotonic()
    try:
        for name, env in configs.items():
            settings = server_settings(env, shapes.get(name), work, name, args.warmups)
            pair = [
                EngineSession(settings, "vllm", work / f"{name}-{side}", variant=f"{name}-{side}")
                for side in ("a", "b")
            ]
            sessions.extend(pair)
            a, b = pair[0].start(), pair[1].start()
            # A shaped model is served by path (settings.model), so its targets are not
            # marked embedded; mark them, so its runs use the embedded scale's synthetic
            # ShareGPT file as the default's runs do (same tokenizer, same prompts).
            if name in shapes:
                a, b = (dataclasses.replace(t, embedded=True) for t in (a, b))
            servers[name] = (settings, a, b)
        print(f"servers up after {time.monotonic() - started:.0f} s", flush=True)
        plain = Settings(engines=("vllm",), warmups=args.warmups)
        workloads = Workloads(plain, work / "data")
        for round_index in range(args.rounds):
            ordered = arms if round_index % 2 == 0 else arms[::-1]
            for profile_name in profiles:
                profile = scaled_profile(builtin_profiles()[profile_name], plain, embedded=True)
                for name, pairing in ordered:
                    settings, a, b = servers[name]
                    block = (
                        measure_simultaneous_pairs if pairing == "simultaneous" else measure_pairs
                    )
                    cell = cells[profile_name, _row_name(name, pairing)]
                    block(a, b, profile, workloads, settings, cell)
            print(f"round {round_index} done, load {os.getloadavg()[0]:.1f}", flush=True)
            if args.json:  # after every round: a stopped run keeps what it measured
                rows = {f"{p} {c}": cell.saved() for (p, c), cell in cells.items()}
                write_atomically(args.json, json.dumps(rows, indent=1))
    finally:
        with interrupts_held():  # a second Ctrl-C must not leave the later servers running
            for session in sessions:
                session.stop()
    # Only after a clean end (a failed run keeps the servers' logs); the JSON keeps the
    # figures, and the servers' folders and the larger shapes' models are scratch.
    shutil.rmtree(work, ignore_errors=True)
    print_table(cells)
    print(f"total {(time.monotonic() - started) / 60:.1f} min")


if __name__ == "__main__":
    main()
