"""A scenario: a request flow a test writes itself (a tool-call loop, a fan-out), measured.

The flow is an async function given a :class:`MeasuredClient`; every request it sends is timed
as a profile's requests are, under one prefix-cache salt of its own (what one pass shares, it
shares; nothing comes from another pass), with the engine's own metrics read around it. The
result is a :class:`Measurement` like a profile's, so the gate records and judges it the same
way: its baseline entry is the scenario's name.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_llmperf import redact
from pytest_llmperf.config import Settings
from pytest_llmperf.engines.session import Target
from pytest_llmperf.measure import metrics, series
from pytest_llmperf.measure.client import MeasuredClient, span
from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, LoadConfig
from pytest_llmperf.measure.run import Measurement, engine_probe, salted

__all__ = ["Flow", "measure_scenario", "scenario_config"]

Flow = Callable[[MeasuredClient], Awaitable[Any]]

# Per label, the numbers that tell the steps of a flow apart (the full set is the flow's).
LABEL_METRICS = ("mean_ttft_ms", "mean_e2el_ms", "completed")


def scenario_config(target: Target, settings: Settings, api_key: str | None) -> LoadConfig:
    """How a scenario's client reaches the session's engine (chat, the served model)."""
    return LoadConfig(
        base_url=target.base_url,
        model=target.served_model,
        endpoint=CHAT_ENDPOINT,
        request_timeout=settings.request_timeout,
        quirks=target.spec.quirks,
        api_key=api_key,
    )


def _key(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "unlabelled"


async def measure_scenario(
    name: str, flow: Flow, target: Target, settings: Settings, api_key: str | None = None
) -> Measurement:
    """Run ``flow`` once and measure it; ``<label>_*`` metrics per request label. The key
    goes into the flow's requests and into the engine-metrics reads alike."""
    target.check_alive()
    config = salted(scenario_config(target, settings, api_key), target.spec)
    probe = engine_probe(target, redact.auth_headers(redact.Secret(api_key) if api_key else None))
    with probe or contextlib.nullcontext():
        async with MeasuredClient(config) as client:
            await flow(client)
    records = client.records()
    if not records:
        raise ValueError(f"scenario {name!r} sent no request through its client")
    computed = metrics.compute_metrics(records, span(records))
    labels = sorted({reply.label for reply in client.replies if reply.label})
    for label in labels:
        per_label = client.metrics(label)
        for key in LABEL_METRICS:
            computed[f"{_key(label)}_{key}"] = per_label[key]
    computed.update(probe.metrics if probe else {})
    failed = [r for r in records if not r.success]
    return Measurement(
        metrics=computed,
        # What makes two passes comparable: the flow's name, how many requests, which steps.
        workload={
            "dataset": "scenario",
            "scenario": name,
            "requests": len(records),
            "labels": labels,
        },
        errors=tuple(r.error or "unknown error" for r in failed[:5]),
        failed=len(failed),
        notes=(probe.note,) if probe and probe.note else (),
        series=series.summarize(records),
        samples=metrics.sample_counts(records),
    )
