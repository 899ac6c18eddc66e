"""The load generator against a real vLLM server (CPU build, embedded tiny model).

vLLM sends one chunk per token while the client keeps up, and merges tokens into fewer
chunks when its engine runs ahead (on two busy cores it may send a whole answer in one,
docs/noise.md): chunk counts are bounded, never exact; the token count (usage) is exact.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.engines import get_engine
from pytest_llmperf.measure.loadgen import CHAT_ENDPOINT, COMPLETIONS_ENDPOINT, LoadConfig, run_load
from pytest_llmperf.models import RequestRecord, SampleRequest

OUTPUT_LEN = 8
PROMPT = "the quick brown fox jumps over the lazy dog"


def stream(server: object, endpoint: str) -> tuple[RequestRecord, ...]:
    config = LoadConfig(
        base_url=server.base_url,  # type: ignore[attr-defined]
        model="tiny-qwen3",
        endpoint=endpoint,
        max_concurrency=2,
        num_warmups=1,
        quirks=get_engine("vllm").quirks,
        temperature=0.0,
    )
    requests = [
        SampleRequest(prompt=f"{PROMPT} {i}", prompt_len=0, expected_output_len=OUTPUT_LEN)
        for i in range(3)
    ]
    result = run_load(config, requests)
    assert result.duration > 0
    for record in result.records:
        assert record.success, record.error
        assert record.output_tokens == OUTPUT_LEN  # usage.completion_tokens; length pinned
        assert record.prompt_len > 0  # usage.prompt_tokens replaced the client's 0
        assert record.ttft > 0
        assert record.latency >= record.ttft
        assert record.latency == pytest.approx(record.ttft + sum(record.itl))
        assert len(record.itl) == record.chunks - 1
        assert record.queue_time >= 0
    return result.records


@pytest.mark.e2e
def test_completions_stream_from_vllm(vllm_server: object) -> None:
    for record in stream(vllm_server, COMPLETIONS_ENDPOINT):
        assert 1 <= record.chunks <= OUTPUT_LEN  # at most one chunk per token


@pytest.mark.e2e
def test_chat_stream_from_vllm_starts_with_the_role_chunk(vllm_server: object) -> None:
    chat = stream(vllm_server, CHAT_ENDPOINT)
    completions = stream(vllm_server, COMPLETIONS_ENDPOINT)
    for record in chat:
        # The role chunk comes alone, first, and counts as the first token; then at least
        # one content chunk.
        assert 2 <= record.chunks <= OUTPUT_LEN + 1
        assert len(record.itl) == record.chunks - 1
        assert record.itl[0] < record.ttft  # first content right after the role chunk
    # The server counts the chat template's tokens too.
    assert all(c.prompt_len > p.prompt_len for c, p in zip(chat, completions, strict=True))
