"""Async scenario tests: a flow the test writes, measured, recorded and gated like a profile.

Against the stand-in streaming server as an external engine: a three-step tool-call-like flow
(plan, three tool calls at once, answer with the results) is recorded, passes on a rerun, and
fails against a stand-in that streams twenty times slower.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.stream_server import StandInProcess

pytest.importorskip("pytest_asyncio")

SUITE = """
import asyncio

import pytest


async def tool_loop(client):
    question = [{"role": "user", "content": "Which city is warmer today?"}]
    plan = await client.chat(question, max_tokens=8, label="plan")
    assert plan.ok, plan.record.error
    calls = await asyncio.gather(*(
        client.chat([{"role": "user", "content": f"weather in city {i}"}], max_tokens=4,
                    label="tool")
        for i in range(3)
    ))
    results = "; ".join(call.text for call in calls)
    history = [*question, {"role": "assistant", "content": plan.text},
               {"role": "user", "content": f"tool results: {results}"}]
    answer = await client.chat(history, max_tokens=8, label="answer")
    assert answer.ok


@pytest.mark.asyncio
async def test_tool_loop(llmperf_scenario):
    result = await llmperf_scenario.check("tool-loop", tool_loop)
    assert result.metrics["completed"] == 5


@pytest.mark.asyncio
async def test_unmeasured_client(llmperf_scenario):
    async with llmperf_scenario.client() as client:
        reply = await client.chat([{"role": "user", "content": "hi"}], max_tokens=3)
    assert reply.text == "tok" * 3
"""


def _args(pytester: pytest.Pytester, server: StandInProcess, model: Path) -> list[str]:
    return [
        "--engine=external",
        f"--endpoint={server.base_url}",
        f"--model={model}",
        "--hardware=cpu",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "-p",
        "no:cacheprovider",
    ]


def test_record_pass_then_fail_slowed(pytester: pytest.Pytester, tiny_model_dir: Path) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_flow=SUITE)
    with StandInProcess("--gap-ms", "1", "--no-record") as fast:
        recorded = pytester.runpytest(*_args(pytester, fast, tiny_model_dir), "--update-baselines")
        recorded.assert_outcomes(passed=2)
        recorded.stdout.fnmatch_lines(["*external/tool-loop:*-> recorded*"])
        (path,) = (pytester.path / "baselines").rglob("*.yaml")
        entry = yaml.safe_load(path.read_text())["profiles"]["tool-loop"]
        assert entry["workload"] == {
            "dataset": "scenario",
            "scenario": "tool-loop",
            "requests": 5,
            "labels": ["answer", "plan", "tool"],
        }
        assert entry["metrics"]["tool_completed"] == 3
        assert entry["metrics"]["plan_completed"] == 1
        assert entry["metrics"]["total_output_tokens"] == 8 + 3 * 4 + 8
        # The stand-in is noisy at millisecond scale: gate TPOT with room for that noise.
        entry["tolerances"] = {"mean_tpot_ms": 300.0}
        document = yaml.safe_load(path.read_text())
        document["profiles"]["tool-loop"] = entry
        path.write_text(yaml.safe_dump(document, sort_keys=False))

        rerun = pytester.runpytest(*_args(pytester, fast, tiny_model_dir))
        rerun.assert_outcomes(passed=2)
        rerun.stdout.fnmatch_lines(["*external/tool-loop:*-> pass*"])

    with StandInProcess("--gap-ms", "25", "--no-record") as slowed:
        slow = pytester.runpytest(*_args(pytester, slowed, tiny_model_dir))
        slow.assert_outcomes(passed=1, failed=1)
        slow.stdout.fnmatch_lines(
            ["*llmperf: profile 'tool-loop' on external regressed*", "*mean_tpot_ms*REGRESSED*"]
        )
