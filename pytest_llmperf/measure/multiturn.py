"""Multi-turn conversations: turn k+1 is sent after turn k's answer, with the history.

In a chat the history grows with every turn and is sent again each time, so from the second
turn on most of a prompt is a prefix the engine has seen a moment ago: the later turns' time
to first token is the prefix cache's work. Several conversations run at once (each one strictly
in order); the metrics are the run's as a whole and, per turn, ``turn<k>_*``.

The user turns are token-exact random prompts (the ``random`` dataset's, one per turn), so a
profile's conversations are the same on every run; the answers are whatever the model says,
pinned to ``output_len`` tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.client import MeasuredClient, span
from pytest_llmperf.measure.loadgen import LoadConfig
from pytest_llmperf.measure.metrics import compute_metrics
from pytest_llmperf.models import RequestRecord, SampleRequest

__all__ = ["MultiTurnResult", "conversations", "run_conversations", "turn_metrics"]

# Per turn, the few numbers that show the cache at work (the full set is the run's).
TURN_METRICS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


@dataclass(frozen=True)
class MultiTurnResult:
    records: tuple[RequestRecord, ...]  # in the order the requests finished
    turns: tuple[int, ...]  # each record's turn, from 1
    duration: float
    unsent: int  # turns never sent because an earlier turn of their conversation failed


def conversations(requests: Sequence[SampleRequest], turns: int) -> list[list[SampleRequest]]:
    """The workload's requests, conversation by conversation (``turns`` each, in order)."""
    if turns < 1 or len(requests) % turns:
        raise ConfigError(
            f"multi-turn: {len(requests)} requests do not split into conversations of "
            f"{turns} turns; make num_prompts a multiple of turns"
        )
    return [list(requests[i : i + turns]) for i in range(0, len(requests), turns)]


async def _converse(
    client: MeasuredClient,
    turns: list[SampleRequest],
    found: list[tuple[RequestRecord, int]],
    think_time: float,
) -> int:
    """Runs one conversation; returns how many of its turns were never sent."""
    history: list[dict[str, Any]] = []
    for index, turn in enumerate(turns, start=1):
        if index > 1 and think_time > 0:
            await asyncio.sleep(think_time)
        history.append({"role": "user", "content": turn.prompt})
        reply = await client.chat(
            history,
            max_tokens=turn.expected_output_len,
            ignore_eos=turn.ignore_eos,
            prompt_len=turn.prompt_len,
        )
        found.append((reply.record, index))
        if not reply.ok:
            return len(turns) - index
        history.append({"role": "assistant", "content": reply.text})
    return 0


async def run_conversations_async(
    config: LoadConfig,
    requests: Sequence[SampleRequest],
    *,
    turns: int,
    think_time: float = 0.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> MultiTurnResult:
    """All conversations, at most ``config.max_concurrency`` of them at once (None: all)."""
    chats = conversations(requests, turns)
    limit = asyncio.Semaphore(config.max_concurrency or len(chats) or 1)
    found: list[tuple[RequestRecord, int]] = []

    async with MeasuredClient(config, transport=transport) as client:

        async def one(chat: list[SampleRequest]) -> int:
            async with limit:
                return await _converse(client, chat, found, think_time)

        unsent = sum(await asyncio.gather(*(one(chat) for chat in chats)))
    records = tuple(record for record, _ in found)
    return MultiTurnResult(
        records=records,
        turns=tuple(turn for _, turn in found),
        duration=span(records) if records else 1e-9,
        unsent=unsent,
    )


def run_conversations(
    config: LoadConfig, requests: Sequence[SampleRequest], **options: Any
) -> MultiTurnResult:
    """Synchronous :func:`run_conversations_async` in a fresh event loop."""
    return asyncio.run(run_conversations_async(config, requests, **options))


def turn_metrics(result: MultiTurnResult) -> dict[str, float]:
    """``turn<k>_<metric>`` for each turn that has answers (TTFT, TPOT, latency)."""
    out: dict[str, float] = {}
    for turn in sorted(set(result.turns)):
        records = [r for r, t in zip(result.records, result.turns, strict=True) if t == turn]
        if not any(r.success for r in records):
            continue
        computed = compute_metrics(records, span(records))
        for key in TURN_METRICS:
            if key in computed:
                out[f"turn{turn}_{key}"] = float(computed[key])
    return out
