"""SGLang through its stand-in: ready on /health (not /v1/models), -9 after a stop is normal."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from pytest_llmperf.errors import EngineStartError


def test_ready_only_when_health_answers_after_warm_up(standins) -> None:
    # The scheduler is re-parented and ignores SIGTERM: only the process-group kill reaches it.
    standins.steer(load_s=0.3, warmup_s=1.5, stubborn_child=1)
    server = standins.server("sglang")
    assert server.plan.health_url == server.base_url + "/health"
    server.start()

    # Watch from outside: /v1/models answers 200 while /health still answers 503.
    seen = None
    deadline = time.monotonic() + 10
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while seen is None and time.monotonic() < deadline:
            try:
                if client.get(server.base_url + "/v1/models").status_code == 200:
                    seen = client.get(server.plan.health_url).status_code
            except httpx.TransportError:
                time.sleep(0.02)
    assert seen == 503

    server.wait_ready()
    assert time.time() >= standins.event_time("ready")

    started = standins.started()
    assert started["argv"][1:] == list(server.plan.argv[3:])  # after python3 -m sglang.…
    assert started["pid"] == server.pid == started["pgid"] != started["sid"]
    assert started["pgid"] != os.getpgrp()
    text, usage = standins.chat(server, max_tokens=4)
    assert text.split() == ["t0", "t1", "t2", "t3"]
    assert usage["completion_tokens"] == 4
    assert server.version() == "0.5.5.post1"
    asked = [r for r in standins.requests() if "server_info" in r]
    assert asked == ["GET /server_info"]  # not the deprecated /get_server_info

    recorded = standins.wait_for_pids(3)  # launcher, detokenizer, re-parented scheduler
    assert len(recorded) == 3
    assert server.stop() == -9  # SGLang SIGKILLs itself after a requested stop
    assert server.exit_was_normal
    standins.assert_all_gone(server, recorded)


def test_crash_during_start_up_is_reported_with_the_log_tail(standins) -> None:
    standins.steer(load_s=0.3, crash=1)
    server = standins.server("sglang")
    began = time.monotonic()
    with pytest.raises(EngineStartError) as failure, server:
        pass
    assert time.monotonic() - began < 10
    message = str(failure.value)
    assert "SGLang exited with code 1 during start-up" in message
    assert "CUDA out of memory" in message
    assert not server.exit_was_normal
    # The children it left behind were killed with its process group.
    standins.assert_all_gone(server, standins.wait_for_pids(3))
