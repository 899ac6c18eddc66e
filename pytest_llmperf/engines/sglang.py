"""SGLang: ``python3 -m sglang.launch_server --model-path M`` (the seeds' form).

SGLang's HTTP server answers ``/v1/models`` with 200 while its warm-up request is still
running, so only ``/health`` (503 until warm-up is done) says that it really serves. After a
requested stop it SIGKILLs its whole process tree, itself included, so -9/137 is a normal end.
"""

from __future__ import annotations

import signal
from typing import ClassVar

from pytest_llmperf.engines.base import (
    COMMON_NORMAL_STOP_CODES,
    CacheReset,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    ResetAnswer,
    builtin_metric_names,
    is_python,
)

LAUNCH_MODULE = "sglang.launch_server"
DEFAULT_PYTHON = "python3"


class SGLangEngine(EngineSpec):
    name = "sglang"
    display_name = "SGLang"
    ready_log_line = "The server is fired up and ready to roll!"
    # Listed although COMMON_NORMAL_STOP_CODES has them: SGLang's own SIGKILL is the usual end.
    normal_stop_codes: ClassVar[frozenset[int]] = COMMON_NORMAL_STOP_CODES | {
        -int(signal.SIGKILL),
        128 + int(signal.SIGKILL),
    }
    # Later releases keep /get_server_info only as a deprecated alias of /server_info.
    version_paths: ClassVar[tuple[str, ...]] = ("/server_info", "/get_server_info")
    cache_reset: ClassVar[CacheReset | None] = CacheReset("POST", "/flush_cache")
    engine_metrics = builtin_metric_names("sglang")

    def reset_answer(self, status_code: int, body: str) -> ResetAnswer:
        """200 when flushed; 400 while requests run or wait (the same text either way)."""
        del body
        if status_code < 300:
            return ResetAnswer.DONE
        return ResetAnswer.BUSY if status_code == 400 else ResetAnswer.UNAVAILABLE

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        executable = request.executable or DEFAULT_PYTHON
        if is_python(executable):
            head: tuple[str, ...] = (executable, "-m", LAUNCH_MODULE, "--model-path", request.model)
        else:
            # A non-Python --engine-bin is taken to be the newer `sglang` launcher.
            head = (executable, "serve", "--model-path", request.model)
        return self.served(request, head)
