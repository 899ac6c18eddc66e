"""An OpenAI-compatible server that is already running: nothing is started or stopped.

The endpoint may be given with or without the ``/v1`` suffix. ``GET /v1/models`` is the one
route every OpenAI-compatible server has, so it is the health check. The request quirks are
the safe common ground: ``max_tokens`` (every engine accepts it) and ``ignore_eos`` (most do),
no ``min_tokens``.
"""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlsplit

from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, LaunchRequest, RequestQuirks
from pytest_llmperf.errors import ConfigError


def normalise_endpoint(endpoint: str) -> str:
    """The API root without a trailing slash or ``/v1``; ``ConfigError`` if not an http URL."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"endpoint {endpoint!r} is not an http(s) URL; give it like http://host:8000/v1"
        )
    return endpoint.rstrip("/").removesuffix("/v1").rstrip("/")


class ExternalEngine(EngineSpec):
    name = "external"
    display_name = "external server"
    starts_server = False
    health_path = "/v1/models"
    quirks: ClassVar[RequestQuirks] = RequestQuirks(
        chat_max_tokens_field="max_tokens", supports_ignore_eos=True, supports_min_tokens=False
    )
    no_cache_reset: ClassVar[str] = (
        "the server's engine is unknown (name it with --engine to reset its cache)"
    )

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        if not request.endpoint:
            raise ConfigError(
                "the external engine needs the URL of the running server (the endpoint option)"
            )
        base = normalise_endpoint(request.endpoint)
        return LaunchPlan(argv=(), base_url=base, health_url=base + self.health_path)
