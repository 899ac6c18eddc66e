"""Acceptance 3: the history file survives concurrent appends from several processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pytest_llmperf.reports import history
from tests.reports.factory import ledger

REPO = Path(__file__).resolve().parents[2]

# Each writer waits for the start signal, then appends BATCHES batches of LINES lines. The lines
# are long (a few KB) so that a write torn by a missing lock would show up as a broken line.
WRITER = """
import os, sys, time
from pathlib import Path
from pytest_llmperf.reports.history import append
path, go, writer, batches, lines = Path(sys.argv[1]), Path(sys.argv[2]), *map(int, sys.argv[3:])
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.001)
for batch in range(batches):
    append(path, [
        {"timestamp": "t", "profile": "short", "writer": writer, "batch": batch, "line": i,
         "padding": "x" * 3000}
        for i in range(lines)
    ])
"""


def release_when_ready(go: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    """Start every writer at once: wait until each says it is ready (imported, at the line),
    then create ``go``. A fixed sleep let a slow machine start some before others were ready,
    and the test then checked less contention than it claims."""
    deadline = time.monotonic() + 120
    while len(list(go.parent.glob("ready-*"))) < len(procs):
        assert all(p.poll() is None for p in procs), "a writer exited before the start"
        assert time.monotonic() < deadline, "the writers never got ready"
        time.sleep(0.01)
    go.touch()


def test_concurrent_appends_all_land_whole(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    go = tmp_path / "go"
    writers, batches, lines = 6, 40, 4
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(go), str(w), str(batches), str(lines)],
            env=env,
        )
        for w in range(writers)
    ]
    release_when_ready(go, procs)
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    raw = path.read_text(encoding="utf-8").splitlines()
    assert len(raw) == writers * batches * lines
    parsed = [json.loads(line) for line in raw]  # every line whole
    keys = {(p["writer"], p["batch"], p["line"]) for p in parsed}
    assert len(keys) == writers * batches * lines
    # A batch is one write under the lock: its lines stay together and in order.
    for start in range(0, len(parsed), lines):
        chunk = parsed[start : start + lines]
        assert len({(p["writer"], p["batch"]) for p in chunk}) == 1
        assert [p["line"] for p in chunk] == list(range(lines))
    assert len(history.read(path)) == len(raw)


SESSION_END = """
import os, sys, time
from pathlib import Path
from pytest_llmperf.config import Settings
from pytest_llmperf.reports.summary import write_outputs
from tests.reports.factory import ledger
path, go = Path(sys.argv[1]), Path(sys.argv[2])
book = ledger()
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.001)
write_outputs(book, Settings(engines=("vllm",), history_path=path), hardware="cpu", environ={})
"""


def test_pytest_session_ends_at_once_all_append(tmp_path: Path) -> None:
    """Several sessions ending together (the path pytest's sessionfinish takes)."""
    path = tmp_path / "history.jsonl"
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", SESSION_END, str(path), str(go)], env=env)
        for _ in range(4)
    ]
    release_when_ready(go, procs)
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    items = history.read(path)
    per_session = len(ledger().results)
    assert len(path.read_text(encoding="utf-8").splitlines()) == 4 * per_session
    assert len(items) == 4 * per_session
    first = items[0]
    assert set(first) >= {
        "timestamp",
        "git_commit",
        "hardware",
        "engine",
        "variant",
        "profile",
        "metrics",
        "outcome",
    }
    assert first["metrics"]["total_token_throughput"] > 0


def test_record_and_read(tmp_path: Path) -> None:
    book = ledger()
    items = [
        history.record(
            r, timestamp="2026-01-01T00:00:00+00:00", git_commit="abc", plugin_version="1"
        )
        for r in book.results
    ]
    path = tmp_path / "h.jsonl"
    assert history.append(path, items) == len(items)
    assert history.append(path, []) == 0
    with path.open("a", encoding="utf-8") as handle:  # a hand edit gone wrong
        handle.write("{not json\n\n")
    read = history.read(path)
    assert read == json.loads(json.dumps(items))
    assert read[2]["variant"] == "vllm-tuned"
    assert read[2]["outcome"] == "regressed"
    assert history.series_key(read[2]) == "vllm-tuned/short (cpu)"
    assert history.read(tmp_path / "none.jsonl") == []


def test_trend_cli(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        history.append(
            path,
            [
                history.record(
                    r, timestamp=f"{day}T00:00:00+00:00", git_commit=day, plugin_version="1"
                )
                for r in ledger().results
            ],
        )
    out = tmp_path / "trend.html"
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.reports.history", str(path), "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    assert "12 records" in done.stdout
    page = out.read_text(encoding="utf-8")
    assert 'data-plot="trend"' in page
    # one line in each of the two panels (plotly's JSON writes "/" as "\u002f")
    assert page.replace("\\u002f", "/").count('"name":"vllm-tuned/short (cpu)"') == 2
