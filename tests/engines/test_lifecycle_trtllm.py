"""TensorRT-LLM through its stand-in: refused until loaded, 128 + signal after a stop."""

from __future__ import annotations

import time

import pytest

from pytest_llmperf.errors import EngineStartError


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
