"""The external engine against a running server (a stand-in the test starts itself)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.session import EngineSession


def test_external_plan_reaches_a_running_server(standins) -> None:
    standins.steer(load_s=0.1)
    with standins.server("llamacpp") as running:
        spec = get_engine("external")
        plan = spec.plan(LaunchRequest(model="M", port=0, endpoint=running.base_url + "/v1/"))
        assert plan.base_url == running.base_url
        answer = httpx.get(plan.health_url, trust_env=False, timeout=5.0)
        assert spec.is_ready(answer.status_code, answer.text)
        assert answer.json()["data"][0]["id"] == "Qwen/Qwen3-32B"


def test_a_running_server_of_a_named_engine_reports_its_version_at_that_engines_path(
    standins, tmp_path: Path
) -> None:
    # SGLang reports its version at /server_info (/get_server_info in older releases), not at
    # vLLM's /version: connecting to a running SGLang must ask there, as starting one does.
    standins.steer(load_s=0.1)
    with standins.server("sglang") as running:
        settings = Settings(engines=("sglang",), endpoint=running.base_url + "/v1", model="M")
        session = EngineSession(settings, "sglang", tmp_path)
        target = session.start()
        try:
            assert target.version == "0.5.5.post1"
            assert target.command == f"(external) {running.base_url}"
        finally:
            session.stop()


@pytest.mark.parametrize("engine", ["external", "llamacpp"])
def test_a_loading_llama_server_is_not_measured_before_it_serves(
    standins, tmp_path: Path, engine: str
) -> None:
    # llama-server answers /v1/models with 200 while it loads the model; every other route,
    # /health included, answers 503 until then.
    standins.steer(load_s=2.0)
    loading = standins.server("llamacpp")
    loading.start()
    wait_for_models(loading.base_url)
    settings = Settings(engines=(engine,), endpoint=loading.base_url + "/v1", model="M")
    session = EngineSession(settings, engine, tmp_path)
    session.start()
    try:
        assert time.time() >= standins.event_time("ready")
        assert httpx.get(loading.plan.health_url, trust_env=False).status_code == 200
    finally:
        session.stop()


def test_a_warming_sglang_is_not_measured_before_it_serves(standins, tmp_path: Path) -> None:
    standins.steer(load_s=0.1, warmup_s=2.0)
    warming = standins.server("sglang")
    warming.start()
    wait_for_models(warming.base_url)
    settings = Settings(engines=("sglang",), endpoint=warming.base_url + "/v1", model="M")
    session = EngineSession(settings, "sglang", tmp_path)
    session.start()
    try:
        assert time.time() >= standins.event_time("ready")
    finally:
        session.stop()


def test_a_server_without_a_health_route_is_measured(standins, tmp_path: Path) -> None:
    # MindIE's business port has no /health (404): /v1/models answering is enough there.
    standins.steer(load_s=0.1)
    with standins.server("mindie") as running:
        assert httpx.get(running.base_url + "/health", trust_env=False).status_code == 404
        settings = Settings(engines=("mindie",), endpoint=running.base_url + "/v1", model="M")
        session = EngineSession(settings, "mindie", tmp_path)
        target = session.start()
        session.stop()
    assert target.served_model == "Qwen3-32B"


def wait_for_models(base_url: str, timeout: float = 10.0) -> None:
    """Until /v1/models answers 200 (the stand-in listens, its model may still load)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(base_url + "/v1/models", trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{base_url}/v1/models never answered")
