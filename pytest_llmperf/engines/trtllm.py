"""TensorRT-LLM: ``trtllm-serve M`` (the seeds' form, without the ``serve`` sub-command).

The server listens only after the model is loaded and tuned, then ``/health`` answers 200.
The parent exits with 128 + the signal number after a stop; those codes are in the common set.
"""

from __future__ import annotations

from typing import ClassVar

from pytest_llmperf.engines.base import (
    UVICORN_READY,
    EngineMetricNames,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
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
    # trtllm-serve mounts prometheus_client's app at /prometheus/metrics; its collector
    # (tensorrt_llm/metrics/collector.py) has request histograms only, no cache counters.
    engine_metrics: ClassVar[EngineMetricNames | None] = EngineMetricNames(
        path="/prometheus/metrics", queue_time="request_queue_time_seconds"
    )

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        return self.served(request, (request.executable or DEFAULT_EXECUTABLE, request.model))
