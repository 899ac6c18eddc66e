"""One engine for the session: start it (or connect to a running one), know what it serves,
reset its prefix cache, stop it. What ``--llmperf-dry-run`` prints comes from the same plan.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from pytest_llmperf import redact
from pytest_llmperf.config import Settings
from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.base import EngineSpec, LaunchPlan, ResetAnswer, free_port
from pytest_llmperf.engines.embedded import (
    EMBEDDED_ENGINES,
    default_executable,
    embedded_engine_args,
    embedded_launch_model,
)
from pytest_llmperf.engines.server import EngineServer, engine_version
from pytest_llmperf.errors import ConfigError, EngineStartError

if TYPE_CHECKING:
    pass

# vLLM's CPU build asks for 92 % of memory by default; 1 GiB of KV cache holds 2M tiny tokens.
EMBEDDED_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
# A reset refused because blocks are still held (the warm-up's last requests finishing) is
# tried again after these pauses, in seconds.
RESET_RETRY_PAUSES = (0.25, 0.5, 1.0, 2.0, 2.0)


@dataclass
class Target:
    """A server ready for load: what to send requests to and what to record about it."""

    engine: str
    spec: EngineSpec
    base_url: str
    served_model: str
    model: str  # the model as the user named it (path or hub id): tokenizer and baseline key
    command: str
    version: str | None
    server: EngineServer | None = None
    embedded: bool = False
    notes: list[str] = field(default_factory=list)
    variant: str = ""  # the configuration's name when --llmperf-variants or --engine=a,b named it

    def check_alive(self) -> None:
        if self.server is not None:
            self.server.check_alive()

    def check_serving(self) -> None:
        """After failed requests: were they the engine dying? (see EngineServer)."""
        if self.server is not None:
            self.server.check_serving()


def launch_request(
    settings: Settings, engine: str, *, port: int, config_dir: Path, model: str
) -> LaunchRequest:
    embedded = settings.model is None
    args = (
        (*embedded_engine_args(engine), *settings.engine_args) if embedded else settings.engine_args
    )
    return LaunchRequest(
        model=embedded_launch_model(engine, model) if embedded else model,
        port=port,
        engine_args=tuple(args),
        executable=settings.engine_bin or default_executable(engine),
        config_dir=config_dir,
        endpoint=settings.endpoint,
    )


def resolve_model(settings: Settings, engine: str) -> str:
    """The model to serve; the embedded tiny model when none is named (vLLM, llama.cpp)."""
    if settings.model is not None:
        return settings.model
    if engine == "external":
        raise ConfigError(
            "--model: name the model the endpoint serves (its tokenizer makes token-exact "
            "prompts and its name keys the baselines)"
        )
    if engine not in EMBEDDED_ENGINES:
        raise ConfigError(
            f"--model is required with --engine={engine}: the embedded tiny model runs on "
            f"vLLM's CPU build and llama.cpp's llama-server only"
        )
    from pytest_llmperf.engines.tinymodel import ensure_tiny_model

    return str(ensure_tiny_model())


def _check_local_model(model: str) -> None:
    """A model named by a path must exist: say so now, not after the engine's imports.

    Hub ids (``Qwen/Qwen3-32B``) never start like a path, so only these are checked.
    """
    if model.startswith(("/", "./", "../", "~")) and not Path(model).expanduser().exists():
        raise ConfigError(
            f"--model {model}: no such file or folder (a local path was given; a hub model is "
            f"named like org/name)"
        )


def plan_launch(
    settings: Settings, engine: str, config_dir: Path
) -> tuple[EngineSpec, LaunchPlan, str]:
    spec = get_engine(engine)
    model = resolve_model(settings, engine)
    _check_local_model(model)
    request = launch_request(settings, engine, port=free_port(), config_dir=config_dir, model=model)
    plan = spec.plan(request)
    extra_env: dict[str, str] = {}
    if engine == "vllm" and settings.model is None:
        extra_env.update(EMBEDDED_ENV)
    extra_env.update(settings.engine_env)  # a variant's own env: wins over both
    if extra_env:
        plan = dataclasses.replace(plan, env={**extra_env, **plan.env, **dict(settings.engine_env)})
    return spec, plan, model


def served_model_name(base_url: str, fallback: str, headers: dict[str, str]) -> str:
    """The name to put in requests: what GET /v1/models lists first, as vllm bench does."""
    try:
        response = httpx.get(
            f"{base_url}/v1/models", headers=headers, timeout=10.0, trust_env=False
        )
        data = response.json().get("data") if response.status_code == 200 else None
        if data:
            return str(data[0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return fallback


def listed_model_root(base_url: str, headers: dict[str, str]) -> str | None:
    """The model path or id a server lists as ``root`` (vLLM does), like vllm bench's default.

    Only a root that is a local folder is used: its tokenizer must load without a download.
    """
    try:
        response = httpx.get(
            f"{base_url}/v1/models", headers=headers, timeout=10.0, trust_env=False
        )
        data = response.json().get("data") if response.status_code == 200 else None
        root = data[0].get("root") if data else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
    return str(root) if root and Path(str(root)).is_dir() else None


class EngineSession:
    """Start (or connect to) one engine for the session, and stop it again."""

    def __init__(
        self,
        settings: Settings,
        engine: str,
        work_dir: Path,
        headers: dict[str, str] | None = None,
        *,
        variant: str = "",
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.variant = variant
        self.work_dir = work_dir
        self.headers = headers or {}
        self.target: Target | None = None

    def start(self) -> Target:
        settings = self.settings
        external = self.engine == "external" or settings.endpoint is not None
        if external:
            return self._connect()
        spec, plan, model = plan_launch(settings, self.engine, self.work_dir / self.engine)
        server = EngineServer(
            spec,
            plan,
            self.work_dir / f"{self.engine}-server.log",
            startup_timeout=settings.startup_timeout,
        )
        server.start()
        try:
            server.wait_ready()
            name = settings.served_model_name or served_model_name(
                plan.base_url, model, self.headers
            )
            version = server.version(self.headers)
        except BaseException:
            server.stop()
            raise
        self.target = Target(
            engine=self.engine,
            spec=spec,
            base_url=plan.base_url,
            served_model=name,
            model=model,
            command=redact.command(plan.argv),
            version=version,
            server=server,
            embedded=settings.model is None,
            variant=self.variant,
        )
        return self.target

    def _connect(self) -> Target:
        settings = self.settings
        spec = get_engine(self.engine)
        if not settings.endpoint:
            raise ConfigError("--engine=external needs --endpoint URL of the running server")
        base = settings.endpoint.removesuffix("/v1")
        self._wait_serving(spec, base, min(settings.startup_timeout, 60.0))
        model = settings.model or listed_model_root(base, self.headers)
        if model is None:
            resolve_model(settings, "external")  # raises: says --model is needed
            raise AssertionError("unreachable")
        name = settings.served_model_name or served_model_name(base, model, self.headers)
        # An external server's kind is unknown; most OpenAI-compatible servers that report a
        # version do it at vLLM's path, so that is the guess when the spec names none.
        version = engine_version(spec, base, self.headers, spec.version_paths or ("/version",))
        self.target = Target(
            engine=self.engine,
            spec=spec,
            base_url=base,
            served_model=name,
            model=model,
            command=f"(external) {redact.url(base)}",
            version=version,
            variant=self.variant,
        )
        return self.target

    def _wait_serving(self, spec: EngineSpec, base: str, timeout: float) -> None:
        """Wait until the running server at ``base`` serves; ``EngineStartError`` if it
        does not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with httpx.Client(headers=self.headers, timeout=10.0, trust_env=False) as client:
            while True:
                try:
                    problem = _endpoint_problem(client, spec, base)
                except (httpx.HTTPError, OSError) as exc:
                    # OSError too: a connection refused must read as "not serving" even where
                    # httpx did not get to translate the transport's own exception.
                    problem = f"{base}: {type(exc).__name__}"
                if problem is None:
                    return
                if time.monotonic() >= deadline:
                    raise EngineStartError(
                        redact.text(f"--endpoint {base} is not serving ({problem})")
                    )
                time.sleep(0.5)

    def stop(self) -> None:
        if self.target is not None and self.target.server is not None:
            self.target.server.stop()


def _endpoint_problem(client: httpx.Client, spec: EngineSpec, base: str) -> str | None:
    """None when a running server can be measured, else what it answered."""
    # Any answer but a server error means something serves there; the model list is
    # optional (the name then comes from --model).
    response = client.get(f"{base}/v1/models")
    if response.status_code >= 500:
        return f"GET {base}/v1/models answered {response.status_code}"
    path = spec.endpoint_health_path
    if path is not None:
        response = client.get(base + path)
        if not spec.endpoint_is_ready(response.status_code):
            return f"GET {base}{path} answered {response.status_code}"
    return None


def reset_prefix_cache(target: Target, headers: dict[str, str]) -> str | None:
    """Empty the engine's prefix cache as its spec says; a note when that is not certain."""
    spec = target.spec
    if spec.cache_reset is None:
        return f"prefix cache not reset: {spec.no_cache_reset}"
    with httpx.Client(
        base_url=target.base_url, headers=headers, timeout=30.0, trust_env=False
    ) as client:

        def fetch(path: str) -> tuple[int, str]:
            response = client.get(path)
            return response.status_code, response.text

        try:
            paths = spec.cache_reset_paths(fetch)
            if not paths:
                return "prefix cache not reset: the server listed nothing to reset"
            notes = [_reset_one(client, spec, path) for path in paths]
        except httpx.HTTPError as exc:
            return f"prefix cache not reset ({type(exc).__name__})"
    return next((note for note in notes if note), None)


def _reset_one(client: httpx.Client, spec: EngineSpec, path: str) -> str | None:
    """One reset request, tried again while the engine says blocks are still held."""
    assert spec.cache_reset is not None
    method = spec.cache_reset.method
    for pause in (*RESET_RETRY_PAUSES, None):
        response = client.request(method, path)
        answer = spec.reset_answer(response.status_code, response.text)
        if answer is not ResetAnswer.BUSY or pause is None:
            break
        time.sleep(pause)
    said = f"{method} {path} answered {response.status_code}"
    if answer is ResetAnswer.DONE:
        return None
    if answer is ResetAnswer.UNCONFIRMED:
        return f"prefix cache reset unconfirmed: {said} without saying whether it worked"
    if answer is ResetAnswer.BUSY:
        tries = len(RESET_RETRY_PAUSES) + 1
        return f"prefix cache not reset: {said} (blocks still held) {tries} times"
    return f"prefix cache not reset: {said}{spec.cache_reset.unavailable_hint}"


def dry_run(settings: Settings, work_dir: Path) -> str:
    """What each selected engine would start: command, added environment, generated files."""
    from pytest_llmperf.engines.dryrun import describe_plan
    from pytest_llmperf.variants import from_engines, settings_for

    sections = []
    for variant in settings.variants or from_engines(settings.engines):
        engine, name, chosen = variant.engine, variant.name, settings_for(settings, variant)
        if engine == "external" or chosen.endpoint:
            shown = redact.url(chosen.endpoint or "")
            sections.append(f"[{name}] nothing is started; requests go to {shown}")
            continue
        spec, plan, _ = plan_launch(chosen, engine, work_dir / name)
        sections.append(f"[{name}]\n{describe_plan(spec, plan)}")
    return "\n\n".join(sections)
