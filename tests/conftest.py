"""Fixtures shared by the plugin's own tests.

The end-to-end tests share one real vLLM (CPU build) server per test session: starting one
takes about 45 s on two cores, so every test that only needs *a* server uses this one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf.engines.base import free_port

TINY_MODEL_NAME = "tiny-qwen3"
VLLM_TEST_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


requires_vllm = pytest.mark.skipif(not vllm_available(), reason="vllm-cpu is not installed")


def _import_http_error_paths() -> None:
    """Import, once and for good, the modules httpx loads lazily on its first failed request.

    pytester's in-process runs put ``sys.modules`` back as it was before each run. A module
    first imported *inside* such a run (httpcore's connection classes, say) is dropped and
    later imported again as a new module, whose exception classes httpx no longer recognises:
    a refused connection then escapes as ``httpcore.ConnectError`` instead of
    ``httpx.ConnectError``. Loading those paths here, before any run, keeps one copy.
    """
    import asyncio

    import httpx

    port = free_port()  # bound and released: nothing listens there
    url = f"http://127.0.0.1:{port}/"
    try:
        httpx.get(url, timeout=1.0, trust_env=False)
    except httpx.HTTPError:
        pass

    async def fail_async() -> None:
        # httpx's own transports only: importing our package here, before pytester marks it
        # for assertion rewriting, would add a rewrite warning to every in-process run.
        async with httpx.AsyncClient(trust_env=False) as client:
            try:
                await client.get(url, timeout=1.0)
            except httpx.HTTPError:
                pass

    asyncio.run(fail_async())


_import_http_error_paths()


@pytest.fixture(autouse=True)
def _outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin records a first run outside CI and fails it in CI (the CI variable): each
    test says which it means (--llmperf-first-run, or CI set by the test), so the suite
    behaves the same in CI and on a laptop."""
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    from pytest_llmperf.engines.tinymodel import ensure_tiny_model

    return ensure_tiny_model()


def start_vllm(model_dir: Path, log_path: Path, *extra_args: str):  # type: ignore[no-untyped-def]
    """Start a real vLLM server on a free port and wait until it serves."""
    from pytest_llmperf.engines import LaunchRequest, get_engine
    from pytest_llmperf.engines.server import EngineServer

    spec = get_engine("vllm")
    plan = spec.plan(
        LaunchRequest(
            model=str(model_dir),
            port=free_port(),
            engine_args=(
                "--served-model-name",
                TINY_MODEL_NAME,
                "--max-model-len",
                "40960",
                *extra_args,
            ),
        )
    )
    plan = type(plan)(
        argv=plan.argv,
        base_url=plan.base_url,
        health_url=plan.health_url,
        env={**plan.env, **VLLM_TEST_ENV},
        files=plan.files,
    )
    server = EngineServer(spec, plan, log_path, startup_timeout=300)
    server.start()
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def vllm_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real vLLM server for the whole test session (``server.base_url`` to reach it)."""
    if not vllm_available():
        pytest.skip("vllm-cpu is not installed")
    for key, value in VLLM_TEST_ENV.items():
        os.environ.setdefault(key, value)
    server = start_vllm(tiny_model_dir, tmp_path_factory.mktemp("vllm") / "server.log")
    try:
        yield server
    finally:
        server.stop()
