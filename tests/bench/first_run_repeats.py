"""Quickstart line 1, over and over, on a machine the shipped CPU baseline was not made on.

A script, not a test: it prints figures. It runs the repository's suite
(`pytest --engine=vllm --hardware=cpu`, what `python3 quickstart.py perf` runs) as a fresh
process each time, against a scratch copy of `baselines/`:

1. with ``--other-machine`` (the default) the copy of `baselines/cpu/tiny-qwen3/vllm.yaml`
   claims another CPU, so the first run is this machine's first run (it bootstraps its own
   baseline); with ``--shipped`` the copy is left as shipped (on the machine class that
   recorded it, every run is gated against the shipped numbers);
2. ``--runs`` more runs, each a verdict per profile;
3. with ``--slowdown``, one more run with ``--engine-args="--max-num-seqs 1"``.

It prints one line per run (wall time, load average, each profile's outcome and throughput
change), then how many runs failed. Outside CI (the CI variable is removed for the runs).

    python tests/bench/first_run_repeats.py [--runs 10] [--slowdown] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "baselines" / "cpu" / "tiny-qwen3" / "vllm.yaml"
VERDICT = re.compile(r"^vllm/(\S+):.* -> ([a-z-]+)(?: \(total_token_throughput ([+-][\d.]+)%)?")


def fake_other_machine(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    for entry in document["profiles"].values():
        machine = entry.get("machine") or {}
        entry["machine"] = {**machine, "key": "cpu-sse4-2c", "cpu": "another CPU", "isa": "sse4"}
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def run_suite(baselines: Path, extra: list[str]) -> dict[str, object]:
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    environment.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    started = time.monotonic()
    load = os.getloadavg()[0]
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "test_serving.py", "--engine=vllm",
            "--hardware=cpu", f"--baseline-dir={baselines}", "-p", "no:cacheprovider", *extra,
        ],
        cwd=REPO, env=environment, capture_output=True, text=True, check=False,
    )  # fmt: skip
    verdicts = {
        m.group(1): (m.group(2), m.group(3))
        for m in map(VERDICT.match, done.stdout.splitlines())
        if m is not None
    }
    return {
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "verdicts": verdicts,
        "tail": done.stdout[-3000:] if done.returncode not in (0,) else "",
    }


def line(label: str, run: dict[str, object]) -> str:
    verdicts = run["verdicts"]
    assert isinstance(verdicts, dict)
    cells = [
        f"{profile} {outcome}{'' if change is None else f' {change}%'}"
        for profile, (outcome, change) in verdicts.items()
    ]
    return (
        f"{label:>9}  exit {run['exit']}  {run['seconds']:>6} s  load {run['load_before']}"
        f"->{run['load_after']}  " + " | ".join(cells)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--shipped", action="store_true", help="keep the shipped fingerprint")
    parser.add_argument("--slowdown", action="store_true", help="end with --max-num-seqs 1")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from pytest_llmperf.engines import fingerprint

    here = fingerprint.this_machine()
    print(f"machine: {fingerprint.describe(here.with_versions().as_dict())}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="first-run-repeats-"))
    baselines = scratch / "baselines"
    copy = baselines / "cpu" / "tiny-qwen3" / "vllm.yaml"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(SHIPPED, copy)
    if not args.shipped:
        fake_other_machine(copy)
    runs: list[dict[str, object]] = []
    try:
        plan = [("bootstrap" if not args.shipped else "run 0", [])]
        plan += [(f"run {i}", []) for i in range(1, args.runs + 1)]
        if args.slowdown:
            plan.append(("slowdown", ["--engine-args=--max-num-seqs 1"]))
        for label, extra in plan:
            run = run_suite(baselines, extra)
            run["label"] = label
            runs.append(run)
            print(line(label, run), flush=True)
            if args.json:
                args.json.write_text(json.dumps(runs, indent=2) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    gated = [r for r in runs if r["label"] not in ("bootstrap", "slowdown")]
    failing = [r for r in gated if r["exit"] != 0]
    print(f"\n{len(failing)} of {len(gated)} gated runs failed (target: at most 1 of 10)")
    for run in failing:
        print(f"--- {run['label']}\n{run['tail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
