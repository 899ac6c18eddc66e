"""Multi-turn conversations and the measured client, against the stand-in streaming server."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from stream_server import StandInProcess

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.client import MeasuredClient
from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, COMPLETIONS_ENDPOINT, LoadConfig
from pytest_llmperf.measure.multiturn import (
    conversations,
    run_conversations,
    turn_metrics,
)
from pytest_llmperf.models import SampleRequest


def _config(server: StandInProcess, **kwargs: object) -> LoadConfig:
    return LoadConfig(
        base_url=server.base_url,
        model="m",
        endpoint=CHAT_ENDPOINT,
        **kwargs,  # type: ignore[arg-type]
    )


def _turns(count: int, turns: int) -> list[SampleRequest]:
    return [
        SampleRequest(f"conversation {c} turn {t}", 5, 3 + t)
        for c in range(count)
        for t in range(1, turns + 1)
    ]


def test_each_turn_carries_the_history_and_follows_the_answer(stand_in: StandInProcess) -> None:
    result = run_conversations(_config(stand_in), _turns(3, 3), turns=3)
    assert result.unsent == 0
    assert len(result.records) == 9
    assert all(r.success for r in result.records)
    sent = stand_in.stats()["requests"]
    by_conversation: dict[str, list[dict[str, object]]] = {}
    for request in sent:
        first = request["body"]["messages"][0]["content"]
        by_conversation.setdefault(first, []).append(request)
    assert len(by_conversation) == 3
    for chat in by_conversation.values():
        chat.sort(key=lambda r: r["t_recv"])  # type: ignore[arg-type, return-value]
        for index, request in enumerate(chat, start=1):
            messages = request["body"]["messages"]  # type: ignore[index]
            # user, assistant, user, ...: the answers so far are part of the prompt.
            assert [m["role"] for m in messages] == ["user", "assistant"] * (index - 1) + ["user"]
            for k, answer in enumerate(messages[1::2], start=1):
                assert answer["content"] == "tok" * (3 + k)  # what the stand-in streamed
            if index > 1:
                # Sent only after the previous answer's last chunk had gone out.
                previous = chat[index - 2]
                assert request["t_recv"] > previous["t_sends"][-1]  # type: ignore[index, operator]


def test_think_time_separates_turns(stand_in: StandInProcess) -> None:
    run_conversations(_config(stand_in), _turns(1, 3), turns=3, think_time=0.2)
    sent = sorted(stand_in.stats()["requests"], key=lambda r: r["t_recv"])
    for previous, request in itertools.pairwise(sent):
        assert request["t_recv"] - previous["t_sends"][-1] >= 0.2


def test_conversations_in_parallel_up_to_the_limit(stand_in: StandInProcess) -> None:
    run_conversations(_config(stand_in, max_concurrency=2), _turns(6, 2), turns=2)
    stats = stand_in.stats()
    assert len(stats["requests"]) == 12
    assert stats["peak_streams"] == 2  # two conversations at a time, one request each


def test_per_turn_metrics(start_stand_in: object) -> None:
    server = start_stand_in("--ttft-ms", "30", "--gap-ms", "1")  # type: ignore[operator]
    result = run_conversations(_config(server), _turns(4, 2), turns=2)
    metrics = turn_metrics(result)
    assert set(metrics) == {
        f"turn{t}_{key}"
        for t in (1, 2)
        for key in ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
    }
    assert 25 < metrics["turn1_mean_ttft_ms"] < 1000
    assert 25 < metrics["turn2_mean_ttft_ms"] < 1000


def test_a_failed_turn_ends_its_conversation(stand_in: StandInProcess) -> None:
    config = _config(stand_in, extra_body={"x_mode": "http500"})
    result = run_conversations(config, _turns(2, 3), turns=3)
    assert len(result.records) == 2
    assert not any(r.success for r in result.records)
    assert result.unsent == 4


def test_requests_must_split_into_conversations() -> None:
    with pytest.raises(ConfigError, match="make num_prompts a multiple of turns"):
        conversations(_turns(1, 3)[:2], 3)


def test_measured_client_labels_and_aggregates(stand_in: StandInProcess) -> None:
    async def flow() -> MeasuredClient:
        async with MeasuredClient(_config(stand_in)) as client:
            plan = await client.chat(
                [{"role": "user", "content": "plan"}], max_tokens=4, label="plan"
            )
            assert plan.ok
            assert plan.text == "tok" * 4
            # Fan-out: three tool calls at once, then one answer.
            calls = await asyncio.gather(
                *(
                    client.chat(
                        [{"role": "user", "content": f"tool {i}"}], max_tokens=2, label="tool"
                    )
                    for i in range(3)
                )
            )
            assert all(c.ok for c in calls)
            return client

    client = asyncio.run(flow())
    assert len(client.records()) == 4
    assert client.metrics("tool")["completed"] == 3
    assert client.metrics()["total_output_tokens"] == 4 + 3 * 2
    with pytest.raises(ValueError, match="no requests labelled 'nothing'"):
        client.metrics("nothing")


def test_measured_client_refuses_the_wrong_endpoint(stand_in: StandInProcess) -> None:
    async def flow() -> None:
        config = LoadConfig(base_url=stand_in.base_url, model="m", endpoint=COMPLETIONS_ENDPOINT)
        async with MeasuredClient(config) as client:
            with pytest.raises(ConfigError, match="chat\\(\\) needs the chat endpoint"):
                await client.chat([], max_tokens=1)
            reply = await client.complete("hello", max_tokens=2)
            assert reply.text == "toktok"

    asyncio.run(flow())
