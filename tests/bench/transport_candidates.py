"""The HTTP transports the load generator can run on, all behind one interface.

The interface is httpx's ``AsyncBaseTransport`` (one method, ``handle_async_request``):
``run_load_async(transport=...)`` takes any of them, so each candidate is measured through
the same client code, SSE parser and timing loop, and only the HTTP layer differs.

- ``llhttp``: the package's ``StreamingTransport`` (its own pool and back-pressure, llhttp
  parsing the bytes through ``httptools``), the default;
- ``aiohttp``: an adapter over an ``aiohttp.ClientSession`` (its C llhttp parser, pool and
  flow control), the client ``vllm bench serve`` uses;
- ``httpx``: httpx's default transport (httpcore + h11);
- ``hand-written@REV``: the package's ``http1.py`` as it was at a git revision, loaded from
  git (the hand-written byte parser this project had before llhttp replaced it).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType

import httpx

from pytest_llmperf.measure.http1 import StreamingTransport

Factory = Callable[[int], httpx.AsyncBaseTransport]  # max connections -> a transport

_ROOT = Path(__file__).resolve().parents[2]


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx requests sent with one aiohttp session (set up as ``vllm bench serve`` does)."""

    def __init__(self, max_connections: int) -> None:
        self._limit = max_connections
        self._session: object | None = None

    def _session_now(self) -> object:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=self._limit,
                keepalive_timeout=60,
                force_close=False,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout()
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import aiohttp

        session = self._session_now()
        assert isinstance(session, aiohttp.ClientSession)
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in request.headers.raw
            if name.lower() not in (b"host", b"content-length")
        ]
        try:
            response = await session.request(
                request.method, str(request.url), data=await request.aread(), headers=headers
            )
        except aiohttp.ClientConnectionError as exc:
            raise httpx.ConnectError(str(exc)) from exc
        return httpx.Response(
            response.status,
            headers=[(k, v) for k, v in response.raw_headers],
            stream=_AiohttpBody(response),
            extensions={"reason_phrase": (response.reason or "").encode("latin-1")},
        )

    async def aclose(self) -> None:
        import aiohttp

        if isinstance(self._session, aiohttp.ClientSession):
            await self._session.close()


class _AiohttpBody(httpx.AsyncByteStream):
    def __init__(self, response: object) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        response = self._response
        assert isinstance(response, aiohttp.ClientResponse)
        try:
            async for data in response.content.iter_any():
                yield data
        except aiohttp.ClientPayloadError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc

    async def aclose(self) -> None:
        import aiohttp

        assert isinstance(self._response, aiohttp.ClientResponse)
        self._response.release()


def stock_httpx(max_connections: int) -> httpx.AsyncBaseTransport:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=None)
    return httpx.AsyncHTTPTransport(limits=limits, http1=True, trust_env=False)


def at_revision(rev: str) -> Factory:
    """``StreamingTransport`` from ``http1.py`` as committed at ``rev`` (e.g. the hand-written
    parser's last commit), imported from a copy so it runs beside today's."""
    source = subprocess.run(
        ["git", "show", f"{rev}:pytest_llmperf/measure/http1.py"],
        cwd=_ROOT,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="http1-"))
    path = folder / f"http1_{rev}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    transport: type[httpx.AsyncBaseTransport] = module.StreamingTransport
    return lambda limit: transport(max_connections=limit)  # type: ignore[call-arg]


def candidates(hand_written_rev: str | None) -> dict[str, Factory]:
    found: dict[str, Factory] = {
        "llhttp": lambda limit: StreamingTransport(max_connections=limit),
        "aiohttp": AiohttpTransport,
        "httpx": stock_httpx,
    }
    if hand_written_rev:
        found[f"hand-written@{hand_written_rev}"] = at_revision(hand_written_rev)
    return found
