"""The history file: one JSON line per measured profile, appended by every run, for trends.

Several pytest processes may append at once (parallel CI jobs sharing a workspace, xdist-like
setups); each appends all of its lines in one write under a lock file next to the history, so
every line lands whole and none is lost. Reading skips lines that do not parse (a hand edit, a
file cut by a full disk) instead of refusing the whole history.

``python -m pytest_llmperf.reports history FILE --html OUT`` draws the trend plot from a
history file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.atomic import append_text, locked
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.gate.ledger import ProfileResult
from pytest_llmperf.reports.tables import KEY_METRICS

SCHEMA = 1


def _finite(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def record(
    result: ProfileResult,
    *,
    timestamp: str,
    git_commit: str | None,
    plugin_version: str,
) -> dict[str, Any]:
    """The history line of one result (``timestamp`` is the run's, shared by its lines)."""
    # The engine's own metrics only where its page was read: older lines stay as they were.
    keys = [k for k in KEY_METRICS if not k.startswith("engine_") or k in result.metrics]
    metrics = {key: _finite(result.metrics.get(key)) for key in keys}
    return {
        "schema": SCHEMA,
        "timestamp": timestamp,
        "git_commit": git_commit,
        "plugin_version": plugin_version,
        "hardware": result.hardware,
        "machine": (result.machine or {}).get("key"),
        "engine": result.engine,
        "variant": result.label,
        "engine_version": result.engine_version,
        "model": result.model,
        "profile": result.profile,
        "num_prompts": result.workload.get("num_prompts"),
        "outcome": result.verdict.outcome.value,
        "metrics": {key: value for key, value in metrics.items() if value is not None},
    }


def append(path: Path, records: Iterable[Mapping[str, Any]], *, lock_timeout: float = 60.0) -> int:
    """Append the records as JSON lines; returns how many were written."""
    from pytest_llmperf import redact

    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    text = redact.text(text)
    if not text:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path, lock_timeout, "history", ConfigError):
        # One O_APPEND write of whole lines; the lock also covers file systems (NFS) where
        # O_APPEND alone does not keep concurrent writers apart.
        append_text(path, text)
    return text.count("\n")


def read(path: Path) -> list[dict[str, Any]]:
    """Every line that parses as a history record, oldest first; [] when there is no file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and "timestamp" in item and "profile" in item:
            out.append(item)
    return out


def series_key(item: Mapping[str, Any]) -> str:
    """One trend line: the same configuration on the same profile and hardware."""
    name = item.get("variant") or item.get("engine")
    return f"{name}/{item.get('profile')} ({item.get('hardware')})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmperf.reports history",
        description="Draw the trend plot of a pytest-llmperf history file as HTML.",
    )
    parser.add_argument("history", type=Path, help="the JSON-lines file of --llmperf-history")
    parser.add_argument("--html", type=Path, required=True, help="where to write the plot")
    args = parser.parse_args(argv)
    from pytest_llmperf.reports.html_report import write_trend

    items = read(args.history)
    if not items:
        print(f"error: {args.history}: no history records", file=sys.stderr)
        return 2
    try:
        write_trend(args.html, items)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{len(items)} records -> {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
