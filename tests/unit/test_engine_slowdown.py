"""The bench's step slowdown (tests/bench/engine_slowdown): vLLM finds it as a general
plugin, it adds the set share of each model step and nothing to idle steps, it wraps a class
once however often vLLM registers it, and it follows its control file."""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "bench" / "engine_slowdown"
sys.path.insert(0, str(PLUGIN_DIR))

import llmperf_engine_slowdown as slowdown  # noqa: E402


class FakeEngineCore:
    """The shape of vLLM's EngineCore step functions: (outputs, model_executed)."""

    def __init__(self, work_s: float, ran_model: bool = True) -> None:
        self.work_s = work_s
        self.ran_model = ran_model

    def work(self) -> None:
        deadline = time.perf_counter() + self.work_s
        while time.perf_counter() < deadline:  # the model's work: it holds the clock
            pass

    def step(self) -> tuple[dict[int, Any], bool]:
        self.work()
        return {0: "out"}, self.ran_model

    def step_with_batch_queue(self) -> tuple[dict[int, Any] | None, bool]:
        self.work()
        return None, self.ran_model


def test_vllm_finds_the_plugin_under_its_general_plugin_group() -> None:
    found = [
        entry
        for dist in importlib.metadata.distributions(path=[str(PLUGIN_DIR)])
        for entry in dist.entry_points
        if entry.group == "vllm.general_plugins"
    ]
    assert [(e.name, e.value) for e in found] == [
        ("llmperf_engine_slowdown", "llmperf_engine_slowdown:register")
    ]
    assert found[0].load() is slowdown.register


def test_a_model_step_is_followed_by_its_share_and_an_idle_step_by_nothing() -> None:
    class Core(FakeEngineCore):
        pass

    added = slowdown.StepSlowdown(fixed_percent=50.0, control=None, log=None)
    slowdown.wrap_steps(Core, added)
    assert Core(0.02).step() == ({0: "out"}, True)  # the step's result passes through
    assert added.busy_s >= 0.02
    # Slept at least what was owed; what a sleep overran is owed back (negative).
    assert added.added_s >= added.busy_s * 0.5
    assert added.added_s + added.owed_s == pytest.approx(added.busy_s * 0.5)
    before = (added.busy_s, added.added_s)
    Core(0.01, ran_model=False).step()
    assert (added.busy_s, added.added_s) == before


def test_registering_twice_wraps_once() -> None:
    class Core(FakeEngineCore):
        pass

    first = slowdown.StepSlowdown(fixed_percent=10.0, control=None, log=None)
    second = slowdown.StepSlowdown(fixed_percent=10.0, control=None, log=None)
    slowdown.wrap_steps(Core, first)
    wrapped = Core.step
    slowdown.wrap_steps(Core, second)
    assert Core.step is wrapped
    Core(0.005).step_with_batch_queue()
    assert first.busy_s >= 0.005
    assert second.busy_s == 0


def test_sleep_overshoots_are_paid_back_so_the_share_holds_over_a_run() -> None:
    # Decode steps of 0.3 ms at 5 %: each owes 15 us, less than a sleep's usual overshoot.
    # Every sleep here overran by 55 us (Linux's default timer slack); the account still
    # adds 5 % of the run, and no sleep is longer than the debt plus one overshoot.
    added = slowdown.StepSlowdown(fixed_percent=5.0, control=None, log=None)
    sleeps: list[float] = []

    def late_sleep(seconds: float) -> float:
        sleeps.append(seconds)
        return seconds + 0.000055

    for _ in range(10_000):
        added.after_step(0.0003, sleep=late_sleep)
    assert added.busy_s == pytest.approx(3.0)
    assert added.added_s == pytest.approx(0.15, abs=0.00006)  # within one overshoot
    assert all(slowdown.MIN_SLEEP_S <= seconds < 0.0001 for seconds in sleeps)


def test_a_sleep_really_lasts_about_what_was_asked() -> None:
    # The figure a bench relies on; printed, and only a gross failure fails (shared machine).
    overshoots = [slowdown.measured_sleep(0.0001) - 0.0001 for _ in range(50)]
    print(f"median overshoot of a 100 us sleep: {1e6 * sorted(overshoots)[25]:.1f} us")
    assert min(overshoots) >= 0.0
    assert sorted(overshoots)[25] < 0.05


def test_the_control_file_sets_the_percent_and_a_bad_one_falls_back(tmp_path: Path) -> None:
    control = tmp_path / "percent"
    control.write_text("20\n")
    added = slowdown.StepSlowdown(fixed_percent=5.0, control=control, log=None)
    assert added.extra_seconds(1.0, now=0.0) == pytest.approx(0.2)
    control.write_text("40")
    assert added.extra_seconds(1.0, now=0.1) == pytest.approx(0.2)  # not re-read yet
    assert added.extra_seconds(1.0, now=0.3) == pytest.approx(0.4)
    control.write_text("not a number")
    assert added.extra_seconds(1.0, now=0.6) == pytest.approx(0.05)
    control.write_text("-10")
    assert added.extra_seconds(1.0, now=0.9) == 0.0


def test_the_environment_configures_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLMPERF_SLOWDOWN_PCT", "7.5")
    monkeypatch.delenv("LLMPERF_SLOWDOWN_FILE", raising=False)
    monkeypatch.setenv("LLMPERF_SLOWDOWN_LOG", str(tmp_path / "log"))
    configured = slowdown.from_environment()
    assert configured.extra_seconds(2.0, now=0.0) == pytest.approx(0.15)
    assert configured.log == tmp_path / "log"
    assert configured.wait is None  # asleep unless told to burn
    monkeypatch.setenv("LLMPERF_SLOWDOWN_BURN", "1")
    assert slowdown.from_environment().wait is slowdown.burned_wait


def test_a_burned_wait_keeps_the_cpu_busy_where_a_sleep_lets_it_go() -> None:
    # A sleep spends almost no CPU time; a burn spends it for the whole wait, less only what
    # a loaded machine's scheduler takes (so the bound is loose).
    cpu = time.thread_time()
    burned = slowdown.burned_wait(0.05)
    burned_cpu = time.thread_time() - cpu
    cpu = time.thread_time()
    slept = slowdown.measured_sleep(0.05)
    slept_cpu = time.thread_time() - cpu
    print(f"50 ms burned: {burned_cpu * 1000:.1f} ms CPU; slept: {slept_cpu * 1000:.2f} ms CPU")
    assert burned >= 0.05
    assert slept >= 0.05
    assert burned_cpu > 0.01
    assert slept_cpu < 0.005


def test_the_log_holds_busy_and_added_seconds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(slowdown, "LOG_EVERY_S", 0.0)
    log = tmp_path / "added.jsonl"
    added = slowdown.StepSlowdown(fixed_percent=25.0, control=None, log=log)
    added.after_step(0.004, sleep=lambda seconds: seconds)
    added.after_step(0.004, sleep=lambda seconds: seconds)
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["busy_s"] == pytest.approx(0.008)
    assert last["added_s"] == pytest.approx(0.002)
    assert last["percent"] == 25.0
