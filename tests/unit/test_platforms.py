"""Platforms: Windows gets a clear refusal when pytest loads the plugin, not a missing signal
somewhere in the engines package."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_windows_is_refused_at_import_with_the_way_out() -> None:
    # The platform is faked before the first import: the check runs at import time.
    code = "import sys; sys.platform = 'win32'; import pytest_llmperf"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode != 0
    assert "ImportError: pytest-llmperf runs on Linux and macOS, not on Windows" in done.stderr
    # The way out names the plugin as pytest knows it (its pytest11 entry point).
    (name,) = [e.name for e in entry_points(group="pytest11") if e.value == "pytest_llmperf.plugin"]
    assert f"-p no:{name}" in done.stderr


def test_this_platform_imports() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import pytest_llmperf.engines.server"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
