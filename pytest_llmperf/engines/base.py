"""What every engine spec describes: how to launch it, when it is ready, how it stops.

A spec is pure description. It never starts a process (``server.py`` does) and never imports
pytest, so a dry run can print exactly what would be started.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar


@dataclass(frozen=True)
class LaunchRequest:
    """What the user asked for, engine-neutral."""

    model: str
    port: int
    host: str = "127.0.0.1"
    engine_args: tuple[str, ...] = ()
    executable: str | None = None  # --engine-bin: a non-default executable
    config_dir: Path | None = None  # where a spec may write generated config files
    endpoint: str | None = None  # only for the external engine: the server's URL


@dataclass(frozen=True)
class LaunchPlan:
    """Exactly what will be started: argv, extra environment, files written first."""

    argv: tuple[str, ...]
    base_url: str  # OpenAI-compatible API root, without the /v1 suffix
    health_url: str
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[Path, str] = field(default_factory=dict)
    directories: tuple[Path, ...] = ()  # created before the start (the engine needs them)


@dataclass(frozen=True)
class RequestQuirks:
    """How to phrase a request so that every engine produces the lengths we ask for."""

    chat_max_tokens_field: str = "max_completion_tokens"
    supports_ignore_eos: bool = True
    supports_min_tokens: bool = True


class ResetAnswer(enum.Enum):
    """What an engine's answer to a prefix-cache reset says."""

    DONE = "done"  # the cache is empty
    BUSY = "busy"  # refused because blocks are still held: worth another try
    UNCONFIRMED = "unconfirmed"  # accepted, but the answer does not say whether it worked
    UNAVAILABLE = "unavailable"  # no such route, or the engine was not started to offer it


@dataclass(frozen=True)
class CacheReset:
    """How an engine empties its prefix cache.

    ``path`` may hold ``{slot}``: then one request goes to each slot the spec's
    ``cache_reset_paths`` lists (llama-server keeps one cache per slot).
    """

    method: str
    path: str
    unavailable_hint: str = ""  # how to make the engine offer the route, for the note


@dataclass(frozen=True)
class EngineMetricNames:
    """Where an engine's Prometheus text keeps what the plugin reads around each run.

    Names are metric families as the engine exposes them (a counter's ``_total`` and a
    histogram's ``_sum``/``_count`` are added when read); None where the engine has none.
    """

    path: str = "/metrics"
    prefix_cache_queries: str | None = None  # counter: prompt tokens looked up in the cache
    prefix_cache_hits: str | None = None  # counter: of those, tokens found there
    preemptions: str | None = None  # counter: requests preempted (SGLang: retracted)
    queue_time: str | None = None  # histogram, seconds a request waited to be scheduled
    kv_cache_usage: str | None = None  # gauge, fraction of the KV cache in use
    running: str | None = None  # gauge, requests being served
    waiting: str | None = None  # gauge, requests queued
    hint: str = ""  # how to make the engine expose them, for the note when it does not


def builtin_metric_names(engine: str) -> EngineMetricNames:
    """A built-in engine's metric names, from ``metric_names.json`` beside this module (a
    table kept as data: the engines differ in every name, not in how they are read)."""
    table = json.loads(Path(__file__).with_name("metric_names.json").read_text())
    names = {key: value for key, value in table[engine].items() if key != "source"}
    return EngineMetricNames(**names)


Fetch = Callable[[str], tuple[int, str]]
"""``fetch(path)``: GET a path of the running server; (status, body)."""


# Exit statuses after a stop *we* asked for. Popen reports death by signal N as -N.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)
COMMON_NORMAL_STOP_CODES: frozenset[int] = frozenset(
    {0} | {-int(s) for s in _STOP_SIGNALS} | {128 + int(s) for s in _STOP_SIGNALS}
)


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on ``host`` right now (the engine binds it moments later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def is_python(executable: str) -> bool:
    """An interpreter given as the engine executable: the engine is then started as a module."""
    return os.path.basename(executable).startswith("python")


# What uvicorn prints once an ASGI server (vLLM's, TensorRT-LLM's) accepts requests.
UVICORN_READY = "Application startup complete."


class EngineSpec:
    """Base class of the engine descriptions; subclasses override what differs."""

    name: ClassVar[str]
    display_name: ClassVar[str]
    starts_server: ClassVar[bool] = True
    health_path: ClassVar[str] = "/health"
    ready_log_line: ClassVar[str | None] = None
    normal_stop_codes: ClassVar[frozenset[int]] = COMMON_NORMAL_STOP_CODES
    quirks: ClassVar[RequestQuirks] = RequestQuirks()
    # Paths of server endpoints that answer JSON with the engine's version, tried in order.
    version_paths: ClassVar[tuple[str, ...]] = ()
    version_key: ClassVar[str] = "version"  # the JSON key holding it in that answer
    # How to empty the prefix cache between warm-up and measurement; None where the engine
    # has no way, and then no_cache_reset says why (it goes into the result's notes).
    # Requests take a ``cache_salt`` that keys the prefix cache (vLLM): each run sends a
    # fresh one, so no run is served from what another left, and no reset route is needed.
    prefix_cache_salt: ClassVar[bool] = False
    cache_reset: ClassVar[CacheReset | None] = None
    no_cache_reset: ClassVar[str] = "the engine offers no way to reset it"
    # A server that runs already (--endpoint) is ready once /v1/models answers and this path
    # stops answering 5xx: llama-server answers /v1/models while it still loads the model and
    # SGLang while it warms up, both 503 on /health meanwhile. A 404 means no such route.
    endpoint_health_path: ClassVar[str | None] = "/health"
    # The engine's own counters, scraped before and after each measured run; None: not read.
    engine_metrics: ClassVar[EngineMetricNames | None] = None

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        raise NotImplementedError

    def served(
        self,
        request: LaunchRequest,
        head: tuple[str, ...],
        *extra: str,
        directories: tuple[Path, ...] = (),
    ) -> LaunchPlan:
        """The plan of a server started as ``head`` (executable and model), the user's engine
        arguments and ``extra`` after it, listening on the request's host and port."""
        argv = (*head, *request.engine_args, *extra, "--host", request.host)
        argv += ("--port", str(request.port))
        base, health = self.urls(request.host, request.port, self.health_path)
        return LaunchPlan(argv=argv, base_url=base, health_url=health, directories=directories)

    def endpoint_is_ready(self, status_code: int) -> bool:
        """Whether the answer at ``endpoint_health_path`` lets a running server be measured."""
        return status_code < 500

    def cache_reset_paths(self, fetch: Fetch) -> list[str]:
        """Where to send the reset (``fetch`` may ask the server, e.g. for its slots)."""
        del fetch
        return [self.cache_reset.path] if self.cache_reset else []

    def reset_answer(self, status_code: int, body: str) -> ResetAnswer:
        """What the answer to one reset request says; engines that say more override it."""
        del body
        return ResetAnswer.DONE if status_code < 300 else ResetAnswer.UNAVAILABLE

    def is_ready(self, status_code: int, body: str) -> bool:
        """Whether a response from the health URL means 'serving'. 200 for most engines."""
        del body
        return status_code == 200

    def parse_version(self, body: str) -> str | None:
        """Read the version from the body that one of ``version_paths`` returned."""
        try:
            data = json.loads(body)
        except ValueError:
            return None
        value = data.get(self.version_key) if isinstance(data, dict) else None
        return str(value) if value else None

    @staticmethod
    def urls(host: str, port: int, health_path: str) -> tuple[str, str]:
        shown_host = f"[{host}]" if ":" in host else host
        base = f"http://{shown_host}:{port}"
        return base, base + health_path
