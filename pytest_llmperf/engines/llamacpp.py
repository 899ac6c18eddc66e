"""llama.cpp: ``llama-server -m M``.

Unlike the other engines, llama-server listens *before* the model is loaded and answers
``/health`` with 503 ``Loading model`` meanwhile; only 200 means ready. Its default port is
moving (8080 to 9931), which is one more reason the plugin always passes ``--port``.
"""

from __future__ import annotations

import json
from typing import ClassVar

from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, LaunchRequest, RequestQuirks

DEFAULT_EXECUTABLE = "llama-server"


class LlamaCppEngine(EngineSpec):
    name = "llamacpp"
    display_name = "llama.cpp"
    health_path = "/health"
    ready_log_line = "server is listening on"
    # No min_tokens; max_completion_tokens is unconfirmed, max_tokens always works.
    quirks: ClassVar[RequestQuirks] = RequestQuirks(
        chat_max_tokens_field="max_tokens", supports_ignore_eos=True, supports_min_tokens=False
    )
    version_path: ClassVar[str | None] = "/props"

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        executable = request.executable or DEFAULT_EXECUTABLE
        argv = (
            executable,
            "-m",
            request.model,
            *request.engine_args,
            "--host",
            request.host,
            "--port",
            str(request.port),
        )
        base, health = self.urls(request.host, request.port, self.health_path)
        return LaunchPlan(argv=argv, base_url=base, health_url=health)

    def is_ready(self, status_code: int, body: str) -> bool:
        # 503 {"error": {"message": "Loading model"}} is the normal answer while loading.
        del body
        return status_code == 200

    def parse_version(self, body: str) -> str | None:
        """``/props`` carries the build (``b6123-abcdef0``), not a semantic version."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        value = data.get("build_info") if isinstance(data, dict) else None
        return str(value) if value else None
