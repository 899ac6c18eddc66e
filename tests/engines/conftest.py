"""Fixtures for the engine lifecycle tests: stand-in engines under their real names.

The stand-ins (``tests/support/standins``) go first on ``PATH`` (``trtllm-serve``,
``llama-server``, ``mindieservice_daemon``) and on ``PYTHONPATH`` (the ``sglang`` package), so
the specs' real command lines start them. Each records what it was started with, every process
it made and when it became ready, in a directory the ``standins`` fixture reads back.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.server import EngineServer, group_members
from pytest_llmperf.engines.warden import is_alive

STANDINS = Path(__file__).resolve().parents[1] / "support" / "standins"
MODEL = "Qwen/Qwen3-32B"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Standins:
    """Starts stand-in engines through the real specs and EngineServer; reads their records."""

    record_dir: Path
    work_dir: Path
    monkeypatch: pytest.MonkeyPatch
    servers: list[EngineServer] = field(default_factory=list)

    def steer(self, **env: str | float) -> None:
        """Set STANDIN_* variables (``load_s=0.5`` sets STANDIN_LOAD_S) for the next start."""
        for key, value in env.items():
            self.monkeypatch.setenv(f"STANDIN_{key.upper()}", str(value))

    def server(
        self,
        engine: str,
        *engine_args: str,
        model: str = MODEL,
        executable: str | None = None,
        config_dir: bool = True,
    ) -> EngineServer:
        """An EngineServer for the stand-in, planned by the real spec (``config_dir=False``:
        planned without a folder for generated files, as an engine started by hand is)."""
        spec = get_engine(engine)
        plan = spec.plan(
            LaunchRequest(
                model=model,
                port=free_port(),
                engine_args=engine_args,
                executable=executable,
                config_dir=self.work_dir / "conf" if config_dir else None,
            )
        )
        server = EngineServer(
            spec,
            plan,
            self.work_dir / f"{engine}.log",
            startup_timeout=30,
            stop_grace=3.0,
            poll_interval=0.05,
        )
        self.servers.append(server)
        return server

    def started(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.record_dir / "argv.json").read_text())
        return data

    def requests(self) -> list[str]:
        """The ``METHOD path`` of every HTTP request the stand-in received, in order."""
        path = self.record_dir / "requests"
        return path.read_text().splitlines() if path.exists() else []

    def pids(self) -> set[int]:
        path = self.record_dir / "pids"
        return {int(line) for line in path.read_text().split()} if path.exists() else set()

    def wait_for_pids(self, count: int, timeout: float = 5.0) -> set[int]:
        """The recorded processes, once ``count`` of them have written their pid."""
        deadline = time.monotonic() + timeout
        while len(self.pids()) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.pids()

    def assert_all_gone(self, server: EngineServer, recorded: set[int]) -> None:
        """Nothing of the server is left: not its group, not any process the stand-in made."""
        assert server.leftover_pids() == set()
        assert server.pid is not None
        assert group_members(server.pid) == set()
        assert {pid for pid in recorded if is_alive(pid)} == set()

    def chat(self, server: EngineServer, max_tokens: int = 5) -> tuple[str, dict[str, Any]]:
        """One streamed chat request, phrased with the engine's quirks; (text, usage)."""
        body = {
            "model": "any",
            "messages": [{"role": "user", "content": "count to five"}],
            "stream": True,
            "stream_options": {"include_usage": True},
            server.spec.quirks.chat_max_tokens_field: max_tokens,
        }
        text, usage = "", {}
        with httpx.stream(
            "POST",
            server.base_url + "/v1/chat/completions",
            json=body,
            timeout=10.0,
            trust_env=False,
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: ") :])
                for choice in chunk.get("choices", []):
                    text += choice["delta"].get("content") or ""
                usage = chunk.get("usage") or usage
        return text, usage

    def event_time(self, name: str) -> float:
        for line in (self.record_dir / "events").read_text().splitlines():
            key, stamp = line.split()
            if key == name:
                return float(stamp)
        raise AssertionError(f"stand-in recorded no {name!r} event")


@pytest.fixture
def standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    record = tmp_path / "record"
    record.mkdir()
    # The stand-ins use psutil, as the plugin does: run them (and SGLang's `python3 -m`)
    # under this interpreter, not whichever python3 comes first on PATH.
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (shims / "python3").chmod(0o755)
    path = os.pathsep.join([str(STANDINS), str(shims), os.environ.get("PATH", "")])
    monkeypatch.setenv("PATH", path)
    python_path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv(
        "PYTHONPATH", f"{STANDINS}{os.pathsep}{python_path}" if python_path else str(STANDINS)
    )
    monkeypatch.setenv("STANDIN_RECORD_DIR", str(record))
    helper = Standins(record_dir=record, work_dir=tmp_path, monkeypatch=monkeypatch)
    yield helper
    for server in helper.servers:  # never leave a stand-in behind, whatever the test did
        server.stop()
