"""A client for request flows that a test or a workload drives itself, one request at a time.

The load generator sends a fixed list of prompts on a schedule. Conversations (the next turn
needs the last answer) and scenario tests (a tool-call loop, a fan-out) decide what to send
from what came back, so they need single requests that return the answer, yet are timed
exactly as the load generator times them (same transport, same stream reader, same record),
so that their aggregate is comparable with a profile's and can be gated the same way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure import loadgen
from pytest_llmperf.measure.metrics import compute_metrics
from pytest_llmperf.models import RequestRecord, SampleRequest

__all__ = ["MeasuredClient", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One timed request: the generated text, its record, and the caller's label."""

    text: str
    record: RequestRecord
    label: str = ""

    @property
    def ok(self) -> bool:
        return self.record.success


class MeasuredClient:
    """``async with MeasuredClient(config) as client: await client.chat(...)``.

    Every request's record is kept (``replies``); ``metrics()`` aggregates them as a profile
    run is aggregated, over the time from the first request to the last answer.
    """

    def __init__(
        self, config: loadgen.LoadConfig, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self._http: httpx.AsyncClient | None = None
        self._runner: loadgen._Runner | None = None
        self.replies: list[Reply] = []

    async def __aenter__(self) -> MeasuredClient:
        self._http = loadgen._client(self.config, self._transport)
        await self._http.__aenter__()
        self._runner = loadgen._Runner(self.config, self._http, None)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        if self._http is not None:
            await self._http.__aexit__(*exc_info)
        self._http = self._runner = None

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        ignore_eos: bool = True,
        label: str = "",
        prompt_len: int = 0,
    ) -> Reply:
        """One chat request with these messages (history included); ``ignore_eos`` pins the
        answer to ``max_tokens`` tokens, as the profiles' requests are pinned."""
        if not self.config.chat:
            raise ConfigError(
                f"chat() needs the chat endpoint; this client sends to {self.config.endpoint}"
            )
        request = SampleRequest("", prompt_len, max_tokens, ignore_eos=ignore_eos)
        payload = loadgen.request_payload(self.config, request)
        payload["messages"] = [dict(message) for message in messages]
        return await self._send(request, payload, label)

    async def complete(
        self, prompt: str, *, max_tokens: int, ignore_eos: bool = True, label: str = ""
    ) -> Reply:
        """One completions request (the endpoint must be /v1/completions)."""
        if self.config.chat:
            raise ConfigError("complete() needs /v1/completions; this client sends to chat")
        request = SampleRequest(prompt, 0, max_tokens, ignore_eos=ignore_eos)
        return await self._send(request, loadgen.request_payload(self.config, request), label)

    async def _send(self, request: SampleRequest, payload: dict[str, Any], label: str) -> Reply:
        if self._runner is None:
            raise RuntimeError("use the client inside 'async with'")
        body = loadgen._encode(payload)
        record, text = await self._runner.measure_with_text(
            request, body, time.perf_counter(), keep_text=True
        )
        reply = Reply(text, record, label)
        self.replies.append(reply)
        return reply

    def records(self, label: str | None = None) -> list[RequestRecord]:
        return [r.record for r in self.replies if label is None or r.label == label]

    def metrics(self, label: str | None = None) -> dict[str, Any]:
        """vLLM's aggregate metrics over the replies (those with ``label`` if given)."""
        records = self.records(label)
        if not records:
            raise ValueError(f"no requests{f' labelled {label!r}' if label else ''} to measure")
        return compute_metrics(records, span(records))


def span(records: Sequence[RequestRecord]) -> float:
    """Seconds from the first request's start to the last one's end (never zero)."""
    start = min(r.start_time for r in records)
    end = max(r.start_time + (r.latency if r.success else r.ttft) for r in records)
    return max(end - start, 1e-9)
