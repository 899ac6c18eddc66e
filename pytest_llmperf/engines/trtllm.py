"""TensorRT-LLM: ``trtllm-serve M`` (the seeds' form, without the ``serve`` sub-command).

The server listens only after the model is loaded and tuned, then ``/health`` answers 200.
The parent exits with 128 + the signal number after a stop; those codes are in the common set.
"""

from __future__ import annotations

from typing import ClassVar

from pytest_llmperf.engines.base import (
    UVICORN_READY,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    builtin_metric_names,
)

DEFAULT_EXECUTABLE = "trtllm-serve"


class TensorRTLLMEngine(EngineSpec):
    name = "trtllm"
    display_name = "TensorRT-LLM"
    ready_log_line = UVICORN_READY
    version_paths: ClassVar[tuple[str, ...]] = ("/version",)
    no_cache_reset: ClassVar[str] = (
        "TensorRT-LLM has no reset route, and it reuses KV blocks by default"
    )
    engine_metrics = builtin_metric_names("trtllm")

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        return self.served(request, (request.executable or DEFAULT_EXECUTABLE, request.model))
