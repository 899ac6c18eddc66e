"""The repository's own performance suite (`test_serving.py`, what Quickstart line 1 runs),
run as a fresh pytest process against real vLLM by the end-to-end tests that need a whole
session: a first run, a rerun, a slowed engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.conftest import VLLM_TEST_ENV

REPO = Path(__file__).resolve().parents[2]


def run_root_suite(
    profiles: Sequence[str], baselines: Path, *extra: str, env: Mapping[str, str] | None = None
) -> str:
    """``pytest test_serving.py --engine=vllm --hardware=cpu`` on ``profiles`` against the
    baselines under ``baselines``, as on a person's machine (``CI`` unset); ``env`` is added
    to the environment (the engine inherits it). Returns ``"exit N"`` and the output; an exit
    other than pass or test failure fails the caller."""
    environment = {k: v for k, v in os.environ.items() if k != "CI"} | dict(env or {})
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "test_serving.py", "--engine=vllm",
            "--hardware=cpu", f"--llmperf-profile={','.join(profiles)}",
            f"--baseline-dir={baselines}", "-p", "no:cacheprovider", "-rA", *extra,
        ],
        cwd=REPO, env={**environment, **VLLM_TEST_ENV}, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode in (0, 1), output
    return f"exit {done.returncode}\n{output}"


# a profile's one-line summary: ``vllm/medium: total ... -> pass (...)``
SUMMARY_LINE = re.compile(r"^vllm/(\S+):.* -> ([a-z-]+).*$", re.MULTILINE)


def verdicts(output: str) -> dict[str, str]:
    """profile -> outcome, from the summary lines."""
    return {line[1]: line[2] for line in SUMMARY_LINE.finditer(output)}


def summary_lines(output: str) -> list[str]:
    """The run's summary lines, for a log."""
    return [line[0] for line in SUMMARY_LINE.finditer(output)]
