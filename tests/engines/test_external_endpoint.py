"""The external engine against a running server (a stand-in the test starts itself)."""

from __future__ import annotations

from pathlib import Path

import httpx

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.runner import EngineSession
from pytest_llmperf.settings import Settings


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
    # SGLang reports its version at /get_server_info, not at vLLM's /version: connecting to
    # a running SGLang must ask there, as starting one does.
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
