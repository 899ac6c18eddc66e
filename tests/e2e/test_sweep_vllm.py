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

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import requires_vllm
from tests.support.root_suite import run_root_suite, verdicts

pytestmark = [pytest.mark.e2e, requires_vllm]

PROFILES = ("embedded-sweep", "medium")


# This machine's speed moves by the hour and other work shares its two cores
# (docs/noise.md): the test checks the mechanism, so its copy allows 40 % on the sweep, which
# a batch of two (capacity -70 % or more) still exceeds. `medium` is shown beside it, not
# asserted on the smaller batch, and its baseline is one run: on a 2-core VM whose CPU speed
# spreads by a CV of 14-25 % (docs/noise.md, family 6 model 207) one run of it spread by a CV
# of 28 % (worst 76 %), and the unchanged rerun failed at 40 %. Its copy allows 75 %, the
# widest shipped CPU tolerance.
WIDENED = {"embedded-sweep": 40.0, "medium": 75.0}


def _widen(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    for name, entry in document["profiles"].items():
        entry["tolerances"] = dict.fromkeys(entry["tolerances"], WIDENED[name])
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_sweep_records_passes_and_fails_on_a_smaller_batch(tmp_path: Path) -> None:
    baselines = tmp_path / "baselines"
    first = run_root_suite(PROFILES, baselines, "--update-baselines")
    assert first.startswith("exit 0"), first
    assert verdicts(first) == dict.fromkeys(PROFILES, "recorded"), first
    assert "vllm/embedded-sweep: sweep" in first  # the steps' table in the summary
    (path,) = baselines.rglob("vllm.yaml")
    entry = yaml.safe_load(path.read_text())["profiles"]["embedded-sweep"]
    assert entry["metrics"]["capacity_at_slo"] > 0, first
    assert len(entry["sweep"]["curve"]) >= 3, first
    _widen(path)

    again = run_root_suite(PROFILES, baselines)
    assert again.startswith("exit 0"), again
    # "improved" passes as well: on a shared two-core machine back-to-back sweeps found
    # 7.9 and 57 req/s (the other work on the machine, not the engine, moved).
    assert set(verdicts(again).values()) <= {"pass", "improved"}, again

    # One sweep is evidence enough here (a confirming rerun would repeat the whole sweep).
    smaller = run_root_suite(
        PROFILES, baselines, "--engine-args=--max-num-seqs 2", "--llmperf-confirm=0"
    )
    assert smaller.startswith("exit 1"), smaller
    outcomes = verdicts(smaller)
    assert outcomes["embedded-sweep"] == "regressed", smaller
    assert "llmperf: profile 'embedded-sweep' on vllm regressed" in smaller
    assert re.search(r"SLO broke at req/s [\d.]+ \(p99_\w+ <= \d+\)", smaller), smaller
    assert re.search(r"capacity_at_slo .* -\d+\.\d% .* REGRESSED", smaller), smaller
