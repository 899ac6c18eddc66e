"""TensorRT-LLM through its stand-in: refused until loaded, 128 + signal after a stop."""

from __future__ import annotations

import dataclasses
import time

import httpx
import pytest

from pytest_llmperf.errors import EngineStartError
from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, LoadConfig, run_load
from pytest_llmperf.models import SampleRequest


def test_start_serve_and_stop_leaves_no_worker(standins) -> None:
    standins.steer(load_s=0.5)
    server = standins.server("trtllm", "--max_seq_len=40960", "--enable_chunked_prefill")
    with server:
        assert time.time() >= standins.event_time("ready")
        started = standins.started()
        assert started["argv"][1:] == list(server.plan.argv[1:])
        assert started["argv"][1:4] == [
            "Qwen/Qwen3-32B",
            "--max_seq_len=40960",
            "--enable_chunked_prefill",
        ]
        text, usage = standins.chat(server, max_tokens=3)
        assert text.split() == ["t0", "t1", "t2"]
        assert usage["completion_tokens"] == 3
        assert server.version() == "1.2.0rc1"
        recorded = standins.wait_for_pids(3)  # server, orted-like child, MPI worker
        assert len(recorded) == 3
    assert server.exit_code == 128 + 15  # the parent exits with 128 + SIGTERM
    assert server.exit_was_normal
    standins.assert_all_gone(server, recorded)


def test_crash_during_start_up_is_reported_with_the_log_tail(standins) -> None:
    standins.steer(load_s=0.3, crash=1)
    server = standins.server("trtllm")
    began = time.monotonic()
    with pytest.raises(EngineStartError) as failure, server:
        pass
    assert time.monotonic() - began < 10
    assert "TensorRT-LLM exited with code 1 during start-up" in str(failure.value)
    assert "Unsupported SM version for FP8 block scaling GEMM" in str(failure.value)
    assert not server.exit_was_normal
    standins.assert_all_gone(server, standins.wait_for_pids(3))


def test_the_plugins_requests_fit_the_strict_schema_and_extra_keys_get_a_400(standins) -> None:
    # trtllm-serve's request models forbid unknown keys: every key the load generator sends
    # must be one it knows, and a user's extra body field is refused, not ignored.
    standins.steer(load_s=0.1)
    with standins.server("trtllm") as server:
        request = SampleRequest(prompt="count to three", prompt_len=3, expected_output_len=3)
        config = LoadConfig(
            base_url=server.base_url,
            model="Qwen/Qwen3-32B",
            endpoint=CHAT_ENDPOINT,
            quirks=server.spec.quirks,
            temperature=0.0,
        )
        (record,) = run_load(config, [request]).records
        assert record.success, record.error
        assert record.output_tokens == 3
        extra = dataclasses.replace(config, extra_body={"chat_template_kwargs_x": 1})
        (refused,) = run_load(extra, [request]).records
        assert not refused.success
        assert refused.error.startswith("HTTP 400:")
        assert "Extra inputs are not permitted" in refused.error
        # Prometheus text is at /prometheus/metrics; /metrics is JSON, emptied by each read.
        prometheus = httpx.get(server.base_url + "/prometheus/metrics", trust_env=False)
        assert "trtllm_request_success_total" in prometheus.text
        assert len(httpx.get(server.base_url + "/metrics", trust_env=False).json()) == 2
        assert httpx.get(server.base_url + "/metrics", trust_env=False).json() == []
