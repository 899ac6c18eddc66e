"""llama.cpp: ``llama-server -m M``.

Unlike the other engines, llama-server listens *before* the model is loaded and answers
``/health`` with 503 ``Loading model`` meanwhile; only 200 means ready. Its default port is
moving (8080 to 9931), which is one more reason the plugin always passes ``--port``.
"""

from __future__ import annotations

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
    # The base rule (only 200 is ready) already treats 503 "Loading model" as not ready.
    version_path: ClassVar[str | None] = "/props"
    version_key: ClassVar[str] = "build_info"  # a build (b6123-abcdef0), not a semver

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
