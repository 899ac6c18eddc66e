"""The engine lifecycle against a real vLLM (CPU build) serving the embedded tiny model.

These tests start their own servers (not the shared session one) because what they check is
the start and the stop: readiness, crash detection, and that no process of the group is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.server import EngineServer, descendants, group_members
from pytest_llmperf.engines.warden import is_alive
from pytest_llmperf.errors import EngineStartError
from tests.conftest import TINY_MODEL_NAME, VLLM_TEST_ENV, free_port, requires_vllm, start_vllm
from tests.support.files import wait_for_file
from tests.support.processes import command_line, default_sigint, wait_gone

pytestmark = [pytest.mark.e2e, requires_vllm]


def _stream(client: httpx.Client, url: str, body: dict[str, object]) -> list[dict[str, object]]:
    events = []
    with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: ") :]))
    return events


def test_stream_chat_and_completion_then_stop_leaves_nothing(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    server = start_vllm(tiny_model_dir, tmp_path / "server.log")
    leader = server.pid
    assert leader is not None
    children = descendants(leader)
    assert children, "vLLM runs its engine core in child processes"
    engine_tmp = server.scratch_folder
    assert engine_tmp is not None
    # vLLM's sockets and rendezvous file are in the engine's own folder (engines/scratch.py),
    # not in the system's, where they used to stay after every stop.
    left_there = {p.name for p in engine_tmp.iterdir()}
    assert any(name.startswith("vllm_dist_") for name in left_there), left_there
    assert any(p.is_socket() for p in engine_tmp.iterdir()), left_there
    try:
        with httpx.Client(base_url=server.base_url, timeout=60, trust_env=False) as client:
            chat = _stream(
                client,
                "/v1/chat/completions",
                {
                    "model": TINY_MODEL_NAME,
                    "messages": [{"role": "user", "content": "How fast is this server?"}],
                    "max_completion_tokens": 8,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            )
            completion = _stream(
                client,
                "/v1/completions",
                {
                    "model": TINY_MODEL_NAME,
                    "prompt": "The quick brown fox",
                    "max_tokens": 8,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            )
    finally:
        server.stop()
    assert chat[-1]["usage"]["completion_tokens"] == 8  # type: ignore[index]
    assert completion[-1]["usage"]["completion_tokens"] == 8  # type: ignore[index]
    # One chunk per token, or fewer when vLLM merges tokens (docs/noise.md); the text of the
    # chunks together is the 8 tokens either way.
    token_chunks = [e for e in completion if e.get("choices")]
    assert 1 <= len(token_chunks) <= 8
    assert server.exit_was_normal, f"exit code {server.exit_code}"
    assert group_members(leader) == set()
    assert server.leftover_pids() == set()
    assert not [pid for pid in children if is_alive(pid)]
    assert not engine_tmp.exists()


def test_broken_model_path_fails_fast_with_the_engines_error(tmp_path: Path) -> None:
    spec = get_engine("vllm")
    missing = tmp_path / "no-such-model"
    plan = spec.plan(LaunchRequest(model=str(missing), port=free_port()))
    plan = type(plan)(
        argv=plan.argv,
        base_url=plan.base_url,
        health_url=plan.health_url,
        env={**plan.env, **VLLM_TEST_ENV},
    )
    timeout = 600.0
    server = EngineServer(spec, plan, tmp_path / "server.log", startup_timeout=timeout)
    started = time.monotonic()
    server.start()
    with pytest.raises(EngineStartError) as caught:
        server.wait_ready()
    elapsed = time.monotonic() - started
    message = str(caught.value)
    print(f"broken model path reported after {elapsed:.1f} s (timeout {timeout:.0f} s)")
    assert elapsed < timeout / 5
    assert "exited with code" in message
    # The engine's own error line, as it wrote it to its log, is part of the message.
    log_lines = (tmp_path / "server.log").read_text(errors="replace").splitlines()
    error_lines = [line for line in log_lines if "Error" in line and str(missing) in line]
    assert error_lines, "vLLM names the missing path in its error"
    assert error_lines[-1].strip() in message
    assert server.leftover_pids() == set()


SIGINT_TEST = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    def test_hold_the_engine(llmperf_target):
        Path(os.environ["LLMPERF_MARKER"]).write_text(str(llmperf_target.server.pid))
        time.sleep(600)
    """
)


def _pytest_holding_an_engine(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, set[int]]:
    """A pytest process whose test holds a running engine; returns it with the engine's
    leader pid and the whole family of engine processes."""
    (tmp_path / "test_hold.py").write_text(SIGINT_TEST)
    marker = tmp_path / "engine.pid"
    env = {**os.environ, **VLLM_TEST_ENV, "LLMPERF_MARKER": str(marker)}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_hold.py"), "--engine=vllm",
         "--hardware=cpu", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-q"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        assert wait_for_file(marker, 300, writer=child, interval=0.5), "the engine never came up"
        engine_pid = int(marker.read_text())
        family = {engine_pid, *descendants(engine_pid)}
        assert len(family) > 1, "vLLM runs its engine core in child processes"
    except BaseException:
        child.kill()
        child.wait()
        raise
    return child, engine_pid, family


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupting_pytest_stops_the_engine(tmp_path: Path, sig: signal.Signals) -> None:
    child, engine_pid, engine_family = _pytest_holding_an_engine(tmp_path)
    try:
        child.send_signal(sig)
        output = child.communicate(timeout=120)[0].decode(errors="replace")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    survivors = [pid for pid in engine_family if is_alive(pid)]
    assert survivors == [], output
    assert group_members(engine_pid) == set()


def test_engine_follows_a_killed_pytest(tmp_path: Path) -> None:
    """SIGKILL runs no teardown: the engine must notice its parent died and shut down."""
    child, _, family = _pytest_holding_an_engine(tmp_path)
    child.kill()
    child.communicate()
    leftovers = wait_gone(family, timeout=90, interval=0.5)
    for pid in leftovers:  # do not leave them for the next test, then fail
        os.kill(pid, signal.SIGKILL)
    assert leftovers == []


def test_engine_follows_a_pytest_killed_while_the_engine_starts(tmp_path: Path) -> None:
    """Killed during start-up, vLLM once swallowed the death signal's SIGTERM and served on
    with no pytest left; the warden (server.py) stops it regardless."""
    (tmp_path / "test_hold.py").write_text(SIGINT_TEST)
    env = {**os.environ, **VLLM_TEST_ENV, "LLMPERF_MARKER": str(tmp_path / "ready")}
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(tmp_path / "test_hold.py"), "--engine=vllm",
         "--hardware=cpu", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-q"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=default_sigint,
    )  # fmt: skip
    family: set[int] = set()
    try:
        # Wait until the engine runs its engine core (loading the model), not yet serving.
        deadline = time.monotonic() + 120
        while len(family) < 2:
            assert child.poll() is None, child.communicate()[0].decode(errors="replace")
            assert time.monotonic() < deadline, "the engine never started its engine core"
            servers = [
                p for p in descendants(child.pid) if "api_server" in " ".join(command_line(p))
            ]
            family = {servers[0], *descendants(servers[0])} if servers else set()
            time.sleep(0.2)
        assert not (tmp_path / "ready").exists(), "killed during start-up, not after"
        child.kill()
        child.communicate()
        wait_gone(family, timeout=90, interval=0.5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    leftovers = wait_gone(family, timeout=0)
    for pid in leftovers:  # do not leave them for the next test, then fail
        os.kill(pid, signal.SIGKILL)
    assert leftovers == []
