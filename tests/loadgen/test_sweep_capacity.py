"""Sweeps against a server whose capacity is known (issue 18, acceptance 1).

The stand-in has K slots and fixed prefill and per-token times (tests/support/
capacity_server.py), so the p99 TTFT of any arrival schedule follows from its queue model.
A sweep measured through the real load generator and vLLM's metrics must find the capacity
at a p99 TTFT SLO within 5 % of what the model says, for request rates and concurrencies.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from capacity_server import CapacityModel, CapacityServer

from pytest_llmperf.gate.capacity import Slo
from pytest_llmperf.gate.sweep import run_sweep
from pytest_llmperf.measure.arrivals import arrival_offsets
from pytest_llmperf.measure.loadgen import COMPLETIONS_ENDPOINT, LoadConfig, run_load
from pytest_llmperf.measure.metrics import compute_metrics
from pytest_llmperf.measure.sweep import SweepSpec
from pytest_llmperf.models import SampleRequest

pytestmark = pytest.mark.slow

# 4 slots, each request holding one for 50 + 9 * 10 = 140 ms: 28.6 requests/s at most.
MODEL = CapacityModel(slots=4, prefill_ms=50.0, token_ms=10.0)
TOKENS = 10
SEED = 7
# An SLO 70 ms above the bare prefill: a queue of half a service time breaks it. Closed
# loops land on 50 ms (no queue) or 190 ms (a queue), far either side of it.
SLO_MS = 120.0
# The rate sweep's SLO sits where p99 TTFT climbs steeply with the rate (94 % of the slots'
# throughput bound): a 5 % error in the rate moves the model's p99 by about 40 ms, far more
# than the measured p99 exceeds the model (1-6 ms on two busy cores). At 120 ms the curve
# is so flat that 5 % is under 4 ms of p99, and one late wake-up in CI failed the test.
RATE_SLO_MS = 200.0


@pytest.fixture(scope="module")
def server() -> Iterator[CapacityServer]:
    with CapacityServer(MODEL) as running:
        yield running


def requests(n: int) -> list[SampleRequest]:
    return [SampleRequest(f"prompt {i}", 3, TOKENS) for i in range(n)]


def measure_at(server: CapacityServer, n: int, **load: float | int) -> dict[str, object]:
    config = LoadConfig(
        base_url=server.base_url,
        model="stand-in",
        endpoint=COMPLETIONS_ENDPOINT,
        seed=SEED,
        **load,  # type: ignore[arg-type]
    )
    result = run_load(config, requests(n))
    assert all(record.success for record in result.records)
    return compute_metrics(result.records, result.duration)


def model_p99_ttft_ms(n: int, rate: float) -> float:
    return MODEL.p99_ttft_ms(arrival_offsets(n, rate, 1.0, SEED), TOKENS)


def true_rate_capacity(n: int) -> float:
    """The highest rate whose own schedule (same seed) keeps the model's p99 TTFT in the SLO."""

    def meets(rate: float) -> bool:
        return model_p99_ttft_ms(n, rate) <= RATE_SLO_MS

    low, high = 1.0, 200.0
    assert meets(low)
    assert not meets(high)
    while (high - low) / low > 1e-4:
        middle = (low + high) / 2
        low, high = (middle, high) if meets(middle) else (low, middle)
    return low


def test_rate_sweep_finds_the_true_capacity(server: CapacityServer) -> None:
    n = 80
    truth = true_rate_capacity(n)
    assert truth < MODEL.slots / MODEL.service_s(TOKENS)  # below the slots' throughput bound
    spec = SweepSpec("request_rate", start=16.0, factor=2.0, max_steps=9, resolution=0.02)
    result = run_sweep(
        spec,
        [Slo("p99_ttft_ms", RATE_SLO_MS)],
        lambda rate: measure_at(server, n, request_rate=rate),
    )
    # Each step's measured p99 beside the model's, so a failure shows whether jitter did it.
    measured_vs_model = [
        (
            round(s.load, 2),
            round(float(s.metrics["p99_ttft_ms"]), 1),
            round(model_p99_ttft_ms(n, s.load), 1),
        )
        for s in result.steps
    ]
    capacity = result.capacity
    assert len(result.steps) <= 9
    assert capacity.value is not None
    assert capacity.bounded, f"no bracket: {[s.load for s in result.steps]}"
    assert capacity.value == pytest.approx(truth, rel=0.05), (
        f"found {capacity.value:.2f} req/s in [{capacity.lower}, {capacity.upper}], "
        f"model says {truth:.2f}; (rate, measured p99, model p99): {measured_vs_model}"
    )


def test_concurrency_sweep_finds_the_slot_count(server: CapacityServer) -> None:
    # Up to K clients never queue; one more makes some wait most of a service time.
    n = 32
    truth = max(c for c in range(1, 16) if MODEL.closed_loop_p99_ttft_ms(c, n, TOKENS) <= SLO_MS)
    assert truth == MODEL.slots
    spec = SweepSpec("max_concurrency", start=1, factor=2.0, max_steps=8)
    result = run_sweep(
        spec,
        [Slo("p99_ttft_ms", SLO_MS)],
        lambda c: measure_at(server, n, max_concurrency=int(c)),
    )
    assert result.capacity.value == pytest.approx(truth, rel=0.05)
    assert (result.capacity.lower, result.capacity.upper) == (4, 5)
    # Saturation: the slots' throughput bound in output tokens per second, minus jitter.
    bound = MODEL.slots / MODEL.service_s(TOKENS) * TOKENS
    assert result.saturation_throughput <= bound * 1.02
    assert result.saturation_throughput >= bound * 0.8


def test_the_step_budget_stops_a_real_sweep(server: CapacityServer) -> None:
    spec = SweepSpec("request_rate", start=4.0, factor=1.5, max_steps=3)
    result = run_sweep(
        spec, [Slo("p99_ttft_ms", SLO_MS)], lambda rate: measure_at(server, 24, request_rate=rate)
    )
    assert [step.load for step in result.steps] == [4.0, 6.0, 9.0]
    # Nothing broke within three steps: a lower bound only, said as such.
    assert result.capacity.upper is None
    assert result.capacity.value == 9.0
    assert not math.isnan(result.saturation_throughput)
