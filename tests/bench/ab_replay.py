"""Replay this checkout's A/B stopping rule on the pairs that ab_table.py measured.

A script, not a test: it prints a table. ``ab_table.py --json`` keeps every experiment's pair
ratios B/A and tolerances; this runs ``gate.paired``'s rule, as the checked-out code has it,
look by look on those pairs and counts the verdicts beside the ones recorded. The replay is
exact wherever the replayed rule stops no later than the recorded one did: a rule whose
interval is nowhere wider, such as the group-sequential levels replayed on pairs measured
under the union-bound levels they replaced. An experiment whose replay would need pairs the
recording never took is counted as "ran out", not guessed; one that ended without a verdict
(failed requests, no ratio) is "other", as in ab_table.

    python tests/bench/ab_replay.py first.json second.json [--budget 20]
                                    [--tolerances total_token_throughput=5,mean_tpot_ms=5]

``--tolerances`` replays the rule with other gated metrics than the recorded ones, taking the
pairs of a metric the experiment only watched (``watched_ratios``, ab_table ``--tolerances``)
as well; an experiment that kept no pairs of an asked metric counts as "ran out".

Minutes are estimated as the recorded experiment's minutes per pair times the pairs the replay
used.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab_table import saved_runs  # the same files, read and pooled as --from-json does
from noise_support import parse_tolerances

from pytest_llmperf.gate import paired
from pytest_llmperf.gate.ab import AB_TOLERANCES
from pytest_llmperf.gate.verdict import direction_of

VERDICTS = ("regressed", "same", "improved", "inconclusive")


def replay(
    record: dict[str, Any],
    plan: paired.SequentialPlan,
    gated: dict[str, float] | None = None,
) -> tuple[str, int] | None:
    """The replayed verdict and the pairs it took; None when the recorded pairs ran out.
    ``gated``: the metrics and tolerances to replay instead of the recorded ones."""
    tolerances: dict[str, float] = gated or record.get("tolerances") or {}
    ratios: dict[str, list[float]] = {
        **(record.get("watched_ratios") or {}),
        **(record.get("ratios") or {}),
    }
    metrics = [metric for metric in tolerances if ratios.get(metric)]
    if not metrics or (gated and len(metrics) < len(gated)):
        return None
    values = {
        metric: [paired.worse_log(1.0, ratio, direction_of(metric)) for ratio in ratios[metric]]
        for metric in metrics
    }
    measured = min(len(series) for series in values.values())
    for look in plan.looks():
        if look > measured:
            return None
        statuses = [
            paired.decide_metric(
                metric, direction_of(metric), tolerances[metric], values[metric][:look], plan
            ).status
            for metric in metrics
        ]
        answer = paired.overall(statuses)
        if answer is not None:
            return answer, look
    return None


def cell(
    records: list[dict[str, Any]],
    plan: paired.SequentialPlan,
    gated: dict[str, float] | None = None,
) -> dict[str, Any]:
    recorded = [r["outcome"] for r in records]
    replayed: list[str] = []
    pairs: list[int] = []
    minutes: list[float] = []
    for record in records:
        if record["outcome"] not in VERDICTS:
            replayed.append("other")
            continue
        result = replay(record, plan, gated)
        if result is None:
            replayed.append("ran out")
            continue
        verdict, used = result
        replayed.append(verdict)
        pairs.append(used)
        if record.get("minutes") and record.get("pairs"):
            minutes.append(record["minutes"] / record["pairs"] * used)
    return {
        "experiments": len(records),
        "recorded": {v: recorded.count(v) for v in VERDICTS},
        "replayed": {v: replayed.count(v) for v in (*VERDICTS, "ran out", "other")},
        "median_pairs": statistics.median(pairs) if pairs else None,
        "median_minutes": statistics.median(minutes) if minutes else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", type=Path, nargs="+", help="files written by ab_table --json")
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument(
        "--tolerances",
        default=None,
        help="replay gating these metrics: METRIC=PERCENT,... (default: as recorded)",
    )
    args = parser.parse_args()
    gated = parse_tolerances(args.tolerances, allowed=AB_TOLERANCES)
    plan = paired.SequentialPlan(budget=args.budget)
    pooled = saved_runs(args.tables)
    for (profile, slowdown), records in pooled.items():
        kept = [r for r in records if "ratios" in r]
        if len(kept) < len(records):
            print(f"{profile} {slowdown:g} %: {len(records) - len(kept)} experiments kept no pairs")
        pooled[profile, slowdown] = kept
    print("cell            n   recorded: reg/same/inc  replayed: reg/same/inc/ran out/other")
    for profile, slowdown in sorted(pooled):
        row = cell(pooled[profile, slowdown], plan, gated)
        rec, rep = row["recorded"], row["replayed"]
        print(
            f"{f'{profile} {slowdown:g} %':<15} {row['experiments']:<3} "
            f"{rec['regressed']:>3} /{rec['same']:>3} /{rec['inconclusive']:>3}            "
            f"{rep['regressed']:>3} /{rep['same']:>3} /{rep['inconclusive']:>3} /"
            f"{rep['ran out']:>3} /{rep['other']:>3}   "
            f"median {row['median_pairs'] or '-'} pairs, {row['median_minutes'] or 0:.1f} min"
        )


if __name__ == "__main__":
    main()
