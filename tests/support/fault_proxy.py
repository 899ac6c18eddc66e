"""A fault-injecting HTTP/1.1 proxy for the reliability tests, in front of a real server.

The load generator talks to the proxy as if it were the engine; the proxy passes requests on
to the real server (vLLM on the CPU in the tests) and damages the answers on purpose, the way
networks and engines fail in production:

``pass``     forward unchanged (``latency_ms`` still applies)
``status``   answer ``status`` (4xx/5xx) with an OpenAI-style JSON error, upstream untouched
``cut``      forward ``after_events`` SSE events (or ``after_bytes`` body bytes), then close
             the connection without ending the chunked body
``bad_sse``  forward ``after_events`` events, inject one event that is not JSON, go on
``stall``    forward ``after_events`` events, then send nothing more (``stall_s`` at most)
``error_event`` forward ``after_events`` events, then an ``{"error": ...}`` event and
             ``[DONE]``, the way vLLM ends a stream whose request failed (engine core died)
``drop``     close the connection before any response byte

Which request gets which fault: a ``FaultPlan`` maps the ordinal of a completion request
(0-based, counted from the last ``set_plan``, in the order requests reach the proxy) to a
``Fault``; every other request gets the plan's default. A request can also carry its own
fault, as an ``x-fault`` header or an ``x_fault`` key in the JSON body (the load generator's
``extra_body`` puts it there); the proxy removes it before forwarding.

The proxy records every request it received (method, path, headers, body, fault applied), so
tests can check what a client sent, e.g. where an API key travelled. It runs in a thread of
the test process (``with FaultProxy(upstream) as proxy:``) or on its own
(``python tests/support/fault_proxy.py --upstream URL``), controlled over HTTP then:
``POST /_fault`` (a plan as JSON), ``GET /_stats``, ``POST /_reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

MODES = ("pass", "status", "cut", "bad_sse", "stall", "error_event", "drop")
# Not JSON: a client must count the request as failed, not skip the event.
BAD_EVENT = b'data: {"choices": [{"index": 0, "text": "unterminated\n\n'
_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "content-length",
    "transfer-encoding",
    "host",
    "x-fault",
    "proxy-connection",
}
_REASONS = {
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
_MAX_RECORDED_BODY = 64 * 1024


@dataclass(frozen=True)
class Fault:
    mode: str = "pass"
    status: int = 500
    # Body message of a "status" answer. "{authorization}" is replaced by the request's
    # Authorization header: a server that echoes credentials, for the secret-leak tests.
    message: str = "injected failure"
    after_events: int = 0
    after_bytes: int | None = None
    latency_ms: float = 0.0
    stall_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"fault mode {self.mode!r}: expected one of {', '.join(MODES)}")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Fault:
        known = {f.name for f in fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown fault key(s) {sorted(unknown)}; valid: {sorted(known)}")
        return cls(**dict(raw))


@dataclass(frozen=True)
class FaultPlan:
    default: Fault = field(default_factory=Fault)
    requests: Mapping[int, Fault] = field(default_factory=dict)

    @classmethod
    def on(cls, fault: Fault, ordinals: Iterable[int], default: Fault | None = None) -> FaultPlan:
        """``fault`` for the completion requests numbered ``ordinals``, ``default`` for others."""
        return cls(default or Fault(), {int(i): fault for i in ordinals})

    def fault_for(self, ordinal: int | None) -> Fault:
        if ordinal is None:
            return Fault(latency_ms=self.default.latency_ms)  # only load requests get faults
        return self.requests.get(ordinal, self.default)

    def to_dict(self) -> dict[str, Any]:
        return {
            "default": asdict(self.default),
            "requests": {str(k): asdict(v) for k, v in self.requests.items()},
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> FaultPlan:
        return cls(
            Fault.from_dict(raw.get("default") or {}),
            {int(k): Fault.from_dict(v) for k, v in (raw.get("requests") or {}).items()},
        )


@dataclass
class _Request:
    method: str
    path: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def is_load(self) -> bool:
        return self.method == "POST" and self.path.split("?", 1)[0].endswith("completions")


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
    request = _Request(method, path, version, headers, b"")
    length = int(request.header("content-length") or 0)
    if length:
        request.body = await reader.readexactly(length)
    return request


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _body_pieces(
    reader: asyncio.StreamReader, headers: Mapping[str, str]
) -> AsyncIterator[bytes]:
    """The decoded body of an upstream response, as it arrives."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                with contextlib.suppress(asyncio.IncompleteReadError):
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        remaining = int(headers["content-length"])
        while remaining > 0:
            data = await reader.read(min(remaining, 65536))
            if not data:
                raise ConnectionError("upstream closed mid-body")
            remaining -= len(data)
            yield data
    else:
        while data := await reader.read(65536):
            yield data


class _Events:
    """Splits a body into complete SSE events (each ending with a blank line)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        events = []
        while True:
            cut = self.buffer.find(b"\n\n")
            if cut < 0:
                return events
            events.append(self.buffer[: cut + 2])
            self.buffer = self.buffer[cut + 2 :]


class ProxyServer:
    """The asyncio side: accepts clients, forwards, injects the plan's faults."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self.plan = plan or FaultPlan()
        self.ordinal = 0
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.open_streams = 0

    def set_plan(self, plan: FaultPlan | None) -> None:
        with self.lock:
            self.plan = plan or FaultPlan()
            self.ordinal = 0
            self.records = []

    def stats(self) -> dict[str, Any]:
        with self.lock:
            faults: dict[str, int] = {}
            for record in self.records:
                faults[record["fault"]] = faults.get(record["fault"], 0) + 1
            return {
                "requests": [dict(r) for r in self.records],
                "faults": faults,
                "load_requests": self.ordinal,
                "open_streams": self.open_streams,
            }

    # -- one client connection -----------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                keep = await self._route(request, reader, writer)
                if not keep or (request.header("connection") or "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _route(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        path = request.path.split("?", 1)[0]
        if path == "/_stats":
            return await _reply(writer, 200, json.dumps(self.stats()).encode())
        if path == "/_reset" and request.method == "POST":
            self.set_plan(self.plan)
            return await _reply(writer, 200, b"{}")
        if path == "/_fault" and request.method == "POST":
            self.set_plan(FaultPlan.from_dict(json.loads(request.body or b"{}")))
            return await _reply(writer, 200, b"{}")
        fault, ordinal = self._choose(request)
        record: dict[str, Any] = {
            "ordinal": ordinal,
            "method": request.method,
            "path": request.path,
            "headers": [list(pair) for pair in request.headers],
            "body": request.body[:_MAX_RECORDED_BODY].decode("utf-8", "replace"),
            "fault": fault.mode,
            "status": None,
            "events": 0,
        }
        with self.lock:
            self.records.append(record)
        if fault.latency_ms:
            await asyncio.sleep(fault.latency_ms / 1000)
        if fault.mode == "drop":
            writer.transport.abort()
            return False
        if fault.mode == "status":
            record["status"] = fault.status
            message = fault.message.replace(
                "{authorization}", request.header("authorization") or ""
            )
            body = json.dumps(
                {"error": {"message": message, "type": "InjectedFault", "code": fault.status}}
            ).encode()
            return await _reply(writer, fault.status, body)
        return await self._forward(request, fault, record, reader, writer)

    def _choose(self, request: _Request) -> tuple[Fault, int | None]:
        """The fault and ordinal of this request; a per-request fault is removed from what
        is sent on."""
        own: Mapping[str, Any] | None = None
        header = request.header("x-fault")
        if header:
            own = json.loads(header)
        if request.is_load and request.body[:1] == b"{":
            with contextlib.suppress(ValueError):
                payload = json.loads(request.body)
                if isinstance(payload, dict) and "x_fault" in payload:
                    own = payload.pop("x_fault")
                    request.body = json.dumps(payload).encode()
        with self.lock:
            ordinal = None
            if request.is_load:
                ordinal = self.ordinal
                self.ordinal += 1
            if own is not None:
                return Fault.from_dict(own), ordinal
            return self.plan.fault_for(ordinal), ordinal

    async def _forward(
        self,
        request: _Request,
        fault: Fault,
        record: dict[str, Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        up_reader, up_writer = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        self.open_streams += 1
        try:
            head = [f"{request.method} {request.path} HTTP/1.1"]
            head += [f"{k}: {v}" for k, v in request.headers if k.lower() not in _HOP_HEADERS]
            head += [
                f"host: {self.upstream_host}:{self.upstream_port}",
                "connection: close",
                f"content-length: {len(request.body)}",
            ]
            up_writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + request.body)
            await up_writer.drain()
            status_line = await up_reader.readuntil(b"\r\n")
            raw_headers = await up_reader.readuntil(b"\r\n\r\n")
            status = int(status_line.split(b" ", 2)[1])
            record["status"] = status
            headers: dict[str, str] = {}
            out = [status_line.rstrip(b"\r\n")]
            for line in raw_headers.decode("latin-1").split("\r\n"):
                if not line:
                    continue
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
                if key.strip().lower() not in _HOP_HEADERS:
                    out.append(line.encode("latin-1"))
            out.append(b"transfer-encoding: chunked")
            writer.write(b"\r\n".join(out) + b"\r\n\r\n")
            await writer.drain()
            return await self._relay(up_reader, headers, fault, record, reader, writer)
        finally:
            self.open_streams -= 1
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _relay(
        self,
        up_reader: asyncio.StreamReader,
        headers: Mapping[str, str],
        fault: Fault,
        record: dict[str, Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        sent = 0
        events = _Events()
        injected = False
        async for piece in _body_pieces(up_reader, headers):
            if fault.mode == "pass":
                writer.write(_chunk(piece))
                await writer.drain()
                continue
            if fault.mode == "cut" and fault.after_bytes is not None:
                room = fault.after_bytes - sent
                if room > 0:
                    writer.write(_chunk(piece[:room]))
                    sent += min(room, len(piece))
                if sent >= fault.after_bytes:
                    await writer.drain()
                    writer.close()  # no terminating chunk: the body ends mid-way
                    return False
                await writer.drain()
                continue
            for event in events.feed(piece):
                if record["events"] >= fault.after_events:
                    if fault.mode == "cut":
                        await writer.drain()
                        writer.close()
                        return False
                    if fault.mode == "stall":
                        await writer.drain()
                        await _stall(reader, fault.stall_s)
                        writer.close()
                        return False
                    if fault.mode == "error_event":
                        await _end_with_error(writer, fault)
                        return True
                    if fault.mode == "bad_sse" and not injected:
                        writer.write(_chunk(BAD_EVENT))
                        injected = True
                writer.write(_chunk(event))
                record["events"] += 1
            await writer.drain()
        if fault.mode == "error_event":
            await _end_with_error(writer, fault)
            return True
        if fault.mode in ("cut", "stall") or (fault.mode == "bad_sse" and not injected):
            # The body ended before the fault's moment: apply it at the end.
            if fault.mode == "bad_sse":
                writer.write(_chunk(BAD_EVENT))
            elif fault.mode == "stall":
                await writer.drain()
                await _stall(reader, fault.stall_s)
                writer.close()
                return False
            else:
                writer.close()
                return False
        if events.buffer:
            writer.write(_chunk(events.buffer))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


async def _end_with_error(writer: asyncio.StreamWriter, fault: Fault) -> None:
    error = {"error": {"message": fault.message, "type": "InjectedFault", "code": fault.status}}
    writer.write(_chunk(b"data: " + json.dumps(error).encode() + b"\n\n"))
    writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def _stall(reader: asyncio.StreamReader, seconds: float) -> None:
    """Hold the connection silent until the client gives up or ``seconds`` pass."""
    with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
        await asyncio.wait_for(reader.read(), seconds)


async def _reply(writer: asyncio.StreamWriter, status: int, body: bytes) -> bool:
    reason = _REASONS.get(status, "Error")
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason.encode(), len(body), body)
    )
    await writer.drain()
    return True


class FaultProxy:
    """The proxy on a background thread: ``with FaultProxy(upstream) as proxy: proxy.url``."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None, host: str = "127.0.0.1"):
        self.server = ProxyServer(upstream, plan)
        self.host = host
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    def __enter__(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or not self.url:
            raise RuntimeError(f"fault proxy did not start: {self._error}")
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
        tasks: set[asyncio.Task[None]] = set()

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await self.server.handle(reader, writer)
            except asyncio.CancelledError:
                pass  # the proxy is stopping
            finally:
                tasks.discard(task)

        server = await asyncio.start_server(client, self.host, 0)
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        self._ready.set()
        await self._stop.wait()
        server.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def set_plan(self, plan: FaultPlan | None = None) -> None:
        """Use ``plan`` from now on; numbering of load requests and the records restart."""
        self.server.set_plan(plan)

    def stats(self) -> dict[str, Any]:
        return self.server.stats()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.server.stats()["requests"])

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--upstream", required=True, help="URL of the real server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--plan", default="{}", help="a FaultPlan as JSON")
    args = parser.parse_args(argv)
    proxy = ProxyServer(args.upstream, FaultPlan.from_dict(json.loads(args.plan)))

    async def serve() -> None:
        server = await asyncio.start_server(proxy.handle, args.host, args.port)
        port = server.sockets[0].getsockname()[1]
        print(f"listening on http://{args.host}:{port}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
