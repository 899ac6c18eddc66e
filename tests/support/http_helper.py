"""The one small HTTP/1.1 server under the tests' stand-in server and proxies (asyncio streams).

``stream_server.py`` (a stand-in OpenAI-compatible server), ``slow_proxy.py`` (stretches a
real server's time) and ``fault_proxy.py`` (damages its answers) are thin layers over this
module: it reads requests (and an upstream's answers) with one parser, keeps connections
alive, counts them, answers the control requests ``GET /_stats`` and ``POST /_reset``,
forwards a request to an upstream, and runs a server from the command line, in a child
process or on a thread. The layers only route and shape the bytes.

Why asyncio streams and not a server library such as aiohttp's: the layers need the socket
itself (writes from timer callbacks for paced streams, an upstream's chunked framing passed
through byte for byte, a body cut in the middle of a chunk, a connection aborted before any
answer), which a library's response objects keep out of reach. And the stand-in must outrun
the client it measures: on the 2-core test machine (cpu-amx-2c, shared, noisy) aiohttp's
web server spent 110-160 us of CPU per streamed request where this parser spends 46-62 us.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

Headers = list[tuple[str, str]]
LAST_CHUNK = b"0\r\n\r\n"
# Headers that describe one connection, not the message: a proxy sets its own.
HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "content-length", "transfer-encoding", "host", "proxy-connection"}
)
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


# -- reading -------------------------------------------------------------------------------


def parse_head(raw: bytes) -> tuple[str, Headers]:
    """The first line and the headers of a request's or an answer's head (CRLF lines)."""
    lines = raw.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
    return lines[0], headers


def find_header(headers: Headers, name: str) -> str:
    """The first value of header ``name`` (lower case), "" when it is absent."""
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


@dataclass
class Request:
    method: str
    path: str  # as sent, query included
    version: str
    headers: Headers  # as sent: order and case kept, for tests that check what a client sent
    fields: dict[str, str]  # the same by lower-case name (the last one of a repeated name)
    body: bytes
    received: float  # time.perf_counter() right after the head was read
    reader: asyncio.StreamReader  # the rest of the connection: see :func:`until_client_leaves`

    def header(self, name: str) -> str:
        """The value of header ``name`` (lower case), "" when it is absent."""
        return self.fields.get(name, "")

    @property
    def route(self) -> str:
        return self.path.split("?", 1)[0]

    @property
    def is_completion(self) -> bool:
        """A load request (chat or text completion), as opposed to a control or probe."""
        return self.method == "POST" and self.route.endswith("completions")


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request on a connection; None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    received = time.perf_counter()
    first, headers = parse_head(head)
    method, path, version = first.split(" ", 2)
    fields = {key.lower(): value for key, value in headers}
    length = int(fields.get("content-length") or 0)
    body = await reader.readexactly(length) if length else b""
    return Request(method, path, version, headers, fields, body, received, reader)


async def until_client_leaves(request: Request, seconds: float | None = None) -> None:
    """Send nothing until the client closes the connection (or ``seconds`` pass): a stalled
    stream, which only the client's timeout can end."""
    with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
        await asyncio.wait_for(request.reader.read(), seconds)


# -- writing -------------------------------------------------------------------------------


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def head_bytes(first_line: str, headers: Headers) -> bytes:
    lines = [first_line, *(f"{key}: {value}" for key, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def status_line(status: int) -> str:
    return f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}"


async def reply(writer: asyncio.StreamWriter, status: int, body: bytes) -> bool:
    """A complete JSON answer; True: the connection can serve the next request."""
    head = [("content-type", "application/json"), ("content-length", str(len(body)))]
    writer.write(head_bytes(status_line(status), head) + body)
    await writer.drain()
    return True


async def reply_json(writer: asyncio.StreamWriter, answer: Any, status: int = 200) -> bool:
    return await reply(writer, status, json.dumps(answer, separators=(",", ":")).encode())


# -- serving -------------------------------------------------------------------------------

# Answers one request; False when the connection must close after it.
Handler = Callable[[Request, asyncio.StreamWriter], Awaitable[bool]]


class HttpServer:
    """Keep-alive connections, each request read and handed to ``handler``; counts the
    connections (``open``, ``peak``, ``accepted`` since the last reset).

    Answers the control requests every layer has itself: ``GET /_stats`` with what
    ``stats()`` returns, ``POST /_reset`` by calling ``reset()`` (the counts restart too).
    """

    def __init__(
        self,
        handler: Handler,
        stats: Callable[[], dict[str, Any]],
        reset: Callable[[], None],
    ) -> None:
        self.handler = handler
        self.stats = stats
        self.reset = reset
        self.open = 0
        self.peak = 0
        self.accepted = 0
        self._tasks: set[asyncio.Task[Any]] = set()

    def reset_counts(self) -> None:
        self.peak = self.open
        self.accepted = 0

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self.open += 1
        self.accepted += 1
        self.peak = max(self.peak, self.open)
        try:
            while (request := await read_request(reader)) is not None:
                keep_alive = await self.answer(request, writer)
                if not keep_alive or request.header("connection").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # the client went away, or the server is stopping
        finally:
            self.open -= 1
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        if request.route == "/_stats":
            return await reply_json(writer, self.stats())
        if request.route == "/_reset" and request.method == "POST":
            self.reset_counts()
            self.reset()
            return await reply_json(writer, {})
        return await self.handler(request, writer)

    async def serve(
        self, host: str, port: int, stop: asyncio.Event, on_url: Callable[[str], None]
    ) -> None:
        """Listen on ``host:port`` (0: a free port), tell ``on_url`` the URL, serve until
        ``stop`` is set, then end the open connections."""
        # A large backlog: hundreds of clients connect at once in the load tests.
        listener = await asyncio.start_server(
            self.connection, host, port, backlog=4096, limit=1 << 22
        )
        on_url(f"http://{host}:{listener.sockets[0].getsockname()[1]}")
        try:
            await stop.wait()
        finally:
            listener.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


def command_line(description: str) -> argparse.ArgumentParser:
    """A server script's parser with the options every one takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    return parser


def run_until_signalled(server: HttpServer, host: str, port: int) -> None:
    """A server script's main loop: prints ``listening on URL`` once it accepts connections
    (what :class:`ServerProcess` waits for), returns on SIGTERM or SIGINT."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.serve(host, port, stop, lambda url: print(f"listening on {url}", flush=True))

    asyncio.run(main())


class ServerThread:
    """An :class:`HttpServer` on a background thread of this process:
    ``with ServerThread(server) as thread: thread.url``."""

    def __init__(self, server: HttpServer, host: str = "127.0.0.1", name: str = "http") -> None:
        self.server = server
        self.host = host
        self.name = name
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> ServerThread:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or not self.url:
            raise RuntimeError(f"{self.name} server did not start: {self._error}")
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by __enter__
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()

        def started(url: str) -> None:
            self.url = url
            self._ready.set()

        await self.server.serve(self.host, 0, self._stop, started)

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)


class ServerProcess:
    """A server script of this folder as a child process (its own interpreter: it never
    competes with the test for a GIL); ``base_url`` is read from its ``listening on`` line."""

    def __init__(self, script: str, *args: str, cpus: set[int] | None = None) -> None:
        self.argv = [sys.executable, str(Path(__file__).with_name(script)), "--port", "0", *args]
        self.cpus = cpus
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> Self:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, text=True)
        if self.cpus is not None:
            os.sched_setaffinity(self.proc.pid, self.cpus)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"{Path(self.argv[1]).name} did not start: {line!r}")
        self.base_url = line.split()[-1]
        return self

    def call(self, method: str, path: str, payload: Any = None) -> Any:
        """A control request (``/_stats``, ``/_reset``...): its JSON answer; ValueError with
        the server's message unless it answered 200."""
        assert self.base_url, "the server is not running"
        # http.client, not urllib or httpx: they would send loopback requests to an HTTP
        # proxy named in the environment.
        parsed = urllib.parse.urlsplit(self.base_url)
        connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=30)
        try:
            body = json.dumps(payload).encode() if payload is not None else None
            connection.request(method, path, body=body)
            response = connection.getresponse()
            answer = json.loads(response.read() or b"{}")
            if response.status != 200:
                name = Path(self.argv[1]).stem
                raise ValueError(f"{name}: {answer.get('error', response.status)}")
            return answer
        finally:
            connection.close()

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


# -- forwarding (the proxies) --------------------------------------------------------------


@dataclass
class Answer:
    """An upstream's answer: its head parsed, its body still to read from ``reader``."""

    reader: asyncio.StreamReader
    status_line: str
    headers: Headers
    sent_at: float  # loop.time() when the request had gone out

    @property
    def status(self) -> int:
        return int(self.status_line.split(" ", 2)[1])

    def header(self, name: str) -> str:
        return find_header(self.headers, name)

    async def body_pieces(self) -> AsyncIterator[bytes]:
        """The body, decoded from its chunked or sized framing, as it arrives."""
        reader = self.reader
        if "chunked" in self.header("transfer-encoding").lower():
            while size := int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16):
                data = await reader.readexactly(size)
                await reader.readexactly(2)  # the CRLF after the chunk
                yield data
            with contextlib.suppress(asyncio.IncompleteReadError):
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
        elif length := self.header("content-length"):
            remaining = int(length)
            while remaining > 0:
                data = await reader.read(min(remaining, 65536))
                if not data:
                    raise ConnectionError("upstream closed mid-body")
                remaining -= len(data)
                yield data
        else:
            while data := await reader.read(65536):
                yield data


class Upstream:
    """The real server behind a proxy, ``http://HOST:PORT``."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {url!r}")
        self.host = parsed.hostname
        self.port = parsed.port or 80

    @contextlib.asynccontextmanager
    async def exchange(self, request: Request, drop: Collection[str] = ()) -> AsyncIterator[Answer]:
        """Send ``request`` on (less hop-by-hop headers and those in ``drop``) on a new
        connection that the upstream closes after its answer, so the answer ends where the
        connection does; yields once the answer's head has arrived."""
        reader, writer = await asyncio.open_connection(self.host, self.port)
        try:
            skip = HOP_HEADERS.union(drop)
            headers = [(k, v) for k, v in request.headers if k.lower() not in skip]
            headers += [
                ("host", f"{self.host}:{self.port}"),
                ("connection", "close"),
                ("content-length", str(len(request.body))),
            ]
            head = head_bytes(f"{request.method} {request.path} HTTP/1.1", headers)
            writer.write(head + request.body)  # one write: one segment for a small request
            await writer.drain()
            sent_at = asyncio.get_running_loop().time()
            first, answer_headers = parse_head(await reader.readuntil(b"\r\n\r\n"))
            yield Answer(reader, first, answer_headers, sent_at)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
