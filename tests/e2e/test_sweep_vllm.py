"""The embedded sweep on real vLLM (issue 18, acceptance 2): a first run records the curve,
a rerun passes, and one engine change that halves nothing about a single request but caps
the batch (`--max-num-seqs 2`) lowers the capacity at SLO and fails, naming the step. The
plain `medium` profile (request rate inf) runs beside it, so the same change on a peak
throughput gate is shown next to the capacity gate.

Capacity at SLO is a tail latency under load: on a machine shared with other work it moves
far more than peak throughput (docs/sweeps.md), so this test needs a machine whose load is
steady over its ~8 minutes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import VLLM_TEST_ENV, requires_vllm

pytestmark = [pytest.mark.e2e, requires_vllm]

REPO = Path(__file__).resolve().parents[2]
PROFILES = ("embedded-sweep", "medium")


def _suite(baselines: Path, *extra: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "CI"}  # a person's machine
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "test_serving.py", "--engine=vllm",
            "--hardware=cpu", f"--llmperf-profile={','.join(PROFILES)}",
            f"--baseline-dir={baselines}", "-p", "no:cacheprovider", "-rA", *extra,
        ],
        cwd=REPO, env={**environment, **VLLM_TEST_ENV}, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1), output
    return f"exit {done.returncode}\n{output}"


def _verdicts(output: str) -> dict[str, str]:
    return dict(re.findall(r"^vllm/(\S+):.* -> ([a-z-]+)", output, re.MULTILINE))


def _widen(path: Path) -> None:
    # This machine's speed moves by the hour and other work shares its two cores
    # (docs/noise.md): the test checks the mechanism, so its copy allows 40 %, which a batch
    # of two (capacity -70 % or more) still exceeds.
    document = yaml.safe_load(path.read_text())
    for entry in document["profiles"].values():
        entry["tolerances"] = dict.fromkeys(entry["tolerances"], 40.0)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_sweep_records_passes_and_fails_on_a_smaller_batch(tmp_path: Path) -> None:
    baselines = tmp_path / "baselines"
    first = _suite(baselines, "--update-baselines")
    assert first.startswith("exit 0"), first
    assert _verdicts(first) == dict.fromkeys(PROFILES, "recorded"), first
    assert "vllm/embedded-sweep: sweep" in first  # the steps' table in the summary
    (path,) = baselines.rglob("vllm.yaml")
    entry = yaml.safe_load(path.read_text())["profiles"]["embedded-sweep"]
    assert entry["metrics"]["capacity_at_slo"] > 0, first
    assert len(entry["sweep"]["curve"]) >= 3, first
    _widen(path)

    again = _suite(baselines)
    assert again.startswith("exit 0"), again
    # "improved" passes as well: on a shared two-core machine back-to-back sweeps found
    # 7.9 and 57 req/s (the other work on the machine, not the engine, moved).
    assert set(_verdicts(again).values()) <= {"pass", "improved"}, again

    # One sweep is evidence enough here (a confirming rerun would repeat the whole sweep).
    smaller = _suite(baselines, "--engine-args=--max-num-seqs 2", "--llmperf-confirm=0")
    assert smaller.startswith("exit 1"), smaller
    verdicts = _verdicts(smaller)
    assert verdicts["embedded-sweep"] == "regressed", smaller
    assert "llmperf: profile 'embedded-sweep' on vllm regressed" in smaller
    assert re.search(r"SLO broke at req/s [\d.]+ \(p99_\w+ <= \d+\)", smaller), smaller
    assert re.search(r"capacity_at_slo .* -\d+\.\d% .* REGRESSED", smaller), smaller
