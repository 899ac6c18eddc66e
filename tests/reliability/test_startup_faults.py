"""Start-up faults: each is a clear error within seconds that names its cause, and no
process is left behind.

The engine binary is missing; the model folder is missing or broken; the engine does not
become ready in time; the port it is to serve on is taken. Every later test of the session
fails with the same error at once (the session fixture keeps the failure).
"""

from __future__ import annotations

import json
import socket
import textwrap
import time
from pathlib import Path

import pytest

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.server import EngineServer
from pytest_llmperf.errors import EngineStartError
from tests.conftest import VLLM_TEST_ENV, requires_vllm
from tests.reliability.helpers import (
    file_hashes,
    kill_all,
    leftover_processes,
    make_project,
    run_pytest,
    seed_baseline,
)

TWO_TESTS = textwrap.dedent(
    """
    def test_first(llmperf):
        llmperf.check()

    def test_second(llmperf):
        llmperf.check()
    """
)
# Another process takes the port the plugin picked, before the engine binds it.
PORT_THIEF_TESTS = (
    textwrap.dedent(
        """
    import socket
    from pytest_llmperf.engines import session
    from pytest_llmperf.measure import run

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    session.free_port = lambda host="127.0.0.1": held.getsockname()[1]
    """
    )
    + TWO_TESTS
)
ENGINE_ARGS = ["--engine=vllm", "--hardware=cpu", "--llmperf-profile=tiny", "--update-baselines"]


def _run(tmp_path: Path, extra: list[str], timeout: float = 600) -> tuple[str, float, list[int]]:
    project = make_project(tmp_path, TWO_TESTS)
    seed_baseline(project.baseline_file("tiny-qwen3", "vllm"), {"tiny": 100.0})
    before = file_hashes(project.baselines)
    run = run_pytest(project, [*ENGINE_ARGS, "--basetemp=tmp", *extra], timeout=timeout)
    leftovers = leftover_processes(run.token)
    kill_all(leftovers)
    assert run.returncode == 1, run.log
    assert "2 errors" in run.output or "2 failed" in run.output, run.log
    assert file_hashes(project.baselines) == before
    return run.output, run.seconds, leftovers


def test_missing_engine_binary(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "vllm"
    output, seconds, leftovers = _run(tmp_path, [f"--llmperf-engine-bin={missing}"])
    assert f"vLLM: executable '{missing}' not found" in output
    assert "install the engine or point --llmperf-engine-bin at it" in output
    assert output.count("not found; install the engine") >= 2  # the second test too
    assert seconds < 30
    assert leftovers == []


def test_missing_model_folder_is_named_before_anything_starts(tmp_path: Path) -> None:
    missing = tmp_path / "models" / "Qwen3-32B"
    output, seconds, leftovers = _run(tmp_path, [f"--model={missing}"])
    assert f"--model {missing}: no such file or folder" in output
    assert seconds < 30
    assert leftovers == []


@pytest.mark.e2e
@requires_vllm
def test_broken_model_folder_fails_with_the_engines_own_error(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    broken = tmp_path / "broken-model"
    broken.mkdir()
    for item in tiny_model_dir.iterdir():
        if item.is_file():
            (broken / item.name).write_bytes(item.read_bytes())
    (broken / "config.json").write_text('{"model_type": "qwen3", "hidden_size": ')  # cut off
    output, seconds, leftovers = _run(tmp_path, [f"--model={broken}"])
    assert "vLLM exited with code" in output
    assert "during start-up" in output
    assert "last lines:" in output
    assert "config.json" in output or "JSONDecodeError" in output or "Expecting value" in output
    print(f"broken model reported after {seconds:.1f} s (pytest start included)")
    assert seconds < 300  # vLLM's import is most of it; the start-up timeout is 900 s
    assert leftovers == []


@pytest.mark.e2e
@requires_vllm
def test_readiness_timeout_names_the_option_and_stops_the_engine(tmp_path: Path) -> None:
    output, seconds, leftovers = _run(tmp_path, ["--llmperf-startup-timeout=4"])
    assert "vLLM was not ready after 4 s" in output
    assert "raise --llmperf-startup-timeout if the model is large" in output
    assert "last lines:" in output
    print(f"readiness timeout reported after {seconds:.1f} s (pytest start included)")
    assert seconds < 60
    assert leftovers == [], "the engine that was still starting must be stopped"


def test_port_already_taken_is_named_at_once(tmp_path: Path, tiny_model_dir: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        spec = get_engine("vllm")
        plan = spec.plan(LaunchRequest(model=str(tiny_model_dir), port=port))
        plan = type(plan)(
            argv=plan.argv,
            base_url=plan.base_url,
            health_url=plan.health_url,
            env={**plan.env, **VLLM_TEST_ENV},
        )
        server = EngineServer(spec, plan, tmp_path / "server.log", startup_timeout=600)
        started = time.monotonic()
        with pytest.raises(EngineStartError) as caught:
            server.start()  # checked before the engine is launched
        elapsed = time.monotonic() - started
        server.stop()
    message = str(caught.value)
    assert f"port {port} on 127.0.0.1 is already in use" in message
    assert elapsed < 2
    assert server.pid is None, "nothing was started"


def test_port_taken_through_the_plugin(tmp_path: Path) -> None:
    """The plugin picks a free port; when another process takes it first, the test says so."""
    project = make_project(tmp_path, PORT_THIEF_TESTS)
    run = run_pytest(project, [*ENGINE_ARGS, "--basetemp=tmp"], timeout=120)
    leftovers = leftover_processes(run.token)
    kill_all(leftovers)
    assert run.returncode == 1, run.log
    assert "is already in use by another process" in run.output, run.log
    assert run.seconds < 30, run.log
    assert leftovers == []
    assert json.dumps(file_hashes(project.baselines)) == "{}"
