"""StreamingTransport against a raw socket server that sends exactly the bytes a test gives."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence

import httpx
import pytest

from pytest_llmperf.measure.http1 import StreamingTransport

Script = Sequence[bytes | float]  # bytes to send, or seconds to wait


class RawServer:
    """Answers request k on any connection with ``scripts[k]``; counts connections."""

    def __init__(self, scripts: Sequence[Script], close_after: bool = False) -> None:
        self.scripts = list(scripts)
        self.close_after = close_after
        self.served = 0
        self.connections = 0
        self.open = 0
        self.peak_open = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.heads.append(head)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.bodies.append(await reader.readexactly(length))
                script = self.scripts[min(self.served, len(self.scripts) - 1)]
                self.served += 1
                for step in script:
                    if isinstance(step, float):
                        await asyncio.sleep(step)
                    else:
                        writer.write(step)
                        await writer.drain()
                if self.close_after:
                    return
        finally:
            self.open -= 1
            writer.close()


async def with_server(
    server: RawServer, body: Callable[[httpx.AsyncClient, str], Awaitable[None]], **kw: int
) -> None:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=StreamingTransport(**kw)) as client:
            await body(client, f"http://127.0.0.1:{port}")
    finally:
        listener.close()
        await listener.wait_closed()


def run(
    server: RawServer, body: Callable[[httpx.AsyncClient, str], Awaitable[None]], **kw: int
) -> None:
    asyncio.run(asyncio.wait_for(with_server(server, body, **kw), 20))


CHUNKED = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"5\r\nhello\r\n",
    0.01,
    b"6;ext=1\r\n wo",  # a chunk extension, and a chunk cut across writes
    0.01,
    b"rld\r\n0\r\nX-Trailer: yes\r\n\r\n",
]


def test_chunked_body_with_extensions_and_trailers() -> None:
    server = RawServer([CHUNKED])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        response = await client.post(url + "/x", content=b"abc")
        assert response.status_code == 200
        assert response.content == b"hello world"

    run(server, body)
    assert server.bodies == [b"abc"]
    assert b"content-length: 3" in server.heads[0].lower()


def test_chunked_framing_cut_at_every_byte() -> None:
    whole = b"".join(step for step in CHUNKED if isinstance(step, bytes))
    server = RawServer([[whole[i : i + 1] for i in range(len(whole))]])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        assert (await client.get(url)).content == b"hello world"

    run(server, body)


def test_content_length_body_and_keep_alive_reuse() -> None:
    reply = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", 0.01, b"cde"]
    server = RawServer([reply])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        for _ in range(3):
            assert (await client.get(url)).content == b"abcde"

    run(server, body)
    assert server.served == 3
    assert server.connections == 1


def test_body_until_close_when_no_length_is_given() -> None:
    server = RawServer([[b"HTTP/1.0 200 OK\r\n\r\nuntil", 0.01, b" the end"]], close_after=True)

    async def body(client: httpx.AsyncClient, url: str) -> None:
        assert (await client.get(url)).content == b"until the end"
        assert (await client.get(url)).content == b"until the end"  # on a new connection

    run(server, body)
    assert server.connections == 2


def test_interim_100_continue_is_skipped() -> None:
    reply = [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"]

    async def body(client: httpx.AsyncClient, url: str) -> None:
        response = await client.post(url, content=b"x")
        assert (response.status_code, response.content) == (201, b"ok")
        assert response.reason_phrase == "Created"

    run(RawServer([reply]), body)


def test_connection_closed_mid_chunk_is_a_protocol_error() -> None:
    reply = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"]

    async def body(client: httpx.AsyncClient, url: str) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="before the end of the chunked"):
            await client.get(url)

    run(RawServer([reply], close_after=True), body)


def test_garbage_instead_of_a_chunk_size_is_a_protocol_error() -> None:
    reply = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 1.0]

    async def body(client: httpx.AsyncClient, url: str) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="chunk size"):
            await client.get(url)

    run(RawServer([reply]), body)


def test_a_kept_alive_connection_the_server_closed_is_replaced() -> None:
    # The server answers, then closes: the next request finds a dead idle connection.
    server = RawServer(
        [[b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0.05]], close_after=True
    )

    async def body(client: httpx.AsyncClient, url: str) -> None:
        assert (await client.get(url)).content == b"ok"
        await asyncio.sleep(0.2)
        assert (await client.get(url)).content == b"ok"

    run(server, body)
    assert server.connections == 2


def test_max_connections_caps_concurrent_connections() -> None:
    server = RawServer([[0.05, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        responses = await asyncio.gather(*(client.get(url) for _ in range(7)))
        assert [r.content for r in responses] == [b"ok"] * 7

    run(server, body, max_connections=2)
    assert server.peak_open == 2
    assert server.connections == 2


def test_refused_connection_is_a_connect_error() -> None:
    async def main() -> None:
        listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        listener.close()
        await listener.wait_closed()
        async with httpx.AsyncClient(transport=StreamingTransport()) as client:
            with pytest.raises(httpx.ConnectError, match="cannot connect"):
                await client.get(f"http://127.0.0.1:{port}")

    asyncio.run(main())


def test_a_line_break_inside_a_response_header_is_refused() -> None:
    # A bare CR (or LF) inside a header line: llhttp refuses what a lenient parser would split.
    reply = [b"HTTP/1.1 200 OK\r\nX-Note: a\rSet-Cookie: b\r\nContent-Length: 2\r\n\r\nok", 1.0]

    async def body(client: httpx.AsyncClient, url: str) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match=r"malformed response: .*LF"):
            await client.get(url)

    run(RawServer([reply]), body)


def test_oversized_response_headers_are_refused() -> None:
    filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 1000) for i in range(70))
    reply = [b"HTTP/1.1 200 OK\r\n" + filler, 1.0]

    async def body(client: httpx.AsyncClient, url: str) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="headers too large"):
            await client.get(url)

    run(RawServer([reply]), body)


def test_bytes_after_a_complete_response_keep_it_but_end_the_connection() -> None:
    reply = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA BYTES"]
    server = RawServer([reply])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        assert (await client.get(url)).content == b"ok"
        assert (await client.get(url)).content == b"ok"

    run(server, body)
    assert server.connections == 2


def test_head_and_204_responses_end_without_a_body() -> None:
    head = [b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"]
    empty = [b"HTTP/1.1 204 No Content\r\n\r\n"]
    server = RawServer([head, empty, head])

    async def body(client: httpx.AsyncClient, url: str) -> None:
        response = await client.head(url)
        assert (response.status_code, response.content) == (200, b"")
        response = await client.delete(url)
        assert (response.status_code, response.content) == (204, b"")
        assert (await client.head(url)).headers["content-length"] == "1000"

    run(server, body)
    assert server.connections == 1


def test_chunked_bodies_cut_anywhere_decode_to_what_was_sent() -> None:
    # Random chunk sizes and extensions, the whole response cut at random places: every
    # cut must give the same body (a seeded fuzz of the framing the load generator reads).
    rng = random.Random(7)
    scripts: list[Script] = []
    expected: list[bytes] = []
    for _ in range(40):
        parts = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(8)]
        wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        for part in parts:
            extension = b";x=1" if rng.random() < 0.2 else b""
            wire += b"%x%s\r\n%s\r\n" % (len(part), extension, part)
        wire += b"0\r\n\r\n"
        cuts = sorted(rng.sample(range(1, len(wire)), 12))
        scripts.append([wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)])
        expected.append(b"".join(parts))
    server = RawServer(scripts)

    async def body(client: httpx.AsyncClient, url: str) -> None:
        for want in expected:
            assert (await client.get(url)).content == want

    run(server, body)
    assert server.connections == 1
