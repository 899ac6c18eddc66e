"""Stand-in for an OpenAI-compatible streaming server that records when it sent each chunk.

It streams Server-Sent Events shaped like vLLM's (a role chunk first for chat, one content
chunk per token, a usage chunk with ``choices: []``, then ``data: [DONE]``) over HTTP/1.1
with chunked transfer encoding, and keeps, per request, the headers and body it received and
the ``time.perf_counter()`` reading taken right after each chunk was handed to the kernel.
On Linux ``perf_counter`` is ``CLOCK_MONOTONIC``, so those readings can be compared with a
client's readings in another process: that is what the ground-truth tests do.

Run it on its own (``python tests/support/stream_server.py --port 0 --gap-ms 20``; it prints
``listening on http://HOST:PORT`` once it accepts connections) or through
:class:`StandInProcess`. ``GET /_stats`` returns what it recorded, ``POST /_reset`` clears it.

A request body may steer one request (the load generator's ``extra_body`` puts these keys in):
``x_mode`` (``ok``, ``http500``, ``cut``, ``bad_json``, ``stall``, ``no_usage``,
``usage_last`` (usage on the last token chunk, no usage chunk), ``ping``, ``split``,
``empty``), ``x_chunks``, ``x_ttft_ms``, ``x_gap_ms``, ``x_gap_max_ms``,
``x_tokens_per_chunk``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from . import http_helper
except ImportError:  # run as a script, or imported with this folder on sys.path
    import http_helper  # type: ignore[no-redef]

_STREAM_HEAD = http_helper.head_bytes(
    "HTTP/1.1 200 OK",
    [("content-type", "text/event-stream; charset=utf-8"), ("transfer-encoding", "chunked")],
)


@dataclass
class Settings:
    chunks: int | None = None  # content chunks per request; None: the request's max tokens
    ttft_ms: float = 0.0
    gap_ms: float = 0.0
    gap_max_ms: float | None = None  # gaps uniform in [gap_ms, gap_max_ms] when set
    seed: int = 0
    record: bool = True
    version: str | None = None  # answered at GET /version (as vLLM does) when set
    tokens_per_chunk: int = 1
    # Events per write() when streaming with no gap: the server must outrun any client it
    # is measured against, and one syscall per event can make it the bottleneck.
    burst_events: int = 32


def _frame(payload: bytes) -> bytes:
    """One SSE event in one HTTP chunk."""
    return http_helper.chunk(b"data: " + payload + b"\n\n")


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _prompt_tokens(body: dict[str, Any]) -> int:
    if "prompt" in body:
        return len(str(body["prompt"]).split())
    words = 0
    for message in body.get("messages", []):
        content = message.get("content", "")
        if isinstance(content, list):
            words += sum(len(str(part.get("text", "")).split()) for part in content)
        else:
            words += len(str(content).split())
    return words + 10  # what a chat template would add


class StandIn:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.records: list[dict[str, Any]] = []
        self.http = http_helper.HttpServer(self.route, self.stats, self.reset)
        self.streams = 0
        self.peak_streams = 0

    def reset(self) -> None:
        self.records.clear()
        self.peak_streams = 0

    def stats(self) -> dict[str, Any]:
        return {
            "peak_connections": self.http.peak,
            "peak_streams": self.peak_streams,
            # accepted since the last reset: shows keep-alive reuse
            "connections_total": self.http.accepted,
            "open_streams": self.streams,
            "requests": self.records,
        }

    async def route(self, request: http_helper.Request, writer: asyncio.StreamWriter) -> bool:
        path = request.route
        if path == "/health":
            return await http_helper.reply(writer, 200, b"{}")
        if path == "/version" and self.settings.version is not None:
            return await http_helper.reply_json(writer, {"version": self.settings.version})
        if path == "/v1/models":  # what an OpenAI-compatible server lists; clients read the name
            return await http_helper.reply_json(
                writer, {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
            )
        if request.is_completion:
            return await self.stream(request, writer)
        return await http_helper.reply(writer, 404, b'{"error":"not found"}')

    # -- streaming -----------------------------------------------------------------------

    async def stream(self, request: http_helper.Request, writer: asyncio.StreamWriter) -> bool:
        path = request.path
        body = json.loads(request.body)
        s = self.settings
        mode = body.get("x_mode", "ok")
        chat = path.endswith("chat/completions")
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        n = int(body.get("x_chunks") or s.chunks or max_tokens or 16)
        ttft = float(body.get("x_ttft_ms", s.ttft_ms)) / 1000
        gap_lo = float(body.get("x_gap_ms", s.gap_ms)) / 1000
        gap_hi_ms = body.get("x_gap_max_ms", s.gap_max_ms)
        gap_hi = gap_lo if gap_hi_ms is None else float(gap_hi_ms) / 1000
        per_chunk = int(body.get("x_tokens_per_chunk", s.tokens_per_chunk))
        sends: list[float] = []
        record: dict[str, Any] = {
            "path": path,
            "headers": request.fields,
            "body": body,
            "t_recv": request.received,
            "t_sends": sends,
            "status": 200,
        }
        if s.record:
            self.records.append(record)
        if mode == "http500":
            record["status"] = 500
            error = {"error": {"message": "stand-in failure", "type": "InternalServerError"}}
            return await http_helper.reply_json(writer, error, 500)

        self.streams += 1
        self.peak_streams = max(self.peak_streams, self.streams)
        try:
            return await self._stream_events(
                writer, request, body, chat, mode, n, ttft, gap_lo, gap_hi, per_chunk, sends
            )
        finally:
            self.streams -= 1

    async def _stream_events(
        self,
        writer: asyncio.StreamWriter,
        request: http_helper.Request,
        body: dict[str, Any],
        chat: bool,
        mode: str,
        n: int,
        ttft: float,
        gap_lo: float,
        gap_hi: float,
        per_chunk: int,
        sends: list[float],
    ) -> bool:
        model = body.get("model", "")
        created = int(time.time())
        base: dict[str, Any] = {"id": "cmpl-standin", "created": created, "model": model}
        if chat:
            base["object"] = "chat.completion.chunk"
            choice = {
                "index": 0,
                "delta": {"content": "tok"},
                "logprobs": None,
                "finish_reason": None,
            }
            role = {**base, "choices": [{**choice, "delta": {"role": "assistant", "content": ""}}]}
            first_frames = [_frame(_json(role))]
        else:
            base["object"] = "text_completion"
            choice = {
                "index": 0,
                "text": "tok",
                "logprobs": None,
                "finish_reason": None,
                "stop_reason": None,
            }
            first_frames = []
        content = _frame(_json({**base, "choices": [choice]}))
        usage = {
            "prompt_tokens": _prompt_tokens(body),
            "completion_tokens": n * per_chunk,
            "total_tokens": _prompt_tokens(body) + n * per_chunk,
        }
        last_event = {**base, "choices": [{**choice, "finish_reason": "length"}]}
        if mode == "usage_last":  # as MindIE and older llama-server builds send it
            last_event["usage"] = usage
        last = _frame(_json(last_event))
        tail = b""
        if mode not in ("no_usage", "usage_last"):
            tail += _frame(_json({**base, "choices": [], "usage": usage}))
        tail += _frame(b"[DONE]") + http_helper.LAST_CHUNK

        writer.write(_STREAM_HEAD)
        if mode == "empty":
            writer.write(tail)
            await writer.drain()
            return True
        if ttft > 0:
            await asyncio.sleep(ttft)

        frames = [*first_frames, *([content] * (n - 1)), last]
        clock = time.perf_counter
        if gap_hi <= 0 and mode == "ok":
            # As fast as it can: several events per write, one timestamp per write.
            burst = max(1, self.settings.burst_events)
            for i in range(0, len(frames), burst):
                batch = frames[i : i + burst]
                writer.write(b"".join(batch))
                now = clock()
                sends.extend([now] * len(batch))
                await writer.drain()
            writer.write(tail)
            await writer.drain()
            return True

        n_first = len(first_frames)
        if mode == "ok":
            paced = _Paced(writer.transport, frames, n_first, gap_lo, gap_hi, self.rng, sends)
            if not await paced.done:
                return False
            writer.write(tail)
            await writer.drain()
            return True

        uniform = self.rng.uniform
        for i, frame in enumerate(frames):
            if i > n_first:  # the role chunk and the first content chunk go back to back
                await asyncio.sleep(uniform(gap_lo, gap_hi) if gap_hi > gap_lo else gap_lo)
            if writer.transport.is_closing():
                return False
            if i == n_first + 1 and mode != "ok":
                if mode == "bad_json":
                    writer.write(_frame(b'{"choices": [{"index": 0,'))
                elif mode == "stall":
                    await writer.drain()
                    await http_helper.until_client_leaves(request)
                    return False
                elif mode == "cut":
                    await writer.drain()
                    writer.close()  # no terminating chunk: the body is incomplete
                    return False
            if mode == "ping":
                writer.write(http_helper.chunk(b": ping\n\n"))
            if mode == "split":
                # One event in two writes: the client must join events across reads.
                half = len(frame) // 2
                writer.write(frame[:half])
                await writer.drain()
                await asyncio.sleep(0.002)
                writer.write(frame[half:])
            else:
                writer.write(frame)
            sends.append(clock())
            await writer.drain()
        writer.write(tail)
        await writer.drain()
        return True


class _Paced:
    """Sends frames from timer callbacks: no task wake-up per chunk, so a stand-in serving
    hundreds of paced streams stays quick to read new requests and to send on time."""

    def __init__(
        self,
        transport: asyncio.WriteTransport,
        frames: list[bytes],
        n_first: int,
        gap_lo: float,
        gap_hi: float,
        rng: random.Random,
        sends: list[float],
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[bool] = self.loop.create_future()
        self.transport = transport
        self.frames = frames
        self.n_first = n_first
        self.gap_lo = gap_lo
        self.gap_hi = gap_hi
        self.rng = rng
        self.sends = sends
        self.next = 0
        self.tick()

    def tick(self) -> None:
        if self.transport.is_closing():
            self.done.set_result(False)
            return
        i = self.next
        self.transport.write(self.frames[i])
        self.sends.append(time.perf_counter())
        self.next = i = i + 1
        if i == len(self.frames):
            self.done.set_result(True)
        elif i <= self.n_first:  # the role chunk and the first content chunk go back to back
            self.tick()
        else:
            gap = (
                self.rng.uniform(self.gap_lo, self.gap_hi)
                if self.gap_hi > self.gap_lo
                else (self.gap_lo)
            )
            self.loop.call_later(gap, self.tick)


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None
    parser = http_helper.command_line(__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=None)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--gap-max-ms", type=float, default=None)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument(
        "--burst-events", type=int, default=32, help="events per write when --gap-ms is 0"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-record", action="store_true", help="keep no per-request records")
    parser.add_argument("--version", default=None, help="answer GET /version with this version")
    parser.add_argument(
        "--timestamps-file",
        type=Path,
        default=None,
        help="write the records here as JSON on shutdown",
    )
    args = parser.parse_args(argv)
    settings = Settings(
        chunks=args.chunks,
        ttft_ms=args.ttft_ms,
        gap_ms=args.gap_ms,
        gap_max_ms=args.gap_max_ms,
        seed=args.seed,
        record=not args.no_record,
        tokens_per_chunk=args.tokens_per_chunk,
        burst_events=args.burst_events,
        version=args.version,
    )
    stand_in = StandIn(settings)
    http_helper.run_until_signalled(stand_in.http, args.host, args.port)
    if args.timestamps_file is not None:
        stats = stand_in.stats()
        dump = {key: stats[key] for key in ("peak_connections", "peak_streams", "requests")}
        args.timestamps_file.write_text(json.dumps(dump))


class StandInProcess(http_helper.ServerProcess):
    """The stand-in as a child process: ``with StandInProcess("--gap-ms", "5") as s: ...``."""

    def __init__(self, *args: str, cpus: set[int] | None = None) -> None:
        super().__init__("stream_server.py", *args, cpus=cpus)

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.call("GET", "/_stats")
        return stats

    def reset(self) -> None:
        self.call("POST", "/_reset")


if __name__ == "__main__":
    main()
