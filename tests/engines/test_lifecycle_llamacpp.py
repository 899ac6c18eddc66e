"""llama.cpp through its stand-in: 503 "Loading model" is not ready; one process; exit 0."""

from __future__ import annotations

import time

import httpx
import pytest

from pytest_llmperf.errors import EngineStartError


def test_loading_model_503_is_not_ready(standins) -> None:
    standins.steer(load_s=1.5)
    server = standins.server("llamacpp", "-c", "4096")
    server.start()

    answer = None
    deadline = time.monotonic() + 10
    while answer is None and time.monotonic() < deadline:
        try:
            answer = httpx.get(server.plan.health_url, timeout=2.0, trust_env=False)
        except httpx.TransportError:
            time.sleep(0.02)
    assert answer is not None
    assert answer.status_code == 503
    assert answer.json()["error"]["message"] == "Loading model"
    assert not server.spec.is_ready(answer.status_code, answer.text)

    server.wait_ready()
    assert time.time() >= standins.event_time("ready")
    assert standins.started()["argv"][1:] == list(server.plan.argv[1:])
    text, usage = standins.chat(server, max_tokens=2)
    assert text.split() == ["t0", "t1"]
    assert usage["completion_tokens"] == 2  # on the final chunk, as llama-server sends it
    assert server.version() == "b6123-5tand1n"
    recorded = standins.pids()
    assert len(recorded) == 1
    assert server.stop() == 0
    assert server.exit_was_normal
    standins.assert_all_gone(server, recorded)


def test_crash_during_start_up_is_reported_with_the_log_tail(standins) -> None:
    standins.steer(load_s=0.3, crash=1)
    server = standins.server("llamacpp")
    began = time.monotonic()
    with pytest.raises(EngineStartError) as failure, server:
        pass
    assert time.monotonic() - began < 10
    assert "llama.cpp exited with code 1 during start-up" in str(failure.value)
    assert "exiting due to model loading error" in str(failure.value)
    assert not server.exit_was_normal
    standins.assert_all_gone(server, standins.pids())
