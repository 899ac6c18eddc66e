"""The engine lifecycle and token-exact prompts against a real llama-server (llama.cpp) serving
the embedded tiny model as GGUF.

llama-server starts in about a second with the tiny model, so each lifecycle test starts its
own; the request tests share one server.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.server import EngineServer, group_members
from pytest_llmperf.errors import EngineStartError
from pytest_llmperf.measure.datasets import build_requests, load_tokenizer
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.models import RequestRecord, SampleRequest
from tests.conftest import TINY_MODEL_NAME
from tests.support.llama_server import llama_server, requires_llama_server
from tests.support.processes import wait_gone

pytestmark = [pytest.mark.e2e, requires_llama_server]

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


@pytest.fixture(scope="session")
def tiny_gguf(tiny_model_dir: Path) -> Path:
    from pytest_llmperf.engines.tinymodel.gguf_file import ensure_tiny_gguf

    return ensure_tiny_gguf(tiny_model_dir.parent)


@pytest.fixture(scope="module")
def shared_server(
    tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EngineServer]:
    with llama_server(tiny_gguf, tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


def _stream(base_url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = []
    with (
        httpx.Client(base_url=base_url, timeout=60, trust_env=False) as client,
        client.stream("POST", path, json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: ") :]))
    return events


def _poll_health(url: str, seen: list[int], stop: threading.Event) -> None:
    """Record every /health status until the first 200 (or until told to stop)."""
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while not stop.is_set():
            try:
                seen.append(client.get(url).status_code)
            except httpx.TransportError:
                pass  # not listening yet
            if seen and seen[-1] == 200:
                return
            time.sleep(0.005)  # often enough to see a load of a few tens of milliseconds


def test_ready_only_after_loading(tiny_gguf: Path, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    # The tiny model sometimes loads in under a millisecond, too fast to be seen; a 128 MB KV
    # cache (the last --ctx-size wins) keeps loading going for a tenth of a second or more.
    server = llama_server(tiny_gguf, log, "--ctx-size", "262144")
    seen: list[int] = []
    stop = threading.Event()
    poller = threading.Thread(target=_poll_health, args=(server.plan.health_url, seen, stop))
    server.start()
    poller.start()
    try:
        server.wait_ready()
        loaded = "model loaded" in log.read_text(errors="replace")
    finally:
        stop.set()
        poller.join()
        server.stop()
    # llama-server listens before it loads the model and answers 503 meanwhile.
    assert seen, "the poller never got an answer"
    assert seen[0] == 503, f"statuses before ready: {sorted(set(seen))}"
    assert set(seen) <= {503, 200}
    assert loaded, "wait_ready returned before llama-server logged 'model loaded'"


def test_streams_exact_lengths_with_usage(shared_server: EngineServer) -> None:
    """ignore_eos and max_tokens are honoured on both endpoints; usage ends the stream."""
    common = {"ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    chat = _stream(
        shared_server.base_url,
        CHAT,
        {
            "model": TINY_MODEL_NAME,
            "messages": [{"role": "user", "content": "How fast is this server?"}],
            "max_tokens": 8,
            **common,
        },
    )
    completion = _stream(
        shared_server.base_url,
        COMPLETIONS,
        {"model": TINY_MODEL_NAME, "prompt": "The quick brown fox", "max_tokens": 8, **common},
    )
    for events in (chat, completion):
        assert events[-1]["usage"]["completion_tokens"] == 8
        finishes = [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]]
        assert finishes == ["length"]
    # Where usage comes differs by endpoint in this build: on chat a chunk of its own (as vLLM
    # sends it), on completions together with the finishing choice. A reader that takes usage
    # only from choice-less chunks misses the latter.
    assert chat[-1]["choices"] == []
    assert [c["finish_reason"] for c in completion[-1]["choices"]] == ["length"]


def test_version_is_the_build(shared_server: EngineServer) -> None:
    version = shared_server.version()
    assert version, "GET /props gave no build_info"
    assert re.fullmatch(r"b\d+-\w+", version), version  # build number and commit


def test_metrics_endpoint(shared_server: EngineServer) -> None:
    """The embedded arguments include --metrics: Prometheus text at /metrics."""
    answer = httpx.get(f"{shared_server.base_url}/metrics", timeout=10, trust_env=False)
    assert answer.status_code == 200
    assert "llamacpp:prompt_tokens_total" in answer.text


def _send(base_url: str, endpoint: str, requests: list[SampleRequest]) -> list[RequestRecord]:
    from pytest_llmperf.measure.loadgen import LoadConfig, run_load

    config = LoadConfig(
        base_url=base_url,
        model=TINY_MODEL_NAME,
        endpoint=endpoint,
        seed=0,
        quirks=get_engine("llamacpp").quirks,
    )
    records = run_load(config, requests).records
    failed = [r.error for r in records if not r.success]
    assert not failed, failed[:3]
    return list(records)


def test_tokenizes_like_the_safetensors_tokenizer(
    shared_server: EngineServer, tiny_model_dir: Path
) -> None:
    """The GGUF's tokenizer gives the same ids as tokenizer.json: the prompts the plugin
    builds are token-exact on llama.cpp too."""
    tok = load_tokenizer(str(tiny_model_dir))
    texts = [r.prompt for r in build_requests(builtin_profiles()["short"].scaled(8), tok)]
    texts += ["Hello,  world!\n\n  It's 12345 tokens.\t", " leading space", "trailing  "]
    with httpx.Client(base_url=shared_server.base_url, timeout=30, trust_env=False) as client:
        for text in texts:
            answer = client.post("/tokenize", json={"content": text, "add_special": False})
            assert answer.json()["tokens"] == tok.encode(text), repr(text[:80])


# llama-server sends usage on /v1/completions with the finishing choice, not in a chunk of its
# own: the reader takes usage from any chunk (issue 15, item 4), or output tokens would be
# counted from chunks, and a chunk can hold several tokens (llama-server holds back incomplete
# UTF-8).
@pytest.mark.parametrize("endpoint", [CHAT, COMPLETIONS])
def test_medium_profile_is_token_exact(
    shared_server: EngineServer, tiny_model_dir: Path, endpoint: str
) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    requests = build_requests(builtin_profiles()["medium"].scaled(4), tok)
    records = _send(shared_server.base_url, endpoint, requests)
    prompt_lens = [r.prompt_len for r in records]  # the server's usage.prompt_tokens
    if endpoint == COMPLETIONS:
        assert prompt_lens == [2000] * 4
    else:  # the chat template's tokens on top, the same for every prompt
        assert len(set(prompt_lens)) == 1
        assert prompt_lens[0] > 2000
    assert [r.output_tokens for r in records] == [100] * 4


def test_stop_leaves_no_process(tiny_gguf: Path, tmp_path: Path) -> None:
    server = llama_server(tiny_gguf, tmp_path / "server.log")
    server.start()
    server.wait_ready()
    leader = server.pid
    assert leader is not None
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 10
    assert server.exit_was_normal, f"exit code {server.exit_code}"
    assert group_members(leader) == set()
    assert server.leftover_pids() == set()
    assert wait_gone([leader], timeout=1) == []


def test_crash_during_start_up_is_reported_with_the_log_tail(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))  # the magic, then no valid header
    server = llama_server(broken, tmp_path / "server.log")
    began = time.monotonic()
    with pytest.raises(EngineStartError) as failure, server:
        pass
    elapsed = time.monotonic() - began
    message = str(failure.value)
    assert elapsed < 10, f"reported after {elapsed:.1f} s"
    assert "llama.cpp exited with code" in message
    # The loader's own complaint, as llama-server wrote it to its log, is in the message.
    assert "failed to load model" in message or "error loading model" in message, message
    assert server.leftover_pids() == set()
