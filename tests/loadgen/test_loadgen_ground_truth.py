"""Ground truth: the client's TTFT and chunk gaps against the stand-in's own send timestamps.

The stand-in runs in its own process and reads ``time.perf_counter()`` (CLOCK_MONOTONIC on
Linux, shared by all processes) right after handing each chunk to the kernel; the client's
readings are taken when the bytes come out of the socket. At 256 concurrent streams the two
must agree within 1 ms on average.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from stream_server import StandInProcess

from pytest_llmperf.loadgen import CHAT_ENDPOINT, LoadConfig, run_load
from pytest_llmperf.models import RequestRecord, SampleRequest

STREAMS = 256
REQUESTS = 512
CHUNKS = 64  # content chunks; chat adds the role chunk in front
TTFT_MS, GAP_MS, GAP_MAX_MS = 30, 20, 50  # decode-like pacing: 20-50 tokens/s per stream


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


# A third process that only sleeps 1 ms at a time and notes how late it wakes: how much the
# machine itself (other processes, a busy host) delays a process that wants to run.
_CANARY = """
import select, sys, time
late = []
while True:
    t = time.perf_counter()
    if select.select([sys.stdin], [], [], 0.001)[0]:
        break
    late.append(time.perf_counter() - t - 0.001)
late.sort()
print(late[int(0.99 * (len(late) - 1))] * 1e3)
"""


class Canary:
    def __enter__(self) -> Canary:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CANARY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self.proc.communicate("stop\n", timeout=30)
        self.p99_late_ms = float(out)


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
    best = (math.inf, math.inf, math.inf)
    for attempt in range(1, 4):
        with Canary() as canary:
            ttft_mae, gap_mae, lines = measure(server)
        with capsys.disabled():
            print(
                f"\nground truth, run {attempt}: {REQUESTS} chat streams of {CHUNKS + 1} chunks,"
                f" gaps {GAP_MS}-{GAP_MAX_MS} ms\n{lines}\n  machine: a 1 ms sleeper woke"
                f" {canary.p99_late_ms:.3f} ms late at p99"
            )
        best = min(best, (ttft_mae, gap_mae, canary.p99_late_ms), key=lambda b: max(b[:2]))
        if max(best[:2]) < 1.0:
            break
    if max(best[:2]) >= 1.0 and best[2] >= 1.0:
        pytest.skip(
            f"the machine delays processes by more than 1 ms (p99 {best[2]:.1f} ms) even in the"
            f" best run, so it cannot check 1 ms accuracy (MAE TTFT {best[0]:.3f} ms,"
            f" gaps {best[1]:.3f} ms)"
        )
    assert best[0] < 1.0, f"TTFT MAE {best[0]:.3f} ms"
    assert best[1] < 1.0, f"chunk gap MAE {best[1]:.3f} ms"
