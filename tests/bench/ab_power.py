"""How many pairs an A/B experiment needs: the verdicts of the sequential rule
(``gate.paired``, exactly as ``--llmperf-ab`` decides) on simulated pairs whose log-ratio
spreads as measured.

A script, not a test: it prints a table. Give it the spread of one pair's log ratio that
``tests/bench/ab_table.py`` recorded for your workload (``tpot_log_sd``; 0.05 is a 5 %
spread), and it shows, per budget and true change, how often the rule ends regressed and
after how many pairs on average. Use it to choose ``--llmperf-ab-budget`` and the tolerance
before spending machine time.

    python tests/bench/ab_power.py --sd 0.03,0.06 --changes 0,5,10,20 --tolerance 5 \\
        --budgets 20,40 [--experiments 2000]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_llmperf.gate.paired import SequentialPlan, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sd", default="0.03,0.06", help="spreads of a pair's log ratio")
    parser.add_argument("--changes", default="0,5,10,20", help="true slowdowns in percent")
    parser.add_argument("--tolerance", type=float, default=5.0, help="tolerance in percent")
    parser.add_argument("--budgets", default="20,40", help="most pairs per experiment")
    parser.add_argument("--alpha", type=float, default=0.10)
    parser.add_argument("--experiments", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    changes = [float(c) for c in args.changes.split(",")]
    print(
        f"tolerance {args.tolerance:g} %, alpha {args.alpha:g}, {args.experiments} simulated "
        "experiments a cell; each cell: regressed share / same share / mean pairs"
    )
    print(f"{'sd':>6} {'budget':>6}  " + "  ".join(f"{f'{c:g} %':>22}" for c in changes))
    for sd in (float(s) for s in args.sd.split(",")):
        for budget in (int(b) for b in args.budgets.split(",")):
            plan = SequentialPlan(budget=budget, alpha=args.alpha)
            cells = []
            for change in changes:
                shares = simulate(
                    math.log1p(change / 100.0), sd, args.tolerance, plan, args.experiments,
                    args.seed,
                )  # fmt: skip
                cells.append(
                    f"{shares['regressed']:>6.2f} / {shares['same']:>4.2f} / "
                    f"{shares['mean_pairs']:>4.1f}"
                )
            print(f"{sd:>6g} {budget:>6}  " + "  ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
