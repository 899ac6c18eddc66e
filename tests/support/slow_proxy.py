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

import asyncio
import collections
import json
from typing import Any

try:
    from . import http_helper
except ImportError:  # run as a script, or imported with this folder on sys.path
    import http_helper  # type: ignore[no-redef]


class SlowProxy:
    """Forwards every request to ``upstream`` and stretches the answer's time by ``factor``."""

    def __init__(self, upstream: str, factor: float = 1.0) -> None:
        self.upstream = http_helper.Upstream(upstream)
        self.http = http_helper.HttpServer(self.route, self.stats, self.reset)
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

    def _factor_for(self, request: http_helper.Request) -> float:
        if not request.is_completion:
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

    async def route(self, request: http_helper.Request, writer: asyncio.StreamWriter) -> bool:
        if request.route == "/_factor" and request.method == "POST":
            try:
                raw = json.loads(request.body or b"{}")
                self.set_factor(float(raw["factor"]), raw.get("requests"), raw.get("then", 1.0))
            except (ValueError, KeyError, TypeError) as exc:
                return await http_helper.reply_json(writer, {"error": str(exc)}, 400)
            return await http_helper.reply_json(writer, self.stats())
        # The factor is fixed when the request arrives: a change applies to the next ones.
        return await self._forward(request, writer, self._factor_for(request))

    async def _forward(
        self, request: http_helper.Request, writer: asyncio.StreamWriter, factor: float
    ) -> bool:
        """Send the request on and relay the answer; False when the client connection must
        close after it (an answer delimited only by the end of the connection)."""
        async with self.upstream.exchange(request) as answer:
            headers = [
                (key, value)
                for key, value in answer.headers
                if key.lower() not in ("connection", "keep-alive")
            ]
            framed = any(k.lower() in ("transfer-encoding", "content-length") for k, _ in headers)
            if not framed:
                headers.append(("connection", "close"))
            head = http_helper.head_bytes(answer.status_line, headers)
            await self._relay(answer.reader, writer, head, answer.sent_at, factor)
            return framed

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

        The answer ends where the upstream connection does (the upstream was asked to close
        after it). Releases are timer callbacks, not a task per piece: the proxy shares two
        cores with the server and must cost as little as it can.
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


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None
    parser = http_helper.command_line(__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="http://HOST:PORT of the real server")
    parser.add_argument("--factor", type=float, default=1.0, help="1.2: everything 20%% slower")
    args = parser.parse_args(argv)
    http_helper.run_until_signalled(
        SlowProxy(args.upstream, args.factor).http, args.host, args.port
    )


class SlowProxyProcess(http_helper.ServerProcess):
    """The proxy as a child process: ``with SlowProxyProcess(url, factor=1.2) as proxy: ...
    proxy.base_url``."""

    def __init__(self, upstream: str, factor: float = 1.0) -> None:
        super().__init__("slow_proxy.py", "--upstream", upstream, "--factor", str(factor))

    def set_factor(
        self, factor: float, requests: int | None = None, then: float = 1.0
    ) -> dict[str, Any]:
        """See :meth:`SlowProxy.set_factor`; returns the proxy's stats."""
        payload = {"factor": factor, "requests": requests, "then": then}
        answer: dict[str, Any] = self.call("POST", "/_factor", payload)
        return answer

    def stats(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("GET", "/_stats")
        return answer

    def reset(self) -> None:
        self.call("POST", "/_reset", {})


if __name__ == "__main__":
    main()
