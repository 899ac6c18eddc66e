"""MindIE through its stand-in daemon: config.json, management-port readiness, abort() exits."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from pytest_llmperf.engines.server import descendants
from pytest_llmperf.errors import EngineDiedError, EngineStartError


def test_ready_on_the_management_port_and_abort_after_stop_is_normal(standins) -> None:
    standins.steer(load_s=0.5)
    server = standins.server("mindie", "--enable-prefix-caching", "--max-model-len", "16384")
    ((config_path, content),) = server.plan.files.items()
    config = json.loads(content)
    management_port = config["ServerConfig"]["managementPort"]
    assert urlsplit(server.plan.health_url).port == management_port
    assert urlsplit(server.base_url).port == config["ServerConfig"]["port"] != management_port

    with server:
        assert time.time() >= standins.event_time("ready")
        started = standins.started()
        assert started["argv"][1:] == []  # the daemon takes no arguments
        assert started["config_path"] == str(config_path)
        assert started["config"] == config
        # MindIE refuses a config file that others may read (mode must not exceed 640).
        assert stat.S_IMODE(Path(config_path).stat().st_mode) == 0o640
        # It killed its own process group on exit: it must have one of its own. It called
        # setpgrp() first, which fails (exit 255) in a session leader: it must not be one.
        assert started["pid"] == server.pid == started["pgid"] != started["sid"]
        assert started["pgid"] != os.getpgrp()
        model_config = started["config"]["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
        assert model_config["modelName"] == "Qwen3-32B"  # a plain name, not the hub id's "/"
        # The business port has no health route; the management port has.
        business_health = httpx.get(server.base_url + "/health", trust_env=False)
        assert business_health.status_code == 404
        text, usage = standins.chat(server, max_tokens=3)
        assert text.split() == ["t0", "t1", "t2"]
        assert usage["completion_tokens"] == 3  # on the final chunk, as MindIE sends it
        assert server.version() is None
        metrics = httpx.get(f"http://127.0.0.1:{management_port}/metrics", trust_env=False)
        assert metrics.status_code == 200  # only with MIES_SERVICE_MONITOR_MODE=1
        recorded = standins.wait_for_pids(3)  # daemon, backend, backend worker
        assert len(recorded) == 3
    assert server.exit_code == -signal.SIGABRT
    assert server.exit_was_normal
    standins.assert_all_gone(server, recorded)


def test_abort_during_start_up_is_reported_as_a_crash(standins) -> None:
    # -6 after a requested stop is normal; the same -6 during start-up is a crash.
    standins.steer(load_s=0.3, crash=1)
    server = standins.server("mindie")
    began = time.monotonic()
    with pytest.raises(EngineStartError) as failure, server:
        pass
    assert time.monotonic() - began < 10
    assert f"MindIE exited with code {-signal.SIGABRT} during start-up" in str(failure.value)
    assert "Failed to init endpoint" in str(failure.value)
    assert server.exit_code == -signal.SIGABRT
    assert not server.exit_was_normal
    standins.assert_all_gone(server, standins.wait_for_pids(3))


def test_a_dying_backend_takes_the_daemon_down_and_is_not_a_normal_exit(standins) -> None:
    standins.steer(load_s=0.2)
    server = standins.server("mindie")
    with server:
        recorded = standins.wait_for_pids(3)
        assert server.pid is not None
        backend = min(descendants(server.pid))
        os.kill(backend, signal.SIGKILL)
        deadline = time.monotonic() + 10
        with pytest.raises(EngineDiedError) as died:  # noqa: PT012 - poll until it is seen
            while time.monotonic() < deadline:
                server.check_alive()
                time.sleep(0.05)
    assert f"exited with code {-signal.SIGABRT}" in str(died.value)
    assert not server.exit_was_normal
    standins.assert_all_gone(server, recorded)
