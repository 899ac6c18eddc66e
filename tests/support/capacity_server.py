"""Stand-in server with a known capacity: K slots, a fixed prefill time and a fixed time per
token, so the true capacity at a TTFT SLO can be computed (issue 18, acceptance 1).

Each request takes the slot that frees first, in arrival order (FIFO), and holds it for
``prefill_ms + (tokens - 1) * token_ms``; its first token is sent ``prefill_ms`` after it got
the slot, the others ``token_ms`` apart. The schedule is kept on absolute times, so a late
wake-up of the event loop delays one chunk, never the slots: the server is the queue
:class:`CapacityModel` describes, to within the loop's jitter. ``tokens`` is the request's
``max_tokens`` (what the profile's output length asks for).

Run: ``python tests/support/capacity_server.py --slots 4 --prefill-ms 50 --token-ms 10``;
it prints ``listening on http://HOST:PORT``. :class:`CapacityServer` runs it as a child.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiohttp import web

try:
    from . import http_helper
except ImportError:  # run as a script, or imported with this folder on sys.path
    import http_helper  # type: ignore[no-redef]


@dataclass(frozen=True)
class CapacityModel:
    slots: int
    prefill_ms: float
    token_ms: float

    def service_s(self, tokens: int) -> float:
        return (self.prefill_ms + (tokens - 1) * self.token_ms) / 1000

    def ttfts_s(self, arrivals_s: Sequence[float], tokens: int) -> list[float]:
        """TTFT of each request arriving at these times (sorted), FIFO over the slots."""
        free = [0.0] * self.slots
        ttfts = []
        for arrival in arrivals_s:
            start = max(arrival, heapq.heappop(free))
            heapq.heappush(free, start + self.service_s(tokens))
            ttfts.append(start - arrival + self.prefill_ms / 1000)
        return ttfts

    def p99_ttft_ms(self, arrivals_s: Sequence[float], tokens: int) -> float:
        # numpy's default (linear) percentile: how vLLM's metrics compute p99.
        return float(np.percentile(self.ttfts_s(arrivals_s, tokens), 99)) * 1000

    def closed_loop_p99_ttft_ms(self, concurrency: int, requests: int, tokens: int) -> float:
        """p99 TTFT when ``concurrency`` clients send ``requests`` back to back."""
        free = [0.0] * self.slots
        clients = [0.0] * concurrency  # when each client sends its next request
        ttfts = []
        for _ in range(requests):
            arrival = heapq.heappop(clients)
            start = max(arrival, heapq.heappop(free))
            end = start + self.service_s(tokens)
            heapq.heappush(free, end)
            heapq.heappush(clients, end)
            ttfts.append(start - arrival + self.prefill_ms / 1000)
        return float(np.percentile(ttfts, 99)) * 1000


class _Server:
    def __init__(self, model: CapacityModel) -> None:
        self.model = model
        self.free = [0.0] * model.slots  # perf_counter() at which each slot frees

    async def completions(self, request: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        # The slot is taken before the first await: requests queue in the order they came.
        body = await request.json() if request.body_exists else {}
        tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        start = max(arrival, heapq.heappop(self.free))
        heapq.heappush(self.free, start + self.model.service_s(tokens))
        chat = request.path.endswith("chat/completions")
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        first = start + self.model.prefill_ms / 1000
        for i in range(tokens):
            await _sleep_until(first + i * self.model.token_ms / 1000)
            if chat:
                delta: dict[str, Any] = {"content": "x"}
                if i == 0:
                    delta["role"] = "assistant"
                choice: dict[str, Any] = {"index": 0, "delta": delta}
            else:
                choice = {"index": 0, "text": "x"}
            await response.write(_event({"choices": [choice]}))
        usage = {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}
        await response.write(_event({"choices": [], "usage": usage}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


async def _sleep_until(when: float) -> None:
    delay = when - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


def make_app(model: CapacityModel) -> web.Application:
    server = _Server(model)

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "stand-in"}]})

    async def health(_request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_post("/v1/chat/completions", server.completions)
    app.router.add_post("/reset_prefix_cache", health)
    return app


async def _serve(model: CapacityModel, host: str, port: int) -> None:
    runner = web.AppRunner(make_app(model), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"listening on http://{host}:{bound}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--prefill-ms", type=float, required=True)
    parser.add_argument("--token-ms", type=float, required=True)
    args = parser.parse_args(argv)
    model = CapacityModel(args.slots, args.prefill_ms, args.token_ms)
    asyncio.run(_serve(model, args.host, args.port))


class CapacityServer(http_helper.ServerProcess):
    """The server as a child process: ``with CapacityServer(model) as s: s.base_url``."""

    def __init__(self, model: CapacityModel) -> None:
        super().__init__(
            "capacity_server.py",
            *("--slots", str(model.slots), "--prefill-ms", str(model.prefill_ms)),
            *("--token-ms", str(model.token_ms)),
        )
        self.model = model


if __name__ == "__main__":
    main()
