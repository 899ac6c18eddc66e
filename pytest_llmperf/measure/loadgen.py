"""Load generator: streams requests the way ``vllm bench serve`` does and times every chunk.

What it reproduces (metrics-spec §1, §2, §5): a precomputed gamma arrival schedule
(``arrivals``: the same gaps as vLLM's for the same seed), a FIFO concurrency cap,
``start_time`` read after the cap admits a request and before the POST, a token chunk being
any SSE event whose ``choices`` list is non-empty (so the chat role chunk is the first
token), TTFT at the first token chunk, one ITL sample per later token chunk, latency ending
at the last token chunk, and token counts from the trailing usage chunk. Unlike vLLM's
client, usage is also read from a chunk that carries choices (MindIE and older llama-server
builds send it with the last token, MindIE whatever ``stream_options`` says); the last usage
seen wins.

Where it deliberately differs, each without effect on vLLM-shaped streams except as noted:

- SSE framing follows the standard (``sse.SSEParser``) instead of split-and-strip.
- A chunk's timestamp is read once per network read, before its events are parsed, so it
  is the arrival of the bytes; vLLM reads the clock per event, before or after ``json.loads``
  depending on the endpoint. Events that share a read get equal times in both (vLLM's differ
  by a few µs of parsing).
- The request body is encoded before ``start_time``; aiohttp encodes it after.
- A failed request gets a one-line reason, not a traceback.
- An event carrying an ``error`` object (how vLLM reports a failure after the stream began,
  e.g. when its engine core dies) fails the request with the server's message; vLLM's
  client skips such an event and counts the request as a success with a cut-short output.
- Payloads leave out vLLM's no-op ``repetition_penalty: 1.0`` and ``logprobs: null``, which
  strict OpenAI-compatible servers may reject; ``min_tokens`` is added where the engine takes
  it, to pin output lengths (engines.md §0 rule 5).

The HTTP client is one ``httpx.AsyncClient`` over ``http1.StreamingTransport`` (see there
why not httpx's default transport); tests may pass any other httpx transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import sys
import time
from array import array
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import httpx

from pytest_llmperf.engines.base import RequestQuirks
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.escape import printable
from pytest_llmperf.measure.http1 import StreamingTransport
from pytest_llmperf.measure.sse import SSEParser
from pytest_llmperf.models import RequestRecord, SampleRequest

if TYPE_CHECKING:
    from pytest_llmperf.measure.arrivals import RampUp

__all__ = [
    "CHAT_ENDPOINT",
    "COMPLETIONS_ENDPOINT",
    "LoadConfig",
    "LoadResult",
    "Progress",
    "TokenCounter",
    "request_payload",
    "run_load",
    "run_load_async",
]

CHAT_ENDPOINT = "/v1/chat/completions"
COMPLETIONS_ENDPOINT = "/v1/completions"

Progress = Callable[[int, int, int], None]
"""``progress(done, total, output_tokens_so_far)``, called each time a request finishes."""
TokenCounter = Callable[[str], int]
"""Counts the tokens of generated text; used only when a response carries no usage."""

_DECODER = json.JSONDecoder()
_FREEZE_EVERY = 256  # finished requests between two gc.freeze() calls
_NO_CHUNK = "no token chunk received (no event with a non-empty 'choices' list)"
_MAX_REASON = 300


@dataclass(frozen=True)
class LoadConfig:
    """How to drive the server. Times are seconds, rates requests per second."""

    base_url: str  # API root without /v1, e.g. http://127.0.0.1:8000
    model: str  # the served model name, as GET /v1/models lists it
    endpoint: str = COMPLETIONS_ENDPOINT
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    ramp_up: RampUp | None = None  # vLLM's ramp-up; request_rate must then be inf
    num_warmups: int = 0  # copies of the first request, sent first and not measured
    request_timeout: float = 600.0  # per request, from start_time to the end of the stream
    quirks: RequestQuirks = field(default_factory=RequestQuirks)
    # Sent only as an Authorization header; never shown in a repr, record or error.
    api_key: str | None = field(default=None, repr=False)
    extra_body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    temperature: float | None = None  # None: not sent, the server's default applies

    def __post_init__(self) -> None:
        if not self.endpoint.endswith("completions"):
            raise ConfigError(
                f"endpoint {self.endpoint!r} is not an OpenAI completions endpoint; use "
                f"{CHAT_ENDPOINT!r} or {COMPLETIONS_ENDPOINT!r}"
            )
        if not self.request_rate > 0:
            raise ConfigError(
                f"request_rate must be > 0 (inf for no pacing), got {self.request_rate}"
            )
        if not self.burstiness > 0:
            raise ConfigError(f"burstiness must be > 0, got {self.burstiness}")
        if self.ramp_up is not None and not math.isinf(self.request_rate):
            raise ConfigError(
                "a ramp-up sets the rate itself (as in vllm bench serve); leave request_rate at "
                f"inf, got {self.request_rate}"
            )
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1 or None, got {self.max_concurrency}")
        if self.num_warmups < 0:
            raise ConfigError(f"num_warmups must be >= 0, got {self.num_warmups}")
        if not self.request_timeout > 0:
            raise ConfigError(f"request_timeout must be > 0, got {self.request_timeout}")

    @property
    def chat(self) -> bool:
        return self.endpoint.endswith("chat/completions")

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.endpoint


@dataclass(frozen=True)
class LoadResult:
    """What one run measured. Warm-up requests are in neither field."""

    records: tuple[RequestRecord, ...]  # in submission order
    duration: float  # first dispatch to last completion (metrics-spec §1 step 8)
    start: float = 0.0  # perf_counter() at the first dispatch


def request_payload(config: LoadConfig, request: SampleRequest) -> dict[str, Any]:
    """The JSON body for one request (metrics-spec §5, engines.md §0 rule 5)."""
    quirks = config.quirks
    payload: dict[str, Any] = {"model": config.model}
    if config.chat:
        payload["messages"] = [
            {"role": "user", "content": [{"type": "text", "text": request.prompt}]}
        ]
        payload[quirks.chat_max_tokens_field] = request.expected_output_len
    else:
        payload["prompt"] = request.prompt
        payload["max_tokens"] = request.expected_output_len
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    if request.ignore_eos:
        # Both pin the output length; a request that lets the model stop asks for neither.
        if quirks.supports_ignore_eos:
            payload["ignore_eos"] = True
        if quirks.supports_min_tokens:
            payload["min_tokens"] = request.expected_output_len
    if config.temperature is not None:
        payload["temperature"] = config.temperature
    payload.update(config.extra_body)
    return payload


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _one_line(text: str, secret: str | None) -> str:
    # The server's words: no escape sequences or control characters reach a log or report.
    text = " ".join(printable(text).split())
    if secret:
        text = text.replace(secret, "***")
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def _reason(exc: BaseException, secret: str | None) -> str:
    name = type(exc).__name__
    message = str(exc)
    return _one_line(f"{name}: {message}" if message else name, secret)


def _http_error(status: int, reason: str, body: bytes) -> str:
    """The reason of a non-200 response: the server's error message if it sent one."""
    detail = ""
    try:
        data = json.loads(body)
    except ValueError:
        detail = body.decode("utf-8", "replace")
    else:
        if isinstance(data, dict):
            error = data.get("error", data)
            if isinstance(error, dict):
                error = error.get("message", error)
            detail = error if isinstance(error, str) else json.dumps(error)
    return f"HTTP {status}: {detail.strip() or reason or 'no reason given'}"


class _Stream:
    """What one request has measured so far; survives a timeout that cancels the request."""

    __slots__ = ("chunks", "itl", "last", "output_tokens", "prompt_tokens", "start", "text", "ttft")

    def __init__(self, start: float, keep_text: bool) -> None:
        self.start = start
        self.ttft = 0.0
        self.last = start
        self.itl: array[float] = array("d")
        self.chunks = 0
        self.output_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.text: list[str] | None = [] if keep_text else None


class _Runner:
    """Sends requests through one client; turns each into a RequestRecord."""

    def __init__(
        self,
        config: LoadConfig,
        client: httpx.AsyncClient,
        token_counter: TokenCounter | None,
    ) -> None:
        self.config = config
        self.client = client
        self.url = config.url
        self.chat = config.chat
        self.token_counter = token_counter

    async def measure(self, request: SampleRequest, body: bytes, arrival: float) -> RequestRecord:
        record, _ = await self.measure_with_text(request, body, arrival, keep_text=False)
        return record

    async def measure_with_text(
        self, request: SampleRequest, body: bytes, arrival: float, *, keep_text: bool
    ) -> tuple[RequestRecord, str]:
        """The record, and the generated text when ``keep_text`` (a conversation's history
        needs the answer); timed exactly as ``measure`` times a request."""
        start = time.perf_counter()
        stream = _Stream(start, keep_text=keep_text or self.token_counter is not None)
        timeout = self.config.request_timeout
        try:
            error = await _within(timeout, self._exchange(body, stream))
        except asyncio.TimeoutError:
            error = f"timeout after {timeout:g} s"
        except Exception as exc:
            error = _reason(exc, self.config.api_key)
        text = "".join(stream.text) if stream.text is not None else ""
        return self._record(request, stream, arrival, error), text

    async def _exchange(self, body: bytes, stream: _Stream) -> str:
        """POST and read the stream; returns "" or why the request failed."""
        async with self.client.stream("POST", self.url, content=body) as response:
            if response.status_code != 200:
                detail = b""
                async for part in response.aiter_raw():
                    detail += part
                    if len(detail) > 2048:
                        break
                return _one_line(
                    _http_error(response.status_code, response.reason_phrase, detail),
                    self.config.api_key,
                )
            await self._read_events(response, stream)
        return ""

    async def _read_events(self, response: httpx.Response, stream: _Stream) -> None:
        # The hot path: one clock reading per network read, json.loads once per event.
        feed = SSEParser().feed
        raw_decode = _DECODER.raw_decode
        clock = time.perf_counter
        itl_append = stream.itl.append
        text = stream.text
        chat = self.chat
        start = stream.start
        last = start
        chunks = 0
        try:
            async for raw in response.aiter_raw():
                now = clock()
                for data in feed(raw):
                    if data == b"[DONE]":
                        continue
                    try:
                        # raw_decode skips json.loads's encoding sniffing and whitespace
                        # regexes; anything unusual takes the full json.loads below.
                        decoded = data.decode()
                        event, end = raw_decode(decoded)
                        if end != len(decoded) or type(event) is not dict:
                            raise ValueError
                    except ValueError:
                        event = _parse_event(data)
                    # Usage may ride on any chunk (MindIE and older llama-server builds send
                    # it with the last token, vLLM's continuous stats on every one): the last
                    # one seen wins.
                    usage = event.get("usage")
                    if usage:
                        stream.output_tokens = usage.get("completion_tokens")
                        prompt_tokens = usage.get("prompt_tokens")
                        if prompt_tokens is not None:
                            stream.prompt_tokens = prompt_tokens
                    choices = event.get("choices")
                    if choices:
                        if chunks:
                            itl_append(now - last)
                        else:
                            stream.ttft = now - start
                        last = now
                        chunks += 1
                        if text is not None:
                            text.append(_chunk_text(choices, chat))
                    elif not usage and "error" in event:
                        raise StreamError(_error_event_message(event["error"]))
        finally:
            stream.last = last
            stream.chunks = chunks

    def _record(
        self, request: SampleRequest, stream: _Stream, arrival: float, error: str
    ) -> RequestRecord:
        chunks = stream.chunks
        if not error and not chunks:
            error = _NO_CHUNK
        success = not error
        prompt_len = (
            stream.prompt_tokens if stream.prompt_tokens is not None else request.prompt_len
        )
        output_tokens = 0
        if success:
            if stream.output_tokens:
                output_tokens = int(stream.output_tokens)
            elif self.token_counter is not None and stream.text is not None:
                output_tokens = self.token_counter("".join(stream.text))
            else:
                output_tokens = chunks
        return RequestRecord(
            success=success,
            start_time=stream.start,
            ttft=stream.ttft,
            itl=stream.itl,
            latency=stream.last - stream.start if success else 0.0,
            output_tokens=output_tokens,
            prompt_len=int(prompt_len),
            chunks=chunks,
            error=error,
            queue_time=stream.start - arrival,
        )


class StreamError(Exception):
    """The server reported a failure inside a stream that had begun normally."""


def _error_event_message(error: Any) -> str:
    if isinstance(error, dict):
        message = error.get("message") or "no message"
        code = error.get("code")
        return f"error event: {message}" + (f" (code {code})" if code is not None else "")
    return f"error event: {error}"


def _parse_event(data: bytes) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except ValueError as exc:
        snippet = data[:80].decode("utf-8", "replace")
        raise ValueError(f"invalid JSON event ({exc}): {snippet}") from None
    if type(event) is not dict:
        raise ValueError(f"event is not a JSON object: {data[:80]!r}")
    return event


async def _within(seconds: float, work: Coroutine[Any, Any, str]) -> str:
    """``work`` bounded in time, run in the calling task.

    ``asyncio.wait_for`` before Python 3.12 runs it in a new task, which starts one loop
    iteration later: under load that delay, spent after ``start_time``, would count as TTFT.
    """
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)  # pragma: no cover - Python 3.10


def _chunk_text(choices: Any, chat: bool) -> str:
    choice = choices[0]
    if chat:
        delta = choice.get("delta") or {}
        return str(delta.get("content") or "")  # reasoning deltas are timed, not counted
    return str(choice.get("text") or "")


async def _drive(
    runner: _Runner,
    requests: Sequence[SampleRequest],
    bodies: Callable[[int], bytes],
    offsets: Sequence[float],
    limit: int | None,
    on_record: Callable[[int, RequestRecord], None],
) -> float:
    """Dispatch on schedule, at most ``limit`` in flight (FIFO); returns the start time.

    With a limit, ``limit`` workers take requests in arrival order, which is what vLLM's
    semaphore-per-task does, without keeping a task per waiting request alive.
    """
    n = len(requests)
    tasks: list[asyncio.Task[None]] = []
    queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()

    async def one(i: int, arrival: float) -> None:
        on_record(i, await runner.measure(requests[i], bodies(i), arrival))

    async def worker() -> None:
        while (item := await queue.get()) is not None:
            await one(*item)

    if limit is not None:
        tasks = [asyncio.create_task(worker()) for _ in range(min(limit, n))]
    try:
        start = time.perf_counter()
        clock = time.perf_counter
        for i, offset in enumerate(offsets):
            if offset > 0:
                delay = start + offset - clock()
                if delay > 0:
                    await asyncio.sleep(delay)
            arrival = clock()
            if limit is None:
                tasks.append(asyncio.create_task(one(i, arrival)))
            else:
                queue.put_nowait((i, arrival))
        if limit is not None:
            for _ in tasks:
                queue.put_nowait(None)
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return start


def _client(config: LoadConfig, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    from pytest_llmperf.redact import SecretHeaders

    headers = SecretHeaders({"Content-Type": "application/json", "Accept-Encoding": "identity"})
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return httpx.AsyncClient(
        transport=transport or StreamingTransport(max_connections=config.max_concurrency),
        headers=headers,
        timeout=None,  # each request is bounded by config.request_timeout instead
        trust_env=False,
        follow_redirects=False,
    )


class _Collector:
    """Keeps records in submission order and reports progress."""

    def __init__(self, n: int, progress: Progress | None, freeze: bool) -> None:
        self.records: list[RequestRecord | None] = [None] * n
        self.done = 0
        self.tokens = 0
        self.progress = progress
        self.freeze = freeze

    def keep(self, i: int, record: RequestRecord) -> None:
        self.records[i] = record
        self.done += 1
        if record.success:
            self.tokens += record.output_tokens
        if self.freeze and self.done % _FREEZE_EVERY == 0:
            gc.freeze()
        if self.progress is not None:
            self.progress(self.done, len(self.records), self.tokens)


@contextlib.contextmanager
def _quiet_gc() -> Iterator[bool]:
    """Keep the cyclic collector's full passes out of the measurement.

    A full collection walks every tracked object (the interpreter's, and every record so
    far): tens of ms during which no chunk is timed, an ITL outlier on every open stream.
    As timeit switches the collector off, a run freezes what exists (O(1)) and, from time to
    time, the records it has kept; the few cycles caught in a freeze wait for the end of the
    run. A caller that disabled the collector or froze objects itself is left alone.
    """
    quiet = gc.isenabled() and gc.get_freeze_count() == 0
    if quiet:
        gc.freeze()
    try:
        yield quiet
    finally:
        if quiet:
            gc.unfreeze()


async def run_load_async(
    config: LoadConfig,
    requests: Sequence[SampleRequest],
    *,
    progress: Progress | None = None,
    token_counter: TokenCounter | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> LoadResult:
    """Send ``requests`` as ``config`` says and return one record per request, in order.

    :param progress: called as ``progress(done, total, output_tokens_so_far)`` when a request
        finishes (warm-ups excluded).
    :param token_counter: counts output tokens from the generated text when a response has
        no usage; without it, the number of token chunks is used.
    :param transport: an httpx transport to use instead of ``StreamingTransport``.
    """
    # Imported here: the schedule needs NumPy, this module's import does not.
    from pytest_llmperf.measure.arrivals import arrival_offsets

    offsets = arrival_offsets(
        len(requests), config.request_rate, config.burstiness, config.seed, config.ramp_up
    )

    def body(i: int) -> bytes:
        return _encode(request_payload(config, requests[i]))

    with _quiet_gc() as quiet:
        collector = _Collector(len(requests), progress, freeze=quiet)
        async with _client(config, transport) as client:
            runner = _Runner(config, client, token_counter)
            limit = config.max_concurrency
            if requests and config.num_warmups:
                first = body(0)
                warmups = [requests[0]] * config.num_warmups
                zeros = [0.0] * len(warmups)
                await _drive(runner, warmups, lambda _: first, zeros, limit, lambda _i, _r: None)
            start = await _drive(runner, requests, body, offsets, limit, collector.keep)
            duration = time.perf_counter() - start
    records = tuple(r for r in collector.records if r is not None)
    assert len(records) == len(requests)
    return LoadResult(records=records, duration=duration, start=start)


def run_load(config: LoadConfig, requests: Sequence[SampleRequest], **options: Any) -> LoadResult:
    """Synchronous :func:`run_load_async` (same keyword options) in a fresh event loop,
    callable from any thread that is not already running one."""
    return asyncio.run(run_load_async(config, requests, **options))
