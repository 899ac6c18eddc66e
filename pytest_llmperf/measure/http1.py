"""A lean HTTP/1.1 transport for httpx, made for hundreds of long streaming responses.

httpx's default transport (httpcore + h11 + anyio) was measured too slow for the load
generator: three to five times the client CPU per streamed event of this one, and its connection
pool rescans every connection for every other one each time a request starts or ends
(quadratic in the pool size); docs/architecture.md has the table. This transport keeps the
httpx client API and does only what a load generator needs:

- keep-alive connections per origin, at most ``max_connections`` of them (None: no limit);
- request bodies sent in one write; responses read by an ``asyncio.Protocol`` that hands
  the bytes to llhttp (the parser of Node.js, through ``httptools``), which decodes
  ``Content-Length``, chunked and read-until-close bodies as they arrive; the decoded body
  goes to the reader in whatever pieces the network delivered;
- reading stops while more than a few MiB of decoded body wait to be taken (back-pressure);
- plain TCP or TLS (``ssl`` module defaults); no proxies, no HTTP/2, no timeouts of its own
  (the caller bounds each request), no decompression (ask for ``identity``).

The byte-level parsing is llhttp's, not ours: it refuses malformed framing, bare CR or LF in
header lines and oversized chunk sizes. Errors are httpx's own exception types, so callers
handle both transports alike.
"""

from __future__ import annotations

import asyncio
import collections
import re
import ssl
from collections.abc import AsyncIterator

import httptools
import httpx

__all__ = ["StreamingTransport"]

_MAX_HEAD = 64 * 1024  # status line plus headers: llhttp itself sets no limit
_PAUSE_ABOVE = 4 * 1024 * 1024  # unread body bytes that stop reading from the socket

# Protocol phases.
_IDLE, _HEAD, _BODY, _DONE = range(4)

_Origin = tuple[bytes, str, int]  # scheme, host, port


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; feeds one response at a time to llhttp as bytes arrive.

    The ``on_*`` methods are llhttp's callbacks, called from inside ``feed_data``.
    """

    def __init__(self, origin: _Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.keep_alive = True
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.unanswered = False  # closed before a single byte of the response: safe to retry
        self._parser: httptools.HttpResponseParser | None = None
        self._phase = _IDLE
        self._head_bytes = 0
        self._until_close = True  # no Content-Length and not chunked: the body ends at EOF
        self._chunked = False
        self._body: list[bytes] = []
        self._paused = False
        self._exc: Exception | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._got_bytes = False
        self._head_only = False

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        phase = self._phase
        if phase == _HEAD:
            self._head_bytes += len(data)
        elif phase != _BODY:
            self.keep_alive = False  # bytes nobody asked for: never reuse this connection
            if phase == _IDLE:
                self._fail(httpx.RemoteProtocolError("server sent bytes while no request was open"))
            return
        assert self._parser is not None
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self._phase == _DONE:  # a complete response, then garbage: keep the response
                self.keep_alive = False
            else:
                self._fail(httpx.RemoteProtocolError(f"malformed response: {exc}"))
                return
        if self._phase == _HEAD and self._head_bytes > _MAX_HEAD:
            self._fail(httpx.RemoteProtocolError("response headers too large"))
            return
        if self._body:
            self._check_backlog()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._exc is not None:  # we aborted it, and already know why
            pass
        elif self._phase == _BODY and self._until_close:
            self._phase = _DONE
        elif self._phase == _HEAD:
            if self._got_bytes:
                self._exc = httpx.RemoteProtocolError("server closed the connection mid-headers")
            else:
                self.unanswered = True
                self._exc = httpx.RemoteProtocolError(
                    "server disconnected without sending a response"
                )
        elif self._phase == _BODY:
            what = "chunked body" if self._chunked else "body"
            self._exc = httpx.RemoteProtocolError(
                f"server closed the connection before the end of the {what}"
            )
        self._wake()

    # -- llhttp's callbacks --------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._phase == _DONE:  # a second response to one request
            raise httpx.RemoteProtocolError("server sent more than one response")
        self.reason = b""
        self.headers = []
        self._until_close = True
        self._chunked = False

    def on_status(self, reason: bytes) -> None:
        self.reason += reason  # may arrive in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lower = name.lower()
        if lower == b"content-length":
            self._until_close = False
        elif lower == b"transfer-encoding":
            self._chunked = value.lower().endswith(b"chunked")
            self._until_close = not self._chunked

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # interim response (100 Continue): the real one follows
            return
        self.status = status
        if self._head_only:  # llhttp cannot be told a HEAD response has no body
            self._phase = _DONE
            self.keep_alive = self._parser.should_keep_alive()
        else:
            self._phase = _BODY

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if self._phase == _HEAD:  # the end of an interim response
            return
        self._phase = _DONE
        self.keep_alive = self._parser.should_keep_alive()

    # -- flow ----------------------------------------------------------------------------

    def _check_backlog(self) -> None:
        """Stop reading from the socket while too much decoded body waits to be taken."""
        if self._paused or self.transport is None or len(self._body) < 64:
            return
        if sum(map(len, self._body)) > _PAUSE_ABOVE:
            self.transport.pause_reading()
            self._paused = True

    def _fail(self, exc: Exception) -> None:
        self._exc = exc
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None

    # -- what the transport uses ---------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Idle, open and in a state that allows another request."""
        return (
            not self.lost
            and self.keep_alive
            and self._phase in (_IDLE, _DONE)
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def send(self, head: bytes, body: bytes, head_only: bool) -> None:
        assert self.transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self._phase = _HEAD
        self._head_bytes = 0
        self._body = []
        self._exc = None
        self._got_bytes = False
        self.unanswered = False
        self._head_only = head_only
        self.status = 0
        self.transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            self.transport.write(body)

    async def response_head(self) -> None:
        while self._phase == _HEAD:
            if self._exc is not None:
                raise self._exc
            if self.lost:
                self.unanswered = True
                raise httpx.RemoteProtocolError("server disconnected without sending a response")
            await self._wait()

    def take(self) -> bytes:
        """The body bytes decoded so far (and not yet taken)."""
        body = self._body
        if not body:
            return b""
        data = body[0] if len(body) == 1 else b"".join(body)
        self._body = []
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    @property
    def complete(self) -> bool:
        return self._phase == _DONE and not self._body

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _Body(httpx.AsyncByteStream):
    def __init__(self, connection: _Connection, pool: _Pool) -> None:
        self._connection: _Connection | None = connection
        self._pool = pool

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        # The read loop lives here, not in a generator of _Connection: one generator less
        # to resume per network read.
        while True:
            if connection._body:
                yield connection.take()
                continue
            if connection._phase == _DONE:
                return
            if connection._exc is not None:
                raise connection._exc
            await connection._wait()

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.release(connection, reusable=connection.complete and connection.usable)


class _Pool:
    def __init__(self, max_connections: int | None, ssl_context: ssl.SSLContext | None) -> None:
        self.limit = max_connections
        self.ssl_context = ssl_context
        self.idle: dict[_Origin, list[_Connection]] = {}
        self.open: set[_Connection] = set()
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.closed = False

    async def acquire(self, origin: _Origin) -> tuple[_Connection, bool]:
        """A connection to ``origin`` and whether it was reused (kept alive)."""
        while True:
            if self.closed:
                raise httpx.ConnectError("the transport is closed")
            idle = self.idle.get(origin)
            while idle:
                connection = idle.pop()
                if connection.usable:
                    return connection, True
                self._drop(connection)
            if self.limit is None or len(self.open) < self.limit:
                return await self._connect(origin), False
            if self._close_one_idle():
                continue
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self.waiters:
                    self.waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake_one()  # pass on the turn we were given
                raise

    async def _connect(self, origin: _Origin) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        use_ssl: ssl.SSLContext | None = None
        if scheme == b"https":
            if self.ssl_context is None:
                self.ssl_context = ssl.create_default_context()
            use_ssl = self.ssl_context
        placeholder = _Connection(origin)  # holds the slot while connecting
        self.open.add(placeholder)
        try:
            _, protocol = await loop.create_connection(
                lambda: _Connection(origin),
                host,
                port,
                ssl=use_ssl,
                server_hostname=host if use_ssl is not None else None,
            )
        except BaseException as exc:
            self.open.discard(placeholder)
            self._wake_one()
            if isinstance(exc, OSError):
                raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
            raise
        self.open.discard(placeholder)
        self.open.add(protocol)
        return protocol

    def release(self, connection: _Connection, *, reusable: bool) -> None:
        if reusable and not self.closed:
            self.idle.setdefault(connection.origin, []).append(connection)
        else:
            self._drop(connection)
        self._wake_one()

    def _drop(self, connection: _Connection) -> None:
        if connection.complete:
            connection.close()
        else:
            connection.abort()  # mid-response: do not wait to flush anything
        self.open.discard(connection)

    def _close_one_idle(self) -> bool:
        for idle in self.idle.values():
            if idle:
                self._drop(idle.pop(0))
                return True
        return False

    def _wake_one(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        for connection in list(self.open):
            connection.abort()
        self.open.clear()
        self.idle.clear()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)


class StreamingTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport``: ``httpx.AsyncClient(transport=StreamingTransport())``.

    :param max_connections: open connections at most (all origins together); None: no limit.
    :param ssl_context: for ``https`` URLs; the ``ssl`` module's verifying default if None.
    """

    def __init__(
        self, *, max_connections: int | None = None, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError("max_connections must be at least 1 or None")
        self._pool = _Pool(max_connections, ssl_context)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if url.scheme == "https" else 80)
        origin: _Origin = (url.raw_scheme, url.host, port)
        if isinstance(request.stream, httpx.ByteStream):
            body = request.content
        else:
            body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        head = _request_head(request, len(body))
        head_only = request.method == "HEAD"
        connection, reused = await self._pool.acquire(origin)
        try:
            connection.send(head, body, head_only)
            try:
                await connection.response_head()
            except httpx.RemoteProtocolError:
                if not (reused and connection.unanswered):
                    raise
                # A kept-alive connection the server had just closed: one fresh try.
                self._pool.release(connection, reusable=False)
                connection, reused = await self._pool.acquire(origin)
                connection.send(head, body, head_only)
                await connection.response_head()
        except BaseException:
            self._pool.release(connection, reusable=False)
            raise
        return httpx.Response(
            connection.status,
            headers=connection.headers,
            stream=_Body(connection, self._pool),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": connection.reason},
        )

    async def aclose(self) -> None:
        self._pool.close()


_UNSAFE_IN_HEADER = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")


def _request_head(request: httpx.Request, body_length: int) -> bytes:
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    has_length = False
    for name, value in request.headers.raw:
        if _UNSAFE_IN_HEADER.search(name + value):
            # Written raw, a line break would end this header and start one of the value's
            # choosing (header injection); h11 refuses these too.
            raise httpx.LocalProtocolError(
                f"header {name.decode('ascii', 'replace')!r}: its value holds a line break or "
                f"another control character"
            )
        lower = name.lower()
        if lower == b"transfer-encoding":
            continue  # the body is sent whole, with a Content-Length
        if lower == b"content-length":
            has_length = True
            value = b"%d" % body_length
        lines.append(name + b": " + value)
    if not has_length and (body_length or request.method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: %d" % body_length)
    return b"\r\n".join(lines) + b"\r\n\r\n"
