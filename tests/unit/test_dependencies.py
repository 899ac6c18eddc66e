"""Dependency floors that keep known flaws out."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# filelock below 3.20.3 truncates the target of a lock file planted as a symlink (fixed in
# 3.20.1 and 3.20.3); the plugin locks baselines, the history and the model cache.
FILELOCK_FLOOR = (3, 20, 3)


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_filelock_floor_excludes_the_symlink_flaws() -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (spec,) = [d for d in dependencies if d.startswith("filelock")]
    assert spec.startswith("filelock>="), spec
    assert _numbers(spec) >= FILELOCK_FLOOR, spec
    assert _numbers(version("filelock")) >= FILELOCK_FLOOR
