"""Incremental Server-Sent Events parser: bytes in, complete ``data`` payloads out.

Line-based, as the SSE standard describes it (and as metrics-spec §2.1 recommends instead of
vLLM's split-on-blank-line-and-strip framing): a line ends with CRLF, LF or CR; a blank line
ends an event; the ``data`` lines of an event are joined with ``"\\n"``; lines starting with
``:`` are comments (pings); ``event``, ``id``, ``retry`` and unknown fields are ignored; an
event without ``data`` yields nothing. An event still open when the stream ends is dropped.

It sits on the hot path of every streamed token, so the common case (LF line ends, one
``data: `` line per event) costs one ``split`` plus a slice per event, and leftover bytes are
copied only when an event straddles two network reads.
"""

from __future__ import annotations

__all__ = ["SSEParser"]

_BOM = b"\xef\xbb\xbf"


class SSEParser:
    """Feed raw response bytes with :meth:`feed`; it returns the payloads of complete events.

    Payloads are ``bytes`` (``json.loads`` takes them as they are); ``b"[DONE]"`` comes out
    like any other payload.
    """

    __slots__ = ("_buf", "_cr", "_pre", "_started")

    def __init__(self) -> None:
        self._buf = b""  # an incomplete event, line ends already turned into LF
        self._cr = False  # the last read ended in CR: a LF may follow in the next one
        self._started = False
        self._pre = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        if not self._started:
            chunk = self._pre + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._pre = chunk  # maybe a byte order mark cut by the network
                return []
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                # Hold back a trailing CR: with a LF in the next read it is one line end.
                chunk = chunk[:-1]
                self._cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._buf:
            chunk = self._buf + chunk
        blocks = chunk.split(b"\n\n")
        self._buf = blocks.pop()
        out: list[bytes] = []
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])  # the usual vLLM event: one data line
            else:
                _parse_block(block, out)
        return out

    def flush(self) -> list[bytes]:
        """At the end of the stream: a CR held back from the last read still ends a line."""
        if not self._cr:
            return []
        return self.feed(b"\n")


def _parse_block(block: bytes, out: list[bytes]) -> None:
    """Field lines of one event (maybe after extra blank lines); appends its payloads."""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if not line:  # a blank line: the event so far is complete
            if data:
                out.append(b"\n".join(data))
                data = []
            continue
        if line[0] == 0x3A:  # ":" comment
            continue
        name, colon, value = line.partition(b":")
        if name != b"data":
            continue
        if colon and value.startswith(b" "):
            value = value[1:]
        data.append(value)
    if data:
        out.append(b"\n".join(data))
