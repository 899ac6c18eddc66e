"""The external engine against a running server (a stand-in the test starts itself)."""

from __future__ import annotations

import httpx

from pytest_llmperf.engines import LaunchRequest, get_engine


def test_external_plan_reaches_a_running_server(standins) -> None:
    standins.steer(load_s=0.1)
    with standins.server("llamacpp") as running:
        spec = get_engine("external")
        plan = spec.plan(LaunchRequest(model="M", port=0, endpoint=running.base_url + "/v1/"))
        assert plan.base_url == running.base_url
        answer = httpx.get(plan.health_url, trust_env=False, timeout=5.0)
        assert spec.is_ready(answer.status_code, answer.text)
        assert answer.json()["data"][0]["id"] == "Qwen/Qwen3-32B"
