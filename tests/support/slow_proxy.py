"""A latency-injecting HTTP/1.1 proxy: it makes a real server's streams slower by a factor.

The load generator talks to the proxy as if it were the engine; the proxy forwards every
request to the real server (vLLM on the CPU in the noise tests) and relays the answer with
time stretched: a piece of the body that arrived ``t`` seconds after the request was sent on
leaves ``factor * t`` seconds after it. So the time to the first token and every gap between
chunks grow by the factor (each SSE event is held for ``(factor - 1)`` times the time it
took to come), and the client sees a server that is ``factor`` times slower, while the server
itself does exactly the same work. Factor 1 relays at once, through the same code path, so
a baseline taken through the proxy at factor 1 differs from a slowed run only by the factor.

The answer's bytes pass through unchanged (vLLM's chunked framing included); the upstream
is read as fast as it sends while held bytes wait, so the server is never slowed by
back-pressure. ``GET /_stats`` says how late the proxy released bytes against their
schedule (``max_late_ms``): a proxy starved of CPU would add its own delay, and the stats
show it.

Run it on its own (``python tests/support/slow_proxy.py --upstream URL --factor 1.2``; it
prints ``listening on http://HOST:PORT``) or through :class:`SlowProxyProcess`. Control over
HTTP: ``POST /_factor`` with ``{"factor": 1.5}`` (or ``{"factor": 3, "requests": 8,
"then": 1}``: only the next 8 completion requests are slowed, a one-off slow measurement),
``GET /_stats``, ``POST /_reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import http.client
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "content-length",
    "transfer-encoding",
    "host",
    "proxy-connection",
}


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]]] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        if line:
            key, _, value = line.partition(":")
            headers.append((key.strip(), value.strip()))
    return lines[0], headers


def _get(headers: list[tuple[str, str]], name: str) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


class SlowProxy:
    """The asyncio side: accepts clients, forwards, stretches time by ``factor``."""

    def __init__(self, upstream: str, factor: float = 1.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.host = parsed.hostname
        self.port = parsed.port or 80
        self.factor = 1.0
        self.then = 1.0
        self.left: int | None = None  # load requests still to slow before ``then`` applies
        self.set_factor(factor)
        self.requests = 0
        self.pieces = 0
        self.max_late = 0.0

    def set_factor(self, factor: float, requests: int | None = None, then: float = 1.0) -> None:
        """Slow every later request by ``factor``; with ``requests``, only the next that many
        completion requests, and ``then`` the ones after (a one-off slow measurement)."""
        for value in (factor, then):
            if not value >= 1.0:
                raise ValueError(f"factor must be at least 1 (a proxy cannot speed up): {value}")
        if requests is not None and requests < 0:
            raise ValueError(f"requests must be a non-negative count, got {requests}")
        self.factor = float(factor)
        self.then = float(then)
        self.left = requests

    def _factor_for(self, method: str, path: str) -> float:
        if method != "POST" or not path.split("?", 1)[0].endswith("completions"):
            return self.factor if self.left is None else self.then
        self.requests += 1
        if self.left is None:
            return self.factor
        if self.left > 0:
            self.left -= 1
            return self.factor
        return self.then

    def stats(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "then": self.then,
            "left": self.left,
            "requests": self.requests,
            "pieces": self.pieces,
            "max_late_ms": self.max_late * 1000.0,
        }

    def reset(self) -> None:
        self.requests = self.pieces = 0
        self.max_late = 0.0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await _read_head(reader)
                if head is None:
                    return
                line, headers = head
                body = await reader.readexactly(int(_get(headers, "content-length") or 0))
                method, path, _ = line.split(" ", 2)
                keep = await self._route(method, path, headers, body, writer)
                if not keep or _get(headers, "connection").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _route(
        self,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> bool:
        route = path.split("?", 1)[0]
        if route == "/_stats":
            return await _reply(writer, json.dumps(self.stats()).encode())
        if route == "/_reset" and method == "POST":
            self.reset()
            return await _reply(writer, b"{}")
        if route == "/_factor" and method == "POST":
            try:
                raw = json.loads(body or b"{}")
                self.set_factor(float(raw["factor"]), raw.get("requests"), raw.get("then", 1.0))
            except (ValueError, KeyError, TypeError) as exc:
                return await _reply(writer, json.dumps({"error": str(exc)}).encode(), 400)
            return await _reply(writer, json.dumps(self.stats()).encode())
        return await self._forward(
            method, path, headers, body, writer, self._factor_for(method, path)
        )

    async def _forward(
        self,
        method: str,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes,
        writer: asyncio.StreamWriter,
        factor: float,
    ) -> bool:
        """Send the request on and relay the answer; False when the client connection must
        close after it (an answer delimited only by the end of the connection)."""
        # The factor is fixed when the request arrives: a change applies to the next ones.
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        try:
            head = [f"{method} {path} HTTP/1.1"]
            head += [f"{k}: {v}" for k, v in headers if k.lower() not in _HOP_HEADERS]
            head += [
                f"host: {self.host}:{self.port}",
                "connection: close",
                f"content-length: {len(body)}",
            ]
            up_writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            await up_writer.drain()
            loop = asyncio.get_running_loop()
            sent_at = loop.time()
            raw = await up_reader.readuntil(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            framed = False
            out = [lines[0]]
            for line in lines[1:]:
                key = line.partition(":")[0].strip().lower()
                if not line or key in ("connection", "keep-alive"):
                    continue
                framed = framed or key in ("transfer-encoding", "content-length")
                out.append(line)
            if not framed:
                out.append("connection: close")
            head_bytes = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
            await self._relay(up_reader, writer, head_bytes, sent_at, factor)
            return framed
        finally:
            up_writer.close()
            with contextlib.suppress(Exception):
                await up_writer.wait_closed()

    async def _relay(
        self,
        up_reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: bytes,
        sent_at: float,
        factor: float,
    ) -> None:
        """Pass the answer's bytes through unchanged (its own chunked or sized framing), each
        read released at ``sent_at + factor * (arrival - sent_at)``.

        The proxy asked the upstream to close after the answer, so the answer ends where the
        upstream connection does. Releases are timer callbacks, not a task per piece: the
        proxy shares two cores with the server and must cost as little as it can.
        """
        loop = asyncio.get_running_loop()
        pending: collections.deque[tuple[float, bytes]] = collections.deque()
        done = asyncio.Event()
        timer: asyncio.TimerHandle | None = None

        def release() -> None:
            nonlocal timer
            timer = None
            now = loop.time()
            ready = []
            while pending and pending[0][0] <= now:
                due, data = pending.popleft()
                self.max_late = max(self.max_late, now - due)
                ready.append(data)
            if ready:
                writer.write(b"".join(ready))
                self.pieces += len(ready)
            if pending:
                timer = loop.call_at(pending[0][0], release)
            else:
                done.set()

        pending.append((sent_at + factor * (loop.time() - sent_at), head))
        release()
        try:
            while data := await up_reader.read(65536):
                arrived = loop.time()
                pending.append((sent_at + factor * (arrived - sent_at), data))
                if timer is None:
                    done.clear()
                    release()
            await done.wait()
        finally:
            if timer is not None:
                timer.cancel()
        await writer.drain()


async def _reply(writer: asyncio.StreamWriter, body: bytes, status: int = 200) -> bool:
    reason = b"OK" if status == 200 else b"Bad Request"
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason, len(body), body)
    )
    await writer.drain()
    return True


async def serve(upstream: str, factor: float, host: str, port: int) -> None:
    proxy = SlowProxy(upstream, factor)
    server = await asyncio.start_server(proxy.handle, host, port, limit=1 << 22, backlog=1024)
    bound = server.sockets[0].getsockname()
    print(f"listening on http://{bound[0]}:{bound[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="http://HOST:PORT of the real server")
    parser.add_argument("--factor", type=float, default=1.0, help="1.2: everything 20%% slower")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.upstream, args.factor, args.host, args.port))


class SlowProxyProcess:
    """The proxy as a child process (its own interpreter: it never competes with the client
    for a GIL): ``with SlowProxyProcess(url, factor=1.2) as proxy: ... proxy.base_url``."""

    def __init__(self, upstream: str, factor: float = 1.0) -> None:
        self.upstream = upstream
        self.initial = factor
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> SlowProxyProcess:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--upstream",
                self.upstream,
                "--factor",
                str(self.initial),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.__exit__(None, None, None)
            raise RuntimeError(f"slow proxy did not start: {line!r}")
        self.base_url = line.split()[-1]
        return self

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        assert self.base_url, "the proxy is not running"
        # http.client, not urllib: urllib would send loopback requests to an HTTP proxy
        # named in the environment.
        parsed = urllib.parse.urlsplit(self.base_url)
        connection = http.client.HTTPConnection(parsed.hostname or "", parsed.port, timeout=30)
        try:
            body = json.dumps(payload).encode() if payload is not None else None
            connection.request(method, path, body=body)
            response = connection.getresponse()
            answer = json.loads(response.read() or b"{}")
            if response.status != 200:
                raise ValueError(f"slow proxy: {answer.get('error', response.status)}")
            return answer
        finally:
            connection.close()

    def set_factor(
        self, factor: float, requests: int | None = None, then: float = 1.0
    ) -> dict[str, Any]:
        """See :meth:`SlowProxy.set_factor`; returns the proxy's stats."""
        payload = {"factor": factor, "requests": requests, "then": then}
        answer: dict[str, Any] = self._call("POST", "/_factor", payload)
        return answer

    def stats(self) -> dict[str, Any]:
        answer: dict[str, Any] = self._call("GET", "/_stats")
        return answer

    def reset(self) -> None:
        self._call("POST", "/_reset", {})

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
