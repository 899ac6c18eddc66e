"""The prefix-cache reset between warm-up and measurement, as each engine's spec describes it.

An answer that reports success in a flag (``{"success": false}`` while blocks are held, an
empty 200 from older releases, as vLLM's dev-only route answers) comes from a small server in
the test; SGLang and llama.cpp are their stand-ins. vLLM itself is salted, not reset.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from pytest_llmperf.engines import get_engine, session
from pytest_llmperf.engines.base import (
    CacheReset,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    ResetAnswer,
)
from pytest_llmperf.engines.session import Target, reset_prefix_cache


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "RESET_RETRY_PAUSES", (0.01, 0.01, 0.01))


def target(engine: str, base_url: str) -> Target:
    return Target(
        engine=engine,
        spec=get_engine(engine),
        base_url=base_url,
        served_model="m",
        model="m",
        command="",
        version=None,
    )


class Answers(BaseHTTPRequestHandler):
    """Answers POST /reset_prefix_cache with the next of ``server.answers`` (the last repeats)."""

    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def do_POST(self) -> None:
        self.server.paths.append(self.path)
        status, body = self.server.answers[
            min(len(self.server.paths), len(self.server.answers)) - 1
        ]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def vllm_like() -> Iterator[ThreadingHTTPServer]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    server.paths = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


FALSE = (200, json.dumps({"success": False}))
TRUE = (200, json.dumps({"success": True}))


class FlaggedReset(EngineSpec):
    """An engine whose reset answers 200 with a success flag, and nothing in old releases
    (what vLLM's dev-only POST /reset_prefix_cache does; the plugin salts vLLM's cache
    instead, but other engines answer the same way)."""

    name = "flagged"
    cache_reset: ClassVar[CacheReset | None] = CacheReset(
        "POST", "/reset_prefix_cache", unavailable_hint=" (started without the reset route)"
    )

    def reset_answer(self, status_code: int, body: str) -> ResetAnswer:
        if status_code >= 300:
            return ResetAnswer.UNAVAILABLE
        try:
            success = json.loads(body).get("success")
        except (ValueError, AttributeError):
            return ResetAnswer.UNCONFIRMED
        return ResetAnswer.DONE if success is True else ResetAnswer.BUSY

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        raise NotImplementedError  # never started: the test serves its answers


def flagged(server: ThreadingHTTPServer) -> Target:
    return Target("flagged", FlaggedReset(), url(server), "m", "m", "", None)


def test_reset_refused_while_blocks_are_held_is_tried_again(vllm_like: Any) -> None:
    vllm_like.answers = [FALSE, FALSE, TRUE]
    assert reset_prefix_cache(flagged(vllm_like), {}) is None
    assert vllm_like.paths == ["/reset_prefix_cache"] * 3


def test_reset_that_never_succeeds_is_noted(vllm_like: Any) -> None:
    vllm_like.answers = [FALSE]
    note = reset_prefix_cache(flagged(vllm_like), {})
    assert note == (
        "prefix cache not reset: POST /reset_prefix_cache answered 200 (blocks still held) 4 times"
    )
    assert len(vllm_like.paths) == 4


def test_reset_without_a_flag_is_unconfirmed(vllm_like: Any) -> None:
    vllm_like.answers = [(200, "")]
    note = reset_prefix_cache(flagged(vllm_like), {})
    assert note is not None
    assert note.startswith("prefix cache reset unconfirmed: POST /reset_prefix_cache answered")


def test_missing_reset_route_says_why_without_retrying(vllm_like: Any) -> None:
    vllm_like.answers = [(404, '{"detail":"Not Found"}')]
    note = reset_prefix_cache(flagged(vllm_like), {})
    assert note == (
        "prefix cache not reset: POST /reset_prefix_cache answered 404 "
        "(started without the reset route)"
    )
    assert len(vllm_like.paths) == 1  # a missing route is not worth a retry


def test_vllm_is_salted_not_reset() -> None:
    spec = get_engine("vllm")
    assert spec.prefix_cache_salt
    assert spec.cache_reset is None  # its reset route needs dev mode, which stays off


@pytest.mark.parametrize(
    ("engine", "why"),
    [
        ("trtllm", "TensorRT-LLM has no reset route, and it reuses KV blocks by default"),
        ("mindie", "MindIE has no reset route"),
        ("external", "the server's engine is unknown"),
    ],
)
def test_engines_without_a_reset_say_so(engine: str, why: str) -> None:
    note = reset_prefix_cache(target(engine, "http://127.0.0.1:9"), {})
    assert note is not None
    assert note.startswith(f"prefix cache not reset: {why}")


def test_sglang_flush_refused_while_requests_run_is_tried_again(standins) -> None:
    standins.steer(load_s=0.1, warmup_s=0.1, flush_busy=2)
    with standins.server("sglang") as server:
        assert reset_prefix_cache(target("sglang", server.base_url), {}) is None
    assert [r for r in standins.requests() if "flush" in r] == ["POST /flush_cache"] * 3


def test_llamacpp_erases_every_slot(standins) -> None:
    standins.steer(load_s=0.1)
    with standins.server("llamacpp", "--parallel", "3") as server:
        assert "--slot-save-path" in server.plan.argv  # without it llama-server erases nothing
        assert reset_prefix_cache(target("llamacpp", server.base_url), {}) is None
    erased = [r for r in standins.requests() if r.startswith("POST /slots")]
    assert erased == [f"POST /slots/{slot}?action=erase" for slot in range(3)]


def test_llamacpp_started_without_a_slot_save_path_is_noted(standins) -> None:
    standins.steer(load_s=0.1)
    with standins.server("llamacpp", config_dir=False) as server:
        assert "--slot-save-path" not in server.plan.argv
        note = reset_prefix_cache(target("llamacpp", server.base_url), {})
    assert note == (
        "prefix cache not reset: POST /slots/0?action=erase answered 501 "
        "(llama-server erases slots only when started with --slot-save-path)"
    )
