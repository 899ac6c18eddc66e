"""Shared parts of the stand-in engines (stdlib and psutil: they run under the tests' own
interpreter, which the ``standins`` fixture puts first on ``PATH`` as ``python3``).

A stand-in behaves like a real engine where the plugin can tell the difference: when it binds,
what its health routes answer while loading, which processes it starts, how it exits on a
signal. It also serves a minimal OpenAI-compatible ``/v1/chat/completions`` (streaming or not)
so that a request can go through.

Steering and recording, all through the environment:

- ``STANDIN_RECORD_DIR``: where to write ``argv.json`` (argv, pid, process group, session,
  config), ``pids`` (every process the stand-in made, one per line), ``events``
  (``name unix-time`` lines, e.g. ``ready``) and ``requests`` (``METHOD path`` lines).
- ``STANDIN_LOAD_S``: seconds of "model loading"; ``STANDIN_WARMUP_S``: seconds of warm-up.
- ``STANDIN_CRASH=1``: fail during start-up the way the engine fails.
- ``STANDIN_STUBBORN_CHILD=1``: child processes ignore SIGTERM (only SIGKILL ends them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil

RECORD_DIR = os.environ.get("STANDIN_RECORD_DIR")

Answer = tuple[int, Any]  # (status, dict | str | iterator of SSE lines)
Route = Callable[[dict[str, Any] | None], Answer]


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def log(message: str) -> None:
    print(message, flush=True)


def _append(name: str, line: str) -> None:
    if RECORD_DIR:
        with open(Path(RECORD_DIR) / name, "a") as handle:
            handle.write(line + "\n")


def record_start(argv: list[str], **extra: Any) -> None:
    """Write what the stand-in was started with; the tests compare it with the plan."""
    record_pid()
    if RECORD_DIR:
        data = {
            "argv": argv,
            "pid": os.getpid(),
            "pgid": os.getpgrp(),
            "sid": os.getsid(0),
            **extra,
        }
        (Path(RECORD_DIR) / "argv.json").write_text(json.dumps(data, indent=1))


def record_pid() -> None:
    _append("pids", str(os.getpid()))


def event(name: str) -> None:
    _append("events", f"{name} {time.time():.6f}")


# -- processes ---------------------------------------------------------------------------------


def _child_loop(role: str, stubborn: bool) -> None:
    record_pid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN if stubborn else signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log(f"[{role}] pid {os.getpid()} started")
    while True:
        time.sleep(1.0)


def spawn_child(role: str, *, grandchild: str | None = None, stubborn: bool = False) -> int:
    """Fork a worker that sleeps until killed, optionally with a worker of its own.

    Call before any thread is started (fork copies only the calling thread).
    """
    pid = os.fork()
    if pid == 0:
        try:
            if grandchild:
                spawn_child(grandchild, stubborn=stubborn)
            _child_loop(role, stubborn)
        finally:
            os._exit(0)
    return pid


def spawn_orphan(role: str, *, stubborn: bool = False) -> None:
    """Fork a worker whose parent exits at once, so it is re-parented but stays in the group.

    SGLang's schedulers can end up like this, out of reach of a process-tree walk.
    """
    middle = os.fork()
    if middle == 0:
        try:
            spawn_child(role, stubborn=stubborn)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_pids() -> set[int]:
    """Live members of this process's group, itself excluded."""
    group, me = os.getpgrp(), os.getpid()
    members = set()
    for process in psutil.process_iter():
        with contextlib.suppress(OSError):
            if process.pid != me and os.getpgid(process.pid) == group and _running(process):
                members.add(process.pid)
    return members


def tree_pids() -> set[int]:
    """Live descendants of this process (a tree walk, as SGLang's kill_process_tree does)."""
    return {p.pid for p in psutil.Process().children(recursive=True) if _running(p)}


def kill_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap_children() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def sleep_forever() -> None:
    while True:
        time.sleep(0.1)


# -- HTTP --------------------------------------------------------------------------------------


def chat_answer(body: dict[str, Any] | None, model: str, usage_style: str) -> Answer:
    """A chat completion of ``max_tokens`` tokens (default 8), streamed when asked.

    ``usage_style``: ``separate`` (a usage chunk with empty choices when include_usage is set,
    as vLLM, SGLang and TRT-LLM do) or ``final`` (usage on the chunk with finish_reason, as
    MindIE and llama-server do).
    """
    body = body or {}
    count = int(body.get("max_tokens") or body.get("max_completion_tokens") or 8)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": count,
        "total_tokens": prompt_tokens + count,
    }
    created = int(time.time())
    base = {"id": "chatcmpl-standin", "created": created, "model": model}
    if not body.get("stream"):
        text = "".join(f"t{i} " for i in range(count))
        return 200, {
            **base,
            "object": "chat.completion",
            "usage": usage,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length",
                }
            ],
        }
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunks() -> Iterator[dict[str, Any]]:
        chunk = {**base, "object": "chat.completion.chunk"}
        yield {
            **chunk,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
            ],
        }
        for i in range(count):
            time.sleep(0.002)
            last = i == count - 1
            piece: dict[str, Any] = {
                **chunk,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": f"t{i} "},
                        "finish_reason": "length" if last else None,
                    }
                ],
            }
            if last and usage_style == "final":
                piece["usage"] = usage
            yield piece
        if include_usage and usage_style == "separate":
            yield {**chunk, "choices": [], "usage": usage}

    return 200, chunks()


class _Handler(BaseHTTPRequestHandler):
    server: StandinHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log(f"{self.address_string()} - {format % args}")

    def _dispatch(self, method: str) -> None:
        _append("requests", f"{method} {self.path}")
        # A route may name its query (llama-server's /slots/0?action=erase) or not.
        routes = self.server.routes
        route = routes.get((method, self.path)) or routes.get((method, self.path.split("?")[0]))
        body = None
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            raw = self.rfile.read(length)
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
        if route is None:
            status, payload = 404, {"error": {"message": f"no route {self.path}", "code": 404}}
        else:
            status, payload = route(body)
        if isinstance(payload, (dict, list, str)):
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        # A stream: server-sent events, the end of the body is the end of the connection.
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for item in payload:
            self.wfile.write(f"data: {json.dumps(item)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        super().__init__((host, port), _Handler)


def serve(host: str, port: int, routes: dict[tuple[str, str], Route]) -> StandinHTTPServer:
    """Bind and listen now, answer in a background thread."""
    server = StandinHTTPServer(host, port, routes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def models_answer(model: str) -> Route:
    return lambda body: (
        200,
        {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "standin"}]},
    )


def fail(message: str, code: int = 1) -> None:
    log(message)
    sys.stdout.flush()
    os._exit(code)
