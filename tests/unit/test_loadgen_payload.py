"""Request bodies (metrics-spec §5) and LoadConfig validation, without a server."""

from __future__ import annotations

import math

import pytest

from pytest_llmperf.engines.base import RequestQuirks
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.loadgen import (
    CHAT_ENDPOINT,
    COMPLETIONS_ENDPOINT,
    LoadConfig,
    request_payload,
)
from pytest_llmperf.models import SampleRequest

REQUEST = SampleRequest(prompt="hello there", prompt_len=2, expected_output_len=17)


def config(**kw: object) -> LoadConfig:
    return LoadConfig(base_url="http://127.0.0.1:9", model="tiny", **kw)  # type: ignore[arg-type]


def test_completions_body() -> None:
    assert request_payload(config(endpoint=COMPLETIONS_ENDPOINT), REQUEST) == {
        "model": "tiny",
        "prompt": "hello there",
        "max_tokens": 17,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "min_tokens": 17,
    }


def test_chat_body_has_content_as_a_list_of_text_parts() -> None:
    assert request_payload(config(endpoint=CHAT_ENDPOINT), REQUEST) == {
        "model": "tiny",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
        "max_completion_tokens": 17,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "min_tokens": 17,
    }


def test_chat_max_tokens_field_follows_the_quirks() -> None:
    quirks = RequestQuirks(chat_max_tokens_field="max_tokens")
    body = request_payload(config(endpoint=CHAT_ENDPOINT, quirks=quirks), REQUEST)
    assert body["max_tokens"] == 17
    assert "max_completion_tokens" not in body


def test_engines_without_ignore_eos_or_min_tokens_get_neither() -> None:
    quirks = RequestQuirks(supports_ignore_eos=False, supports_min_tokens=False)
    body = request_payload(config(quirks=quirks), REQUEST)
    assert "ignore_eos" not in body
    assert "min_tokens" not in body


def test_a_request_free_to_stop_pins_nothing() -> None:
    free = SampleRequest(prompt="x", prompt_len=1, expected_output_len=5, ignore_eos=False)
    body = request_payload(config(), free)
    assert "ignore_eos" not in body
    assert "min_tokens" not in body
    assert body["max_tokens"] == 5


def test_temperature_only_when_set() -> None:
    assert "temperature" not in request_payload(config(), REQUEST)
    assert request_payload(config(temperature=0.0), REQUEST)["temperature"] == 0.0


def test_extra_body_is_merged_last_and_wins() -> None:
    body = request_payload(config(extra_body={"max_tokens": 3, "top_k": 1}), REQUEST)
    assert body["max_tokens"] == 3
    assert body["top_k"] == 1


def test_api_key_is_not_in_repr() -> None:
    cfg = config(api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(cfg)
    assert "sk-very-secret" not in str(request_payload(cfg, REQUEST))


def test_url_joins_base_and_endpoint() -> None:
    cfg = LoadConfig(base_url="http://h:1/", model="m", endpoint=CHAT_ENDPOINT)
    assert cfg.url == "http://h:1/v1/chat/completions"
    assert cfg.chat
    assert not config().chat


@pytest.mark.parametrize(
    "bad",
    [
        {"endpoint": "/v1/embeddings"},
        {"request_rate": 0.0},
        {"burstiness": -1.0},
        {"max_concurrency": 0},
        {"num_warmups": -1},
        {"request_timeout": 0.0},
    ],
)
def test_bad_values_are_refused_with_config_error(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        config(**bad)


def test_defaults_match_vllm_bench_serve() -> None:
    cfg = config()
    assert cfg.endpoint == COMPLETIONS_ENDPOINT
    assert math.isinf(cfg.request_rate)
    assert cfg.burstiness == 1.0
    assert cfg.max_concurrency is None
    assert cfg.num_warmups == 0
    assert cfg.temperature is None
