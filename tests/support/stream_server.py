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

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_END_OF_BODY = b"0\r\n\r\n"
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\n"
    b"transfer-encoding: chunked\r\n"
    b"\r\n"
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
    event = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


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
        self.connections = 0
        self.peak_connections = 0
        self.connections_total = 0  # accepted since the last reset: shows keep-alive reuse
        self.streams = 0
        self.peak_streams = 0

    # -- connection handling -------------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.connections_total += 1
        self.peak_connections = max(self.peak_connections, self.connections)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                t_recv = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        key, _, value = line.partition(":")
                        headers[key.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                keep_open = await self.route(method, path, headers, body, t_recv, reader, writer)
                if not keep_open or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self.connections -= 1
            with contextlib.suppress(Exception):
                writer.close()

    async def route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        t_recv: float,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if path == "/health":
            return await self.reply(writer, 200, b"{}")
        if path == "/version" and self.settings.version is not None:
            return await self.reply(writer, 200, _json({"version": self.settings.version}))
        if path == "/v1/models":  # what an OpenAI-compatible server lists; clients read the name
            models = {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
            return await self.reply(writer, 200, _json(models))
        if path == "/_stats":
            stats = {
                "peak_connections": self.peak_connections,
                "peak_streams": self.peak_streams,
                "connections_total": self.connections_total,
                "open_streams": self.streams,
                "requests": self.records,
            }
            return await self.reply(writer, 200, _json(stats))
        if path == "/_reset" and method == "POST":
            self.records.clear()
            self.peak_connections = self.connections
            self.connections_total = 0
            self.peak_streams = 0
            return await self.reply(writer, 200, b"{}")
        if method == "POST" and path.endswith("completions"):
            return await self.stream(path, headers, body, t_recv, reader, writer)
        return await self.reply(writer, 404, b'{"error":"not found"}')

    async def reply(self, writer: asyncio.StreamWriter, status: int, body: bytes) -> bool:
        reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(status, "Error")
        writer.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (status, reason.encode(), len(body), body)
        )
        await writer.drain()
        return True

    # -- streaming -----------------------------------------------------------------------

    async def stream(
        self,
        path: str,
        headers: dict[str, str],
        raw_body: bytes,
        t_recv: float,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        body = json.loads(raw_body)
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
            "headers": headers,
            "body": body,
            "t_recv": t_recv,
            "t_sends": sends,
            "status": 200,
        }
        if s.record:
            self.records.append(record)
        if mode == "http500":
            record["status"] = 500
            error = b'{"error":{"message":"stand-in failure","type":"InternalServerError"}}'
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(error), error)
            )
            await writer.drain()
            return True

        self.streams += 1
        self.peak_streams = max(self.peak_streams, self.streams)
        try:
            return await self._stream_events(
                writer, reader, body, chat, mode, n, ttft, gap_lo, gap_hi, per_chunk, sends
            )
        finally:
            self.streams -= 1

    async def _stream_events(
        self,
        writer: asyncio.StreamWriter,
        reader: asyncio.StreamReader,
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
        tail += _frame(b"[DONE]") + _END_OF_BODY

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
                    await reader.read()  # until the client gives up and closes
                    return False
                elif mode == "cut":
                    await writer.drain()
                    writer.close()  # no terminating chunk: the body is incomplete
                    return False
            if mode == "ping":
                writer.write(b"%x\r\n: ping\n\n\r\n" % len(b": ping\n\n"))
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


async def serve(settings: Settings, host: str, port: int, dump: Path | None) -> None:
    stand_in = StandIn(settings)
    server = await asyncio.start_server(stand_in.handle, host, port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    if dump is not None:
        dump.write_text(
            json.dumps(
                {
                    "peak_connections": stand_in.peak_connections,
                    "peak_streams": stand_in.peak_streams,
                    "requests": stand_in.records,
                }
            )
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
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
    asyncio.run(serve(settings, args.host, args.port, args.timestamps_file))


class StandInProcess:
    """The stand-in as a child process: ``with StandInProcess("--gap-ms", "5") as s: ...``."""

    def __init__(self, *args: str, cpus: set[int] | None = None) -> None:
        self.args = args
        self.cpus = cpus
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> StandInProcess:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--port", "0", *self.args],
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.cpus is not None:
            os.sched_setaffinity(self.proc.pid, self.cpus)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"stand-in server did not start: {line!r}")
        self.base_url = line.split()[-1]
        return self

    def stats(self) -> dict[str, Any]:
        import httpx

        response = httpx.get(self.base_url + "/_stats", timeout=30)
        response.raise_for_status()
        stats: dict[str, Any] = response.json()
        return stats

    def reset(self) -> None:
        import httpx

        httpx.post(self.base_url + "/_reset", timeout=30).raise_for_status()

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


if __name__ == "__main__":
    main()
