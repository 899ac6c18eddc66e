"""A real slowdown is caught: the repository's suite, its CPU baselines, a crippled engine.

`--max-num-seqs 1` makes vLLM serve one sequence at a time, which really cuts throughput (no
batching). Run against the recorded CPU baselines, the throughput test must fail with the
regression table and the command that would accept the new numbers; nothing is written.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VLLM_TEST_ENV, requires_vllm

pytestmark = [pytest.mark.e2e, requires_vllm]

REPO = Path(__file__).resolve().parents[2]
CPU_BASELINE = REPO / "baselines" / "cpu" / "tiny-qwen3" / "vllm.yaml"


@pytest.mark.skipif(not CPU_BASELINE.exists(), reason="no CPU baselines recorded yet")
def test_one_sequence_at_a_time_fails_the_throughput_gate() -> None:
    before = hashlib.sha256(CPU_BASELINE.read_bytes()).hexdigest()
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "test_serving.py", "--engine=vllm",
            "--hardware=cpu", "--llmperf-profile=medium", "--engine-args=--max-num-seqs 1",
            "-p", "no:cacheprovider",
        ],
        cwd=REPO, env={**os.environ, **VLLM_TEST_ENV}, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "test_serving[medium] FAILED" in output or "FAILED test_serving.py::test_serving" in (
        output
    )
    assert "llmperf: profile 'medium' on vllm regressed" in output
    assert "confirmed: a rerun measured the regression again" in output
    table_row = next(line for line in output.splitlines() if line.startswith("total_token_thr"))
    cells = table_row.split()
    assert cells[-1] == "REGRESSED", table_row
    change = float(cells[3].rstrip("%"))
    assert change < -20, f"one sequence at a time should cost far more than noise: {table_row}"
    assert "to accept the new numbers: pytest test_serving.py --engine=vllm" in output
    assert "--llmperf-profile medium --update-baselines" in output
    assert hashlib.sha256(CPU_BASELINE.read_bytes()).hexdigest() == before
