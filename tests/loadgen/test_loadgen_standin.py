"""run_load against the stand-in streaming server: bodies, records, failures, limits."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import httpx
import pytest
from stream_server import StandInProcess

from pytest_llmperf.engines.base import RequestQuirks
from pytest_llmperf.measure.loadgen import (
    CHAT_ENDPOINT,
    COMPLETIONS_ENDPOINT,
    LoadConfig,
    LoadResult,
    run_load,
    run_load_async,
)
from pytest_llmperf.models import SampleRequest
from tests.support.processes import default_sigint

SECRET = "sk-test-0123456789abcdef"


def sample(n: int, out: int = 8, *, first_out: int | None = None) -> list[SampleRequest]:
    """Requests with distinct prompts; request i asks for ``out + i`` tokens."""
    return [
        SampleRequest(
            prompt=f"prompt number {i}",
            prompt_len=3,
            expected_output_len=first_out if (i == 0 and first_out) else out + i,
        )
        for i in range(n)
    ]


def cfg(server: StandInProcess, **kw: Any) -> LoadConfig:
    return LoadConfig(base_url=server.base_url, model="stand-in-model", **kw)


def served(server: StandInProcess) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = server.stats()["requests"]
    return requests


# -- what goes over the wire ------------------------------------------------------------


def test_completions_request_body(stand_in: StandInProcess) -> None:
    run_load(cfg(stand_in, endpoint=COMPLETIONS_ENDPOINT), sample(1))
    (seen,) = served(stand_in)
    assert seen["path"] == "/v1/completions"
    assert seen["body"] == {
        "model": "stand-in-model",
        "prompt": "prompt number 0",
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "min_tokens": 8,
    }
    assert seen["headers"]["content-type"] == "application/json"


def test_chat_request_body(stand_in: StandInProcess) -> None:
    run_load(cfg(stand_in, endpoint=CHAT_ENDPOINT, temperature=0.0), sample(1))
    (seen,) = served(stand_in)
    assert seen["path"] == "/v1/chat/completions"
    assert seen["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "prompt number 0"}]}
    ]
    assert seen["body"]["max_completion_tokens"] == 8
    assert seen["body"]["temperature"] == 0.0
    assert "max_tokens" not in seen["body"]


def test_quirks_decide_length_fields(stand_in: StandInProcess) -> None:
    quirks = RequestQuirks(
        chat_max_tokens_field="max_tokens", supports_ignore_eos=False, supports_min_tokens=False
    )
    run_load(cfg(stand_in, endpoint=CHAT_ENDPOINT, quirks=quirks), sample(1))
    (seen,) = served(stand_in)
    assert seen["body"]["max_tokens"] == 8
    assert not {"ignore_eos", "min_tokens", "max_completion_tokens"} & set(seen["body"])


def test_api_key_goes_only_into_the_authorization_header(stand_in: StandInProcess) -> None:
    config = cfg(stand_in, api_key=SECRET)
    ok = run_load(config, sample(1))
    failed = run_load(cfg(stand_in, api_key=SECRET, extra_body={"x_mode": "http500"}), sample(1))
    for seen in served(stand_in):
        assert seen["headers"]["authorization"] == f"Bearer {SECRET}"
        others = {k: v for k, v in seen["headers"].items() if k != "authorization"}
        assert SECRET not in repr(others)
        assert SECRET not in repr(seen["body"])
    assert SECRET not in repr(config)
    assert SECRET not in repr(ok) + repr(failed)


def test_no_authorization_header_without_a_key(stand_in: StandInProcess) -> None:
    run_load(cfg(stand_in), sample(1))
    (seen,) = served(stand_in)
    assert "authorization" not in seen["headers"]


# -- records ------------------------------------------------------------------------------


def test_completions_record(stand_in: StandInProcess) -> None:
    (record,) = run_load(cfg(stand_in), sample(1, out=10)).records
    assert record.success, record.error
    assert record.error == ""
    assert record.chunks == 10
    assert len(record.itl) == 9  # one sample per token chunk after the first
    assert record.output_tokens == 10
    assert record.prompt_len == 3  # the stand-in counts prompt words, like usage.prompt_tokens
    assert record.ttft >= 0.005  # the stand-in waits 5 ms before the first chunk
    assert record.latency == pytest.approx(record.ttft + sum(record.itl))
    assert record.queue_time >= 0


def test_chat_role_chunk_counts_as_the_first_token(stand_in: StandInProcess) -> None:
    (record,) = run_load(cfg(stand_in, endpoint=CHAT_ENDPOINT), sample(1, out=10)).records
    assert record.success, record.error
    assert record.chunks == 11  # role chunk + 10 content chunks
    assert len(record.itl) == 10
    # The first content chunk follows the role chunk at once; the others come 1 ms apart.
    assert record.itl[0] < 0.5 * statistics.median(record.itl[1:])
    assert record.output_tokens == 10  # from usage, not from the chunk count
    assert record.prompt_len == 3 + 10  # the server's count (chat template) replaces ours


def test_output_and_prompt_tokens_come_from_usage(stand_in: StandInProcess) -> None:
    config = cfg(stand_in, extra_body={"x_tokens_per_chunk": 3})
    (record,) = run_load(config, sample(1, out=6)).records
    assert record.chunks == 6
    assert record.output_tokens == 18


def test_without_usage_the_chunk_count_or_the_token_counter_is_used(
    stand_in: StandInProcess,
) -> None:
    config = cfg(stand_in, extra_body={"x_mode": "no_usage"})
    (record,) = run_load(config, sample(1, out=6)).records
    assert record.success
    assert record.output_tokens == 6
    assert record.prompt_len == 3  # the client's count: no usage arrived
    texts: list[str] = []

    def counter(text: str) -> int:
        texts.append(text)
        return 100

    (counted,) = run_load(config, sample(1, out=6), token_counter=counter).records
    assert counted.output_tokens == 100
    assert texts == ["tok" * 6]


@pytest.mark.parametrize(
    ("endpoint", "server_prompt_len"), [(CHAT_ENDPOINT, 13), (COMPLETIONS_ENDPOINT, 3)]
)
def test_usage_on_the_last_token_chunk_is_read(
    stand_in: StandInProcess, endpoint: str, server_prompt_len: int
) -> None:
    # MindIE (which ignores stream_options) and older llama-server builds put usage on the
    # chunk with finish_reason, not on a chunk of its own: 3 tokens per chunk tell it from the
    # chunk count (which for chat also counts the role chunk).
    extra = {"x_mode": "usage_last", "x_tokens_per_chunk": 3}
    config = cfg(stand_in, endpoint=endpoint, extra_body=extra)
    request = SampleRequest(prompt="prompt number 0", prompt_len=99, expected_output_len=4)
    (record,) = run_load(config, [request]).records
    assert record.success
    assert record.output_tokens == 12
    assert record.prompt_len == server_prompt_len  # the server's count, not the client's 99


def test_records_in_submission_order(stand_in: StandInProcess) -> None:
    requests = sample(12, out=3)
    result = run_load(cfg(stand_in, request_rate=400.0, max_concurrency=4), requests)
    assert [r.chunks for r in result.records] == [r.expected_output_len for r in requests]
    starts = [r.start_time for r in result.records]
    assert starts == sorted(starts)  # FIFO under the cap


def test_progress_reports_each_finished_request(stand_in: StandInProcess) -> None:
    calls: list[tuple[int, int, int]] = []
    result = run_load(
        cfg(stand_in, max_concurrency=3),
        sample(7, out=2),
        progress=lambda *args: calls.append(args),
    )
    assert [done for done, _, _ in calls] == list(range(1, 8))
    assert {total for _, total, _ in calls} == {7}
    assert calls[-1][2] == sum(r.output_tokens for r in result.records)
    assert [tokens for _, _, tokens in calls] == sorted(tokens for _, _, tokens in calls)


def test_duration_spans_first_dispatch_to_last_completion(stand_in: StandInProcess) -> None:
    result = run_load(cfg(stand_in, request_rate=20.0, seed=1), sample(4, out=2))
    ends = [r.start_time + r.latency for r in result.records]
    assert result.duration >= max(ends) - result.start
    assert result.duration >= 4 / 20.0  # the schedule puts the last request at n / rate


# -- concurrency, warm-up -----------------------------------------------------------------


def test_max_concurrency_is_honoured(stand_in: StandInProcess) -> None:
    result = run_load(cfg(stand_in, max_concurrency=3), sample(12, out=10))
    stats = stand_in.stats()
    assert stats["peak_streams"] == 3
    assert stats["peak_connections"] <= 3
    assert stats["connections_total"] <= 3 + 1  # kept alive and reused (+1: this stats call)
    assert all(r.success for r in result.records)
    assert max(r.queue_time for r in result.records) > 0.005  # later ones waited their turn


def test_warmups_are_sent_first_and_not_measured(stand_in: StandInProcess) -> None:
    requests = sample(3, out=4)
    result = run_load(cfg(stand_in, num_warmups=2, max_concurrency=2), requests)
    prompts = [seen["body"]["prompt"] for seen in served(stand_in)]
    assert prompts[:2] == ["prompt number 0"] * 2
    assert sorted(prompts[2:]) == sorted(r.prompt for r in requests)
    assert len(result.records) == 3
    assert min(r.start_time for r in result.records) >= result.start


# -- failures -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "reason", "partial"),
    [
        ("http500", "HTTP 500: stand-in failure", False),
        ("cut", "RemoteProtocolError: server closed the connection before the end", True),
        ("bad_json", "invalid JSON event", True),
        ("empty", "no token chunk received", False),
    ],
)
def test_failed_requests_say_why(
    stand_in: StandInProcess, mode: str, reason: str, partial: bool
) -> None:
    config = cfg(stand_in, endpoint=CHAT_ENDPOINT, extra_body={"x_mode": mode})
    (record,) = run_load(config, sample(1)).records
    assert not record.success
    assert reason in record.error
    assert "\n" not in record.error
    assert "Traceback" not in record.error
    assert record.latency == 0.0
    assert record.output_tokens == 0
    assert (record.chunks > 0) == partial
    assert (record.ttft > 0) == partial


def test_stalled_stream_times_out(stand_in: StandInProcess) -> None:
    config = cfg(stand_in, extra_body={"x_mode": "stall"}, request_timeout=0.5)
    began = time.perf_counter()
    (record,) = run_load(config, sample(1)).records
    assert time.perf_counter() - began < 3
    assert not record.success
    assert record.error == "timeout after 0.5 s"
    assert record.chunks == 1
    assert record.ttft > 0
    assert stand_in.stats()["open_streams"] == 0  # the connection was closed


def test_connection_refused() -> None:
    with socket.socket() as sock:  # a port that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = LoadConfig(base_url=f"http://127.0.0.1:{port}", model="m")
    (record,) = run_load(config, sample(1)).records
    assert not record.success
    assert record.error.startswith("ConnectError: cannot connect to 127.0.0.1:")


def test_stock_httpx_transport_gives_the_same_records(stand_in: StandInProcess) -> None:
    config = cfg(stand_in, endpoint=CHAT_ENDPOINT)
    ours = run_load(config, sample(2, out=5))
    stock = run_load(config, sample(2, out=5), transport=httpx.AsyncHTTPTransport())
    for a, b in zip(ours.records, stock.records, strict=True):
        assert (a.success, a.chunks, len(a.itl), a.output_tokens, a.prompt_len) == (
            b.success,
            b.chunks,
            len(b.itl),
            b.output_tokens,
            b.prompt_len,
        )


# -- running and stopping -----------------------------------------------------------------


def test_run_load_from_a_thread_without_an_event_loop(stand_in: StandInProcess) -> None:
    out: list[LoadResult] = []
    thread = threading.Thread(target=lambda: out.append(run_load(cfg(stand_in), sample(2))))
    thread.start()
    thread.join(30)
    assert out
    assert all(r.success for r in out[0].records)


def open_streams_reach(stand_in: StandInProcess, count: int, timeout: float = 10.0) -> int:
    """Wait until the stand-in has ``count`` streams open (or the timeout); returns how many
    it has. Polling the server's own count, not sleeping a guess: on a busy machine the
    streams may open late."""
    deadline = time.monotonic() + timeout
    while (open_now := stand_in.stats()["open_streams"]) != count:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return int(open_now)


def test_cancelling_closes_the_streams(stand_in: StandInProcess) -> None:
    config = cfg(stand_in, extra_body={"x_mode": "stall"}, max_concurrency=4)

    async def cancel_midway() -> None:
        task = asyncio.create_task(run_load_async(config, sample(8)))
        # The streams are open (the server says so) before the cancel: else there is
        # nothing to close and the test proves nothing.
        assert await asyncio.to_thread(open_streams_reach, stand_in, 4) == 4
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)

    asyncio.run(cancel_midway())
    assert open_streams_reach(stand_in, 0, timeout=5) == 0


def test_ctrl_c_stops_a_run_and_closes_its_connections(stand_in: StandInProcess) -> None:
    script = textwrap.dedent(
        f"""
        from pytest_llmperf.measure.loadgen import LoadConfig, run_load
        from pytest_llmperf.models import SampleRequest
        config = LoadConfig(base_url={stand_in.base_url!r}, model="m",
                            extra_body={{"x_mode": "stall"}}, max_concurrency=3)
        print("running", flush=True)
        run_load(config, [SampleRequest("p", 1, 8)] * 6)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "running"
        assert open_streams_reach(stand_in, 3) == 3
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in err
    assert open_streams_reach(stand_in, 0, timeout=5) == 0
