"""Progress lines: one per tenth of the run, none for tiny runs, rates that make sense."""

from __future__ import annotations

from pytest_llmperf.measure.progress import ProgressLine


def test_one_line_per_tenth() -> None:
    lines: list[str] = []
    progress = ProgressLine("medium", lines.append)
    for done in range(1, 101):
        progress(done, 100, done * 10)
    assert len(lines) == 10
    assert lines[0].startswith("llmperf medium: 10/100 requests done")
    assert lines[-1].startswith("llmperf medium: 100/100 requests done")
    assert all("output tok/s" in line for line in lines)


def test_small_runs_print_nothing() -> None:
    lines: list[str] = []
    progress = ProgressLine("mini", lines.append)
    for done in range(1, 9):
        progress(done, 8, done)
    assert lines == []


def test_jumps_do_not_repeat_lines() -> None:
    lines: list[str] = []
    progress = ProgressLine("short", lines.append)
    progress(1, 1000, 0)
    progress(550, 1000, 100)  # a burst of completions crosses five steps at once
    progress(1000, 1000, 200)
    assert [line.split(":")[1].split(" requests")[0].strip() for line in lines] == [
        "550/1000",
        "1000/1000",
    ]
