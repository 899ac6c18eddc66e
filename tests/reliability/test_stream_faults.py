"""Broken streams against the real vLLM server, through the fault-injecting proxy.

A cut stream, an HTTP error, a malformed event and a stalled stream each make one request
fail with its reason, while the others are measured normally; a stalled request ends at the
per-request timeout. The plugin then lets the error budget (``--llmperf-max-failed``, default
0) decide: over budget, the test fails saying how many requests failed and why, and no
baseline is written.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pytest_llmperf.gate import store
from pytest_llmperf.measure import loadgen
from pytest_llmperf.models import SampleRequest
from tests.conftest import TINY_MODEL_NAME, requires_vllm
from tests.reliability.helpers import (
    Project,
    external_args,
    file_hashes,
    make_project,
    run_pytest,
    seed_baseline,
)
from tests.support.fault_proxy import Fault, FaultPlan, FaultProxy

pytestmark = [pytest.mark.e2e, requires_vllm]

CUT = "RemoteProtocolError: server closed the connection before the end of the chunked body"


def _requests(n: int, output_len: int = 8) -> list[SampleRequest]:
    return [
        SampleRequest(
            prompt=f"request {i}: the quick brown fox", prompt_len=8, expected_output_len=output_len
        )
        for i in range(n)
    ]


def _config(proxy: FaultProxy, **kwargs: object) -> loadgen.LoadConfig:
    return loadgen.LoadConfig(
        base_url=proxy.url,
        model=TINY_MODEL_NAME,
        endpoint=loadgen.COMPLETIONS_ENDPOINT,
        max_concurrency=1,  # one at a time: request i is the proxy's request i
        **kwargs,  # type: ignore[arg-type]
    )


def test_each_fault_fails_its_request_with_its_reason(proxy: FaultProxy) -> None:
    faults = {
        1: Fault("cut", after_events=3),
        2: Fault("status", status=500),
        3: Fault("status", status=429, message="rate limited"),
        4: Fault("status", status=400, message="bad request shape"),
        5: Fault("bad_sse", after_events=2),
        6: Fault("cut", after_bytes=20),  # in the middle of the first event
        7: Fault("pass", latency_ms=300),
        9: Fault("error_event", after_events=3, message="EngineCore encountered an issue"),
    }
    proxy.set_plan(FaultPlan(requests=faults))
    result = loadgen.run_load(_config(proxy, request_timeout=60), _requests(10))
    records = result.records
    ok = [i for i, r in enumerate(records) if r.success]
    assert ok == [0, 7, 8], [r.error for r in records]
    for i in ok:
        assert records[i].output_tokens == 8
        assert 1 <= records[i].chunks <= 8  # vLLM may merge tokens of a slow reader's event
    assert records[7].ttft > 0.3  # the added latency is measured, not a failure
    assert records[1].error == CUT
    assert records[1].chunks == 3  # what arrived before the cut was seen, not counted as ok
    assert records[2].error == "HTTP 500: injected failure"
    assert records[3].error == "HTTP 429: rate limited"
    assert records[4].error == "HTTP 400: bad request shape"
    assert records[5].error.startswith("ValueError: invalid JSON event")
    assert records[5].chunks == 2
    assert records[6].error == CUT
    # vLLM's way of saying a started stream failed: an error event, then [DONE].
    assert records[9].error == (
        "StreamError: error event: EngineCore encountered an issue (code 500)"
    )
    assert all(r.output_tokens == 0 and r.latency == 0 for r in records if not r.success)
    stats = proxy.stats()
    assert stats["load_requests"] == 10
    assert stats["faults"] == {"pass": 3, "cut": 2, "status": 3, "bad_sse": 1, "error_event": 1}


def test_stalled_stream_ends_at_the_request_timeout(proxy: FaultProxy) -> None:
    proxy.set_plan(FaultPlan(requests={0: Fault("stall", after_events=2)}))
    started = time.monotonic()
    result = loadgen.run_load(_config(proxy, request_timeout=2.0), _requests(2))
    elapsed = time.monotonic() - started
    stalled, fine = result.records
    assert stalled.error == "timeout after 2 s"
    assert stalled.chunks <= 2  # fewer when a loaded machine is slow to the first tokens
    assert fine.success
    assert 2.0 <= elapsed < 30.0, elapsed  # the timeout, plus one short request


def test_connection_dropped_before_any_answer(proxy: FaultProxy) -> None:
    proxy.set_plan(FaultPlan(default=Fault("drop")))
    result = loadgen.run_load(_config(proxy, request_timeout=30), _requests(3))
    assert [r.success for r in result.records] == [False] * 3
    reasons = {r.error for r in result.records}
    assert reasons == {"RemoteProtocolError: server disconnected without sending a response"}
    assert proxy.stats()["load_requests"] <= 6  # at most one retry each, never a loop


# -- through the plugin ----------------------------------------------------------------------

MIXED = FaultPlan(
    requests={
        1: Fault("cut", after_events=2),
        4: Fault("status", status=503, message="engine overloaded"),
        6: Fault("bad_sse", after_events=1),
    }
)


def _seeded(tmp_path: Path, model: Path) -> tuple[Project, Path, dict[str, str]]:
    project = make_project(tmp_path)
    path = project.baseline_file(str(model))
    seed_baseline(path, {"tiny": 100.0})
    return project, path, file_hashes(project.baselines)


def test_failed_requests_over_budget_fail_the_test_and_write_nothing(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project, _, before = _seeded(tmp_path, tiny_model_dir)
    proxy.set_plan(MIXED)
    run = run_pytest(
        project,
        [*external_args(proxy.url, tiny_model_dir), "--update-baselines", "--llmperf-json=r.json"],
    )
    assert run.returncode == 1, run.log
    assert "3 of 8 requests failed (allowed: 0, --llmperf-max-failed); first reasons:" in (
        run.output
    ), run.log
    reasons = run.output.split("first reasons:", 1)[1]
    assert "server closed the connection before the end of the chunked body" in reasons
    assert "HTTP 503: engine overloaded" in reasons
    assert "invalid JSON event" in reasons
    assert proxy.stats()["load_requests"] == 8
    assert file_hashes(project.baselines) == before


def test_failed_requests_within_budget_pass(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project, path, _ = _seeded(tmp_path, tiny_model_dir)
    proxy.set_plan(MIXED)
    run = run_pytest(
        project,
        [*external_args(proxy.url, tiny_model_dir), "--update-baselines", "--llmperf-max-failed=3"],
    )
    assert run.returncode == 0, run.log
    entry = store.load_entry(path, "tiny")
    assert entry is not None
    assert entry.metrics["completed"] == 5
    assert entry.metrics["failed"] == 3


def test_stalled_stream_in_the_plugin_honours_the_request_timeout(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project, _, before = _seeded(tmp_path, tiny_model_dir)
    proxy.set_plan(FaultPlan(requests={2: Fault("stall", after_events=1)}))
    run = run_pytest(
        project,
        [*external_args(proxy.url, tiny_model_dir), "--llmperf-request-timeout=3"],
        timeout=300,
    )
    assert run.returncode == 1, run.log
    assert "1 of 8 requests failed (allowed: 0, --llmperf-max-failed)" in run.output, run.log
    assert "timeout after 3 s" in run.output
    assert run.seconds < 60, run.log
    assert file_hashes(project.baselines) == before


def test_many_different_failures_show_the_first_few_reasons(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project, _, _ = _seeded(tmp_path, tiny_model_dir)
    proxy.set_plan(
        FaultPlan(
            requests={
                i: Fault("status", status=500 + i, message=f"failure kind {i}") for i in range(8)
            }
        )
    )
    run = run_pytest(project, external_args(proxy.url, tiny_model_dir))
    assert run.returncode == 1, run.log
    assert "8 of 8 requests failed (allowed: 0, --llmperf-max-failed)" in run.output, run.log
    shown = [i for i in range(8) if f"failure kind {i}" in run.output]
    assert 1 <= len(shown) <= 5, run.log


def test_every_warmup_failing_stops_before_the_measured_run(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project, _, before = _seeded(tmp_path, tiny_model_dir)
    proxy.set_plan(FaultPlan(default=Fault("status", status=502, message="bad gateway")))
    args = [a for a in external_args(proxy.url, tiny_model_dir) if "warmups" not in a]
    run = run_pytest(project, [*args, "--llmperf-warmups=2"])
    assert run.returncode == 1, run.log
    assert "every warm-up request failed: HTTP 502: bad gateway" in run.output, run.log
    assert proxy.stats()["load_requests"] == 2  # the 8 measured requests were never sent
    assert file_hashes(project.baselines) == before
