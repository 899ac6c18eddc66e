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

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

try:
    from . import http_helper
except ImportError:  # run as a script, or imported with this folder on sys.path
    import http_helper  # type: ignore[no-redef]

MODES = ("pass", "status", "cut", "bad_sse", "stall", "error_event", "drop")
# Not JSON: a client must count the request as failed, not skip the event.
BAD_EVENT = b'data: {"choices": [{"index": 0, "text": "unterminated\n\n'
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


class _Events:
    """Splits a body into complete SSE events (each ending with a blank line)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        events: list[bytes] = []
        while True:
            cut = self.buffer.find(b"\n\n")
            if cut < 0:
                return events
            events.append(self.buffer[: cut + 2])
            self.buffer = self.buffer[cut + 2 :]


class ProxyServer:
    """The asyncio side: accepts clients, forwards, injects the plan's faults."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None) -> None:
        self.upstream = http_helper.Upstream(upstream)
        self.http = http_helper.HttpServer(self.route, self.stats, self.restart)
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

    def restart(self) -> None:
        """The same plan from its first request on."""
        self.set_plan(self.plan)

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

    async def route(self, request: http_helper.Request, writer: asyncio.StreamWriter) -> bool:
        if request.route == "/_fault" and request.method == "POST":
            self.set_plan(FaultPlan.from_dict(json.loads(request.body or b"{}")))
            return await http_helper.reply_json(writer, {})
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
            message = fault.message.replace("{authorization}", request.header("authorization"))
            body = {"error": {"message": message, "type": "InjectedFault", "code": fault.status}}
            return await http_helper.reply(writer, fault.status, json.dumps(body).encode())
        return await self._forward(request, fault, record, writer)

    def _choose(self, request: http_helper.Request) -> tuple[Fault, int | None]:
        """The fault and ordinal of this request; a per-request fault is removed from what
        is sent on."""
        own: Mapping[str, Any] | None = None
        if header := request.header("x-fault"):
            own = json.loads(header)
        if request.is_completion and request.body[:1] == b"{":
            with contextlib.suppress(ValueError):
                payload = json.loads(request.body)
                if isinstance(payload, dict) and "x_fault" in payload:
                    own = payload.pop("x_fault")
                    request.body = json.dumps(payload).encode()
        with self.lock:
            ordinal = None
            if request.is_completion:
                ordinal = self.ordinal
                self.ordinal += 1
            if own is not None:
                return Fault.from_dict(own), ordinal
            return self.plan.fault_for(ordinal), ordinal

    async def _forward(
        self,
        request: http_helper.Request,
        fault: Fault,
        record: dict[str, Any],
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Send the request on; relay the answer's head as it came and its body re-chunked,
        event by event, so that a fault can strike between (or inside) events."""
        async with self.upstream.exchange(request, drop={"x-fault"}) as answer:
            self.open_streams += 1
            try:
                record["status"] = answer.status
                headers = [
                    (k, v) for k, v in answer.headers if k.lower() not in http_helper.HOP_HEADERS
                ]
                headers.append(("transfer-encoding", "chunked"))
                writer.write(http_helper.head_bytes(answer.status_line, headers))
                await writer.drain()
                return await self._relay(request, answer, fault, record, writer)
            finally:
                self.open_streams -= 1

    async def _relay(
        self,
        request: http_helper.Request,
        answer: http_helper.Answer,
        fault: Fault,
        record: dict[str, Any],
        writer: asyncio.StreamWriter,
    ) -> bool:
        sent = 0
        events = _Events()
        injected = False
        async for piece in answer.body_pieces():
            if fault.mode == "pass":
                writer.write(http_helper.chunk(piece))
                await writer.drain()
                continue
            if fault.mode == "cut" and fault.after_bytes is not None:
                room = fault.after_bytes - sent
                if room > 0:
                    writer.write(http_helper.chunk(piece[:room]))
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
                        await http_helper.until_client_leaves(request, fault.stall_s)
                        writer.close()
                        return False
                    if fault.mode == "error_event":
                        await _end_with_error(writer, fault)
                        return True
                    if fault.mode == "bad_sse" and not injected:
                        writer.write(http_helper.chunk(BAD_EVENT))
                        injected = True
                writer.write(http_helper.chunk(event))
                record["events"] += 1
            await writer.drain()
        if fault.mode == "error_event":
            await _end_with_error(writer, fault)
            return True
        if fault.mode in ("cut", "stall") or (fault.mode == "bad_sse" and not injected):
            # The body ended before the fault's moment: apply it at the end.
            if fault.mode == "bad_sse":
                writer.write(http_helper.chunk(BAD_EVENT))
            elif fault.mode == "stall":
                await writer.drain()
                await http_helper.until_client_leaves(request, fault.stall_s)
                writer.close()
                return False
            else:
                writer.close()
                return False
        if events.buffer:
            writer.write(http_helper.chunk(events.buffer))
        writer.write(http_helper.LAST_CHUNK)
        await writer.drain()
        return True


async def _end_with_error(writer: asyncio.StreamWriter, fault: Fault) -> None:
    error = {"error": {"message": fault.message, "type": "InjectedFault", "code": fault.status}}
    writer.write(http_helper.chunk(b"data: " + json.dumps(error).encode() + b"\n\n"))
    writer.write(http_helper.chunk(b"data: [DONE]\n\n") + http_helper.LAST_CHUNK)
    await writer.drain()


class FaultProxy:
    """The proxy on a background thread: ``with FaultProxy(upstream) as proxy: proxy.url``."""

    def __init__(self, upstream: str, plan: FaultPlan | None = None, host: str = "127.0.0.1"):
        self.server = ProxyServer(upstream, plan)
        self._thread = http_helper.ServerThread(self.server.http, host, name="fault-proxy")
        self.url = ""

    def __enter__(self) -> FaultProxy:
        self.url = self._thread.__enter__().url
        return self

    def set_plan(self, plan: FaultPlan | None = None) -> None:
        """Use ``plan`` from now on; numbering of load requests and the records restart."""
        self.server.set_plan(plan)

    def stats(self) -> dict[str, Any]:
        return self.server.stats()

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.server.stats()["requests"])

    def __exit__(self, *exc: object) -> None:
        self._thread.__exit__(*exc)


def main(argv: list[str] | None = None) -> None:
    assert __doc__ is not None
    parser = http_helper.command_line(__doc__.split("\n", 1)[0])
    parser.add_argument("--upstream", required=True, help="URL of the real server")
    parser.add_argument("--plan", default="{}", help="a FaultPlan as JSON")
    args = parser.parse_args(argv)
    proxy = ProxyServer(args.upstream, FaultPlan.from_dict(json.loads(args.plan)))
    http_helper.run_until_signalled(proxy.http, args.host, args.port)


if __name__ == "__main__":
    main()
