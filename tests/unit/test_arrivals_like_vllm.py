"""Our arrival schedule is vLLM's, request by request, for the same seed (issue 18).

vLLM's schedule is read from its own ``get_request`` generator: its clock and sleep are
replaced by a virtual clock, so the offsets it waits for come out without waiting.
"""

from __future__ import annotations

import asyncio
import math
import types
from typing import Any

import numpy as np
import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.arrivals import RampUp, arrival_offsets
from pytest_llmperf.measure.loadgen import LoadConfig


def vllm_offsets(
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    rate: float,
    burstiness: float,
    seed: int,
    ramp: RampUp | None = None,
) -> list[float]:
    serve = pytest.importorskip(
        "vllm.benchmarks.serve", reason="vLLM is not installed: nothing to compare with"
    )
    clock = [0.0]
    sent: list[float] = []

    async def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(serve, "time", types.SimpleNamespace(time=lambda: clock[0]))
    monkeypatch.setattr(serve, "asyncio", types.SimpleNamespace(sleep=sleep))

    async def collect() -> None:
        options: dict[str, Any] = {}
        if ramp is not None:
            options = {
                "ramp_up_strategy": ramp.strategy,
                "ramp_up_start_rps": ramp.start_rps,
                "ramp_up_end_rps": ramp.end_rps,
            }
        async for _request, _rate in serve.get_request(list(range(n)), rate, burstiness, **options):
            sent.append(clock[0])

    saved = np.random.get_state()
    try:
        np.random.seed(seed)  # what `vllm bench serve --seed` does before drawing
        asyncio.run(collect())
    finally:
        np.random.set_state(saved)
    return sent


@pytest.mark.parametrize("seed", [0, 1, 42, 12345])
@pytest.mark.parametrize(("rate", "burstiness"), [(1.0, 1.0), (7.5, 0.3), (40.0, 4.0)])
def test_same_offsets_as_vllm(
    monkeypatch: pytest.MonkeyPatch, seed: int, rate: float, burstiness: float
) -> None:
    ours = arrival_offsets(200, rate, burstiness, seed)
    theirs = vllm_offsets(monkeypatch, 200, rate, burstiness, seed)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "ramp",
    [RampUp("linear", 1.0, 20.0), RampUp("exponential", 2.0, 50.0)],
    ids=["linear", "exponential"],
)
@pytest.mark.parametrize("burstiness", [1.0, 0.5])
def test_same_ramp_up_as_vllm(
    monkeypatch: pytest.MonkeyPatch, ramp: RampUp, burstiness: float
) -> None:
    ours = arrival_offsets(150, math.inf, burstiness, seed=7, ramp_up=ramp)
    theirs = vllm_offsets(monkeypatch, 150, math.inf, burstiness, 7, ramp)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_infinite_burstiness_like_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = arrival_offsets(10, 4.0, math.inf, seed=3)
    assert ours == pytest.approx(vllm_offsets(monkeypatch, 10, 4.0, math.inf, 3))


def test_the_global_numpy_generator_is_left_alone() -> None:
    np.random.seed(5)
    expected = np.random.random()
    np.random.seed(5)
    arrival_offsets(50, 3.0, 1.0, seed=9)
    assert np.random.random() == expected


def test_a_ramp_up_speeds_up_sending() -> None:
    offsets = arrival_offsets(400, math.inf, math.inf, ramp_up=RampUp("linear", 1.0, 10.0))
    assert offsets[1] - offsets[0] == pytest.approx(1 / (1.0 + 9.0 / 399))
    assert offsets[-1] - offsets[-2] == pytest.approx(1 / 10.0)


def test_bad_ramp_ups_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="strategy must be one of linear, exponential"):
        RampUp("step", 1.0, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be > 0"):
        RampUp("linear", 0.0, 2.0)
    with pytest.raises(ConfigError, match="leave request_rate at inf"):
        LoadConfig("http://x", "m", request_rate=5.0, ramp_up=RampUp("linear", 1.0, 2.0))
