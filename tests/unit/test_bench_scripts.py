"""Every benchmark script starts as its docs run it: ``python tests/bench/NAME.py``, from any
folder, with no PYTHONPATH. Run that way Python puts only tests/bench on the path, so a script
that imports ``tests.support`` must put the repository there itself (ab_table.py once did not,
and its documented command failed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if "argparse" in p.read_text("utf-8"))


def test_the_scripts_are_found() -> None:
    assert {"ab_table.py", "ab_replay.py", "noise_table.py"} <= set(SCRIPTS)


def _run_from(folder: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python tests/bench/SCRIPT ARGS`` as the docs run it: from ``folder``, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_starts_from_another_folder(script: str, tmp_path: Path) -> None:
    done = _run_from(tmp_path, script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_cpu_steadiness_prints_a_spread_for_each_kind_of_work(tmp_path: Path) -> None:
    done = _run_from(tmp_path, "cpu_steadiness.py", "--samples", "3", "--pause", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {
        line[:22].strip(): line[22:].split()
        for line in done.stdout.splitlines()
        if line.startswith(("pure Python", "numpy"))
    }
    assert set(rows) == {"pure Python loop", "numpy 512x512 matmul"}
    for median_s, cv, worst, ratio in rows.values():
        assert float(median_s) > 0
        assert float(cv) >= 0
        assert float(worst) >= 0
        assert float(ratio) >= 1.0  # slowest over fastest


def test_cpu_steadiness_refuses_too_few_samples(tmp_path: Path) -> None:
    done = _run_from(tmp_path, "cpu_steadiness.py", "--samples", "2")
    assert done.returncode == 2
    assert "--samples must be at least 3" in done.stderr
