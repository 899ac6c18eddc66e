"""The real llama-server for the end-to-end tests: find the build, start it on the tiny GGUF."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.embedded import embedded_engine_args
from pytest_llmperf.engines.llamacpp_build import BUILD_COMMAND, build_dir, cached_llama_server
from pytest_llmperf.engines.server import EngineServer
from tests.conftest import free_port


def llama_server_binary() -> str | None:
    """The llama-server the tests use: the cached build, else one on PATH."""
    cached = cached_llama_server()
    return str(cached) if cached else shutil.which("llama-server")


def _skip_reason() -> str:
    if importlib.util.find_spec("gguf") is None:
        return "the `gguf` package (the llamacpp extra) is not installed"
    return f"no llama-server build in {build_dir()} or on PATH; run `{BUILD_COMMAND}` (minutes)"


requires_llama_server = pytest.mark.skipif(
    llama_server_binary() is None or importlib.util.find_spec("gguf") is None,
    reason=_skip_reason(),
)


def llama_server(model: Path, log_path: Path, *extra_args: str) -> EngineServer:
    """An EngineServer (not started) for llama-server as the plugin launches it."""
    spec = get_engine("llamacpp")
    plan = spec.plan(
        LaunchRequest(
            model=str(model),
            port=free_port(),
            engine_args=(*embedded_engine_args("llamacpp"), *extra_args),
            executable=llama_server_binary(),
        )
    )
    return EngineServer(spec, plan, log_path, startup_timeout=120, poll_interval=0.05)
