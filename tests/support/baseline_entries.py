"""A recorded baseline entry for tests of the gate: only what a test varies is named, the
rest (no engine version, no command, no error) is what a plain recorded profile has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.gate.store import BaselineEntry


def recorded_entry(
    profile: str,
    metrics: Mapping[str, float],
    tolerances: Mapping[str, float],
    *,
    workload: Mapping[str, Any] | None = None,
    spread: Mapping[str, float] | None = None,
    runs: int = 1,
) -> BaselineEntry:
    return BaselineEntry(
        profile=profile,
        status="ok",
        metrics=dict(metrics),
        tolerances=dict(tolerances),
        workload=dict(workload) if workload is not None else None,
        engine_version=None,
        command=None,
        error=None,
        spread=dict(spread or {}),
        runs=runs,
    )
