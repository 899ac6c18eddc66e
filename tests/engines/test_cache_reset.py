"""The prefix-cache reset between warm-up and measurement, as each engine's spec describes it.

vLLM runs here for real, but making it hold blocks at the right moment is not something a test
can do reliably, so its answers (0.32's ``{"success": false}`` while blocks are held, 0.11's
empty 200) come from a small server in the test. SGLang and llama.cpp are their stand-ins.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pytest_llmperf import runner
from pytest_llmperf.engines import get_engine
from pytest_llmperf.runner import Target, reset_prefix_cache


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "RESET_RETRY_PAUSES", (0.01, 0.01, 0.01))


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


def test_vllm_reset_refused_while_blocks_are_held_is_tried_again(vllm_like: Any) -> None:
    vllm_like.answers = [FALSE, FALSE, TRUE]
    assert reset_prefix_cache(target("vllm", url(vllm_like)), {}) is None
    assert vllm_like.paths == ["/reset_prefix_cache"] * 3


def test_vllm_reset_that_never_succeeds_is_noted(vllm_like: Any) -> None:
    vllm_like.answers = [FALSE]
    note = reset_prefix_cache(target("vllm", url(vllm_like)), {})
    assert note == (
        "prefix cache not reset: POST /reset_prefix_cache answered 200 (blocks still held) 4 times"
    )
    assert len(vllm_like.paths) == 4


def test_vllm_0_11_reset_without_a_flag_is_unconfirmed(vllm_like: Any) -> None:
    vllm_like.answers = [(200, "")]
    note = reset_prefix_cache(target("vllm", url(vllm_like)), {})
    assert note is not None
    assert note.startswith("prefix cache reset unconfirmed: POST /reset_prefix_cache answered")


def test_vllm_without_dev_mode_says_how_to_get_the_route(vllm_like: Any) -> None:
    vllm_like.answers = [(404, '{"detail":"Not Found"}')]
    note = reset_prefix_cache(target("vllm", url(vllm_like)), {})
    assert note == (
        "prefix cache not reset: POST /reset_prefix_cache answered 404 "
        "(vLLM offers it only with VLLM_SERVER_DEV_MODE=1)"
    )
    assert len(vllm_like.paths) == 1  # a missing route is not worth a retry


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
