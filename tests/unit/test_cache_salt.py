"""vLLM runs are kept apart by a per-run cache salt, never by vLLM's dev mode."""

from __future__ import annotations

from pathlib import Path

from pytest_llmperf.config import Settings
from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.session import plan_launch
from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, LoadConfig, request_payload
from pytest_llmperf.measure.run import salted
from pytest_llmperf.models import SampleRequest


def test_a_started_vllm_never_gets_dev_mode(tmp_path: Path) -> None:
    settings = Settings(engines=("vllm",), model=str(tmp_path))
    _, plan, _ = plan_launch(settings, "vllm", tmp_path / "config")
    assert "VLLM_SERVER_DEV_MODE" not in plan.env


def test_each_vllm_run_gets_its_own_salt_and_the_same_prompt() -> None:
    config = LoadConfig(base_url="http://h", model="m", endpoint=CHAT_ENDPOINT)
    request = SampleRequest(prompt="token exact", prompt_len=2, expected_output_len=3)
    first, second = salted(config, get_engine("vllm")), salted(config, get_engine("vllm"))
    salts = {first.extra_body["cache_salt"], second.extra_body["cache_salt"]}
    assert len(salts) == 2
    assert all(len(s) == 32 for s in salts)
    body = request_payload(first, request)
    assert body["messages"] == request_payload(config, request)["messages"]
    assert body["cache_salt"] == first.extra_body["cache_salt"]


def test_engines_without_a_salt_get_the_request_unchanged() -> None:
    config = LoadConfig(base_url="http://h", model="m")
    assert salted(config, get_engine("sglang")) is config
    assert salted(config, get_engine("external")) is config
