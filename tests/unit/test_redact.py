"""Masking credentials in what the plugin shows, and the API key's edges."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from pytest_llmperf import redact
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.http1 import _request_head


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    redact.forget_all()
    yield
    redact.forget_all()


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--api-key", "k1", "--port", "8"], ["--api-key", "***", "--port", "8"]),
        (["--api-key", "k1", "k2", "--x"], ["--api-key", "***", "***", "--x"]),
        (["--api-key=k1"], ["--api-key=***"]),
        (["--hf-token", "hf_x", "--HF_TOKEN=y"], ["--hf-token", "***", "--HF_TOKEN=***"]),
        (["--ssl-keyfile-password", "p"], ["--ssl-keyfile-password", "***"]),
        # counts and tokenizers are no credentials
        (["--max-num-batched-tokens", "8192", "--tokenizer", "t"],
         ["--max-num-batched-tokens", "8192", "--tokenizer", "t"]),
        (["--endpoint=http://u:p@h:1/v1"], ["--endpoint=http://***@h:1/v1"]),
        (["--engine-args", "--api-key k1 --max-num-seqs 2"],
         ["--engine-args", "--api-key '***' --max-num-seqs 2"]),
        (["--engine-args=--hf-token=t1"], ["--engine-args='--hf-token=***'"]),
    ],
)  # fmt: skip
def test_argv_masks_secret_options_and_url_userinfo(args: list[str], shown: list[str]) -> None:
    assert redact.argv(args) == shown


def test_remembered_values_are_masked_anywhere_in_text() -> None:
    redact.remember("s3cret-value", "abc", None)  # too short to replace by value: ignored
    assert redact.text("401: got s3cret-value; abc") == "401: got ***; abc"
    assert redact.text("see https://me:pw@host/x") == "see https://***@host/x"


def test_settings_secrets_are_remembered() -> None:
    from pytest_llmperf.config import Settings

    settings = Settings(
        engines=("vllm",),
        engine_args=("--api-key", "argkey-123456"),
        endpoint="https://user:urlpass-123456@host/v1",
        api_key_env="MY_KEY",
    )
    redact.remember_settings(settings, {"MY_KEY": " envkey-123456\n"})
    assert redact.text("argkey-123456 urlpass-123456 envkey-123456") == "*** *** ***"


def test_api_key_is_stripped_and_control_characters_are_refused() -> None:
    assert redact.api_key("K", {"K": "  sk-abc123\n"}) == "sk-abc123"
    assert redact.api_key("K", {"K": "  "}) is None
    assert redact.api_key("K", {}) is None
    with pytest.raises(ConfigError, match="control character") as caught:
        redact.api_key("K", {"K": "sk-abc\r\nX-Admin: 1"})
    assert "sk-abc" not in str(caught.value)


def test_key_and_headers_never_show_in_a_repr() -> None:
    key = redact.api_key("K", {"K": "sk-abcdef123"})
    headers = redact.auth_headers(key)
    assert headers["Authorization"] == "Bearer sk-abcdef123"
    assert "sk-abcdef123" not in repr(key) + repr(headers) + repr({"k": key, "h": headers})
    assert f"{key}" == "sk-abcdef123"  # the value itself is intact


@pytest.mark.parametrize("name", ["LLMPERF_KEY", "OPENAI_API_KEY", "_X1"])
def test_variable_names_are_accepted(name: str) -> None:
    assert redact.looks_like_variable_name(name)


@pytest.mark.parametrize(
    "name",
    ["hf_AbCdEfGhIjKl", "ghp_abcdefghijklmnop", "sk_live_abcdef", "github_pat_11AB",
     "sk-proj-abc", "AbCdEf0123456789AbCdEf0123", "has space", "1ABC"],
)  # fmt: skip
def test_token_looking_names_are_refused(name: str) -> None:
    assert not redact.looks_like_variable_name(name)


def test_a_line_break_in_a_header_is_never_written_raw() -> None:
    request = httpx.Request("POST", "http://h/v1", headers={"X-Key": "a\r\nX-Admin: 1"})
    with pytest.raises(httpx.LocalProtocolError, match="X-Key"):
        _request_head(request, 0)
    plain = httpx.Request("POST", "http://h/v1", headers={"X-Key": "a\tb"})
    assert b"X-Key: a\tb\r\n" in _request_head(plain, 0)
