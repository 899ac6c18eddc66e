"""One server at a time (--llmperf-ab-restart) with SGLang stand-ins: the other server is
gone before a switch starts this one, a switch to the server that is up costs nothing, and
an A/B session through pytest alternates A,B,B,A with one restart per pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.engines.alternation import OneServerAtATime
from pytest_llmperf.engines.warden import is_alive


def _events(record_dir: Path) -> list[str]:
    path = record_dir / "events"
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def _never_two_up(events: list[str]) -> None:
    """Each "ready" comes after the previous server's "stopping": never two up at once."""
    up = 0
    for name in events:
        up += {"ready": 1, "stopping": -1}[name]
        assert 0 <= up <= 1, events


def test_a_switch_stops_the_other_server_first_and_counts_the_restart(standins) -> None:
    standins.steer(load_s=0.1, warmup_s=0.1)
    first, second = standins.server("sglang"), standins.server("sglang")
    first.start()
    first.wait_ready()
    switch = OneServerAtATime()
    switch.started(first)

    switch.switch_to(second)
    assert first.pid is not None
    assert not is_alive(first.pid)
    assert first.leftover_pids() == set()
    text, _ = standins.chat(second)
    assert text
    old_pid = first.pid

    switch.switch_to(second)  # already up: nothing happens
    assert switch.restarts == 1

    switch.switch_to(first)  # the first serves again, a new process on the same port
    assert first.pid != old_pid
    assert standins.chat(first)[0]
    assert second.leftover_pids() == set()
    assert switch.restarts == 2
    assert switch.seconds > 0
    _never_two_up(_events(standins.record_dir))


def test_restart_refuses_a_server_that_still_runs(standins) -> None:
    standins.steer(load_s=0.1, warmup_s=0.1)
    server = standins.server("sglang")
    server.start()
    server.wait_ready()
    with pytest.raises(RuntimeError, match="stop"):
        server.restart()


SUITE = """\
import pytest

@pytest.mark.llmperf(tolerances={"total_token_throughput": 60, "mean_tpot_ms": 60})
def test_serving(llmperf):
    llmperf.check()
"""


def test_an_ab_session_with_restarts_alternates_one_server_at_a_time(
    standins, pytester: pytest.Pytester, tiny_model_dir: Path
) -> None:
    standins.steer(load_s=0.1, warmup_s=0.1)
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nllmperf_profiles = mini.yaml\n"
    )
    pytester.path.joinpath("mini.yaml").write_text(
        "profiles:\n  mini:\n    dataset: random\n    input_len: 16\n    output_len: 8\n"
        "    num_prompts: 4\n",
        encoding="utf-8",
    )
    pytester.makepyfile(test_suite=SUITE)
    pytester.path.joinpath("variants.yaml").write_text(
        "variants:\n"
        "  - {name: main, engine: sglang, reference: true}\n"
        "  - {name: pr, engine: sglang}\n",
        encoding="utf-8",
    )
    result = pytester.runpytest_subprocess(
        "--llmperf-variants=variants.yaml",
        "--llmperf-ab-restart",
        "--llmperf-ab-budget=6",
        "--llmperf-profile=mini",
        f"--model={tiny_model_dir}",
        "--hardware=cpu",
        "--llmperf-warmups=1",
        "--llmperf-json=out.json",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "-p",
        "no:cacheprovider",
    )
    document = json.loads(pytester.path.joinpath("out.json").read_text(encoding="utf-8"))
    (record,) = document["results"]
    experiment = record["ab"]
    assert experiment["order"].startswith("ABBAAB")
    pairs = experiment["pairs"]
    assert experiment["restarts"] == pairs  # one switch per pair in the A,B,B,A order
    assert any("one server at a time" in note for note in record["notes"])
    events = _events(standins.record_dir)
    _never_two_up(events)
    # B's first start, A's first start, then one start per switch; every start stopped.
    assert events.count("ready") == pairs + 2
    assert events.count("stopping") == events.count("ready")
    # Two equal stand-ins: never a regression (an inconclusive experiment passes too).
    assert record["outcome"] in ("same", "inconclusive")
    assert result.ret == pytest.ExitCode.OK
