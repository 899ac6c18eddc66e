"""The SSE parser: standard framing, whatever way the bytes are cut into network reads."""

from __future__ import annotations

import itertools
import random

import pytest

from pytest_llmperf.measure.sse import SSEParser

VLLM_STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    b'data: {"choices":[],"usage":{"completion_tokens":1}}\n\n'
    b"data: [DONE]\n\n"
)
VLLM_EVENTS = [
    b'{"choices":[{"delta":{"role":"assistant","content":""}}]}',
    b'{"choices":[{"delta":{"content":"a"}}]}',
    b'{"choices":[],"usage":{"completion_tokens":1}}',
    b"[DONE]",
]


def parse(*reads: bytes) -> list[bytes]:
    parser = SSEParser()
    out: list[bytes] = []
    for read in reads:
        out += parser.feed(read)
    return out + parser.flush()


def test_vllm_stream_in_one_read() -> None:
    assert parse(VLLM_STREAM) == VLLM_EVENTS


def test_done_is_a_payload_like_any_other() -> None:
    assert parse(b"data: [DONE]\n\n") == [b"[DONE]"]


@pytest.mark.parametrize("seed", range(20))
def test_events_split_across_reads_anywhere(seed: int) -> None:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(VLLM_STREAM)), rng.randint(1, 12)))
    pieces = [VLLM_STREAM[a:b] for a, b in itertools.pairwise([0, *cuts, len(VLLM_STREAM)])]
    assert parse(*pieces) == VLLM_EVENTS


def test_one_byte_per_read() -> None:
    crlf = VLLM_STREAM.replace(b"\n", b"\r\n")
    assert parse(*(crlf[i : i + 1] for i in range(len(crlf)))) == VLLM_EVENTS


def test_an_event_is_emitted_only_when_its_blank_line_arrives() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: {"a":1}\n') == []
    assert parser.feed(b"\n") == [b'{"a":1}']


def test_comments_are_skipped() -> None:
    assert parse(b": ping\n\ndata: x\n\n:another\ndata: y\n\n") == [b"x", b"y"]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: first\ndata: second\ndata:third\n\n") == [b"first\nsecond\nthird"]


def test_event_id_and_retry_lines_are_ignored() -> None:
    stream = b"event: message\nid: 7\nretry: 1000\ndata: payload\nunknown: x\n\n"
    assert parse(stream) == [b"payload"]


def test_event_without_data_yields_nothing() -> None:
    assert parse(b"event: ping\n\nid: 3\n\ndata: x\n\n") == [b"x"]


@pytest.mark.parametrize("eol", [b"\r\n", b"\r", b"\n"])
def test_all_three_line_ends(eol: bytes) -> None:
    stream = b"data: a" + eol + b"data: b" + eol + eol + b": c" + eol + b"data: d" + eol + eol
    assert parse(stream) == [b"a\nb", b"d"]


def test_crlf_split_between_reads_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\ndata: b\r\n\r", b"\n") == [b"a\nb"]


def test_cr_only_held_back_until_the_stream_ends() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r\r") == []  # the last CR might start a CRLF
    assert parser.flush() == [b"a"]


def test_only_one_leading_space_is_removed() -> None:
    assert parse(b"data:  two spaces\n\ndata:none\n\n") == [b" two spaces", b"none"]


def test_data_line_without_colon_is_empty_data() -> None:
    assert parse(b"data\n\n") == [b""]


def test_extra_blank_lines_between_events() -> None:
    assert parse(b"data: a\n\n\n\n\ndata: b\n\n") == [b"a", b"b"]


def test_incomplete_event_at_end_is_dropped() -> None:
    assert parse(b"data: a\n\ndata: half") == [b"a"]


@pytest.mark.parametrize(
    "reads", [(b"\xef\xbb\xbfdata: a\n\n",), (b"\xef", b"\xbb", b"\xbfdata: a\n\n")]
)
def test_byte_order_mark_at_start_is_ignored(reads: tuple[bytes, ...]) -> None:
    assert parse(*reads) == [b"a"]


def test_empty_reads_change_nothing() -> None:
    assert parse(b"", b"data: a\n", b"", b"\n", b"") == [b"a"]
