"""Named engine configurations to run in turn and compare: the seeds' optimization steps.

A variant is an engine plus, optionally, its own model, engine arguments and endpoint. A
variants file lists them; ``--engine=a,b,c`` is the simplest list (one variant per engine,
named after it). One variant is the reference the others are measured against (the seeds'
基準設定, "vLLM with no optimization"): the one marked ``reference: true``, else the first.

Variants file (YAML)::

    variants:
      - name: vllm                  # named like its engine: the engine's default configuration
        engine: vllm
        reference: true
      - name: trtllm-chunked        # any other name is stored as variants.<name> in baselines
        engine: trtllm
        model: Qwen/Qwen3-32B       # optional; default: --model
        engine_args: --max_seq_len=40960 --enable_chunked_prefill   # string or list
      - name: pr-build
        engine: vllm
        engine_bin: /opt/pr-build/bin/python   # optional: the executable (or python) to start
        env: {VLLM_CPU_OMP_THREADS_BIND: "0"}   # optional: extra environment of its server

Baselines: a variant named like its engine is gated against that engine file's ``profiles:``;
any other is gated against ``variants.<name>.profiles`` of the same file (docs/baselines.md).

``python -m pytest_llmperf.reports variants`` prints the comparison table from baseline files
alone.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.errors import ConfigError

if TYPE_CHECKING:
    from pytest_llmperf.config import Settings

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEYS = ("name", "engine", "model", "engine_args", "endpoint", "reference", "engine_bin", "env")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Variant:
    name: str
    engine: str
    model: str | None = None  # None: the session's --model (or the embedded tiny model)
    engine_args: tuple[str, ...] = ()  # appended to the session's --engine-args
    endpoint: str | None = None  # an already-running server for this variant
    reference: bool = False
    engine_bin: str | None = None  # None: the session's --llmperf-engine-bin, else the default
    env: tuple[tuple[str, str], ...] = ()  # extra environment variables of its server

    @property
    def baseline_key(self) -> str | None:
        """Where its baselines live in the engine's file: None = ``profiles:``."""
        return None if self.name == self.engine else self.name


def from_engines(engines: Sequence[str]) -> tuple[Variant, ...]:
    """``--engine=a,b,c``: each engine at its defaults, the first one the reference."""
    return tuple(
        Variant(name=engine, engine=engine, reference=index == 0)
        for index, engine in enumerate(engines)
    )


def _problem(path: Path, where: str, text: str) -> ConfigError:
    return ConfigError(f"--llmperf-variants {path}: {where}: {text}")


def _args(path: Path, where: str, raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        try:
            return tuple(shlex.split(raw))
        except ValueError as exc:
            raise _problem(path, where, f"cannot split {raw!r}: {exc}") from None
    if isinstance(raw, list) and all(isinstance(item, (str, int, float)) for item in raw):
        return tuple(str(item) for item in raw)
    raise _problem(path, where, "expected a shell-quoted string or a list of arguments")


def _variant(path: Path, index: int, raw: Any, known_engines: Sequence[str]) -> Variant:
    where = f"variants[{index}]"
    if not isinstance(raw, dict):
        raise _problem(path, where, "expected a mapping with name and engine")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise _problem(
            path, where, f"unknown key(s) {', '.join(unknown)}; valid keys are {', '.join(_KEYS)}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise _problem(
            path,
            f"{where}.name",
            f"expected a name of letters, digits, '.', '_' or '-', got {name!r}",
        )
    where = f"variant {name!r}"
    engine = raw.get("engine")
    if not isinstance(engine, str) or engine not in known_engines:
        raise _problem(
            path,
            f"{where}.engine",
            f"unknown engine {engine!r}; valid engines are {', '.join(known_engines)}",
        )
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise _problem(path, f"{where}.model", f"expected a model path or hub id, got {model!r}")
    endpoint = raw.get("endpoint")
    if endpoint is not None and not (
        isinstance(endpoint, str) and endpoint.startswith(("http://", "https://"))
    ):
        raise _problem(path, f"{where}.endpoint", f"expected an http(s):// URL, got {endpoint!r}")
    reference = raw.get("reference", False)
    if not isinstance(reference, bool):
        raise _problem(path, f"{where}.reference", f"expected true or false, got {reference!r}")
    engine_bin = raw.get("engine_bin")
    if engine_bin is not None and (not isinstance(engine_bin, str) or not engine_bin.strip()):
        raise _problem(
            path,
            f"{where}.engine_bin",
            f"expected the path of the engine's executable (or of a python), got {engine_bin!r}",
        )
    return Variant(
        name=name,
        engine=engine,
        model=model,
        engine_args=_args(path, f"{where}.engine_args", raw.get("engine_args")),
        endpoint=None if endpoint is None else endpoint.rstrip("/"),
        reference=reference,
        engine_bin=None if engine_bin is None else str(Path(engine_bin).expanduser()),
        env=_env(path, f"{where}.env", raw.get("env")),
    )


def _env(path: Path, where: str, raw: Any) -> tuple[tuple[str, str], ...]:
    """``env:``: a mapping of variable names to values (strings or numbers)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise _problem(path, where, f"expected a mapping of NAME: value, got {raw!r}")
    pairs = []
    for key, value in raw.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise _problem(
                path, where, f"{key!r} is not an environment variable name (letters, digits, _)"
            )
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise _problem(path, f"{where}.{key}", f"expected a string or a number, got {value!r}")
        pairs.append((key, str(value)))
    return tuple(pairs)


def parse_variants(text: str, path: Path, known_engines: Sequence[str]) -> tuple[Variant, ...]:
    """Validate a variants document; every problem names the file and the variant.
    ``known_engines`` are the valid engine names (the caller asks the engine registry: this
    module sits below the engines in the package's rooms)."""
    import yaml  # not at import time: settings (and so the plugin) imports this module

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "?"
        raise _problem(path, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(document, dict) or not isinstance(document.get("variants"), list):
        raise _problem(path, "top level", "expected a mapping with a list under 'variants:'")
    raw_list = document["variants"]
    if not raw_list:
        raise _problem(path, "variants", "the list is empty")
    known = list(known_engines)
    variants = [_variant(path, i, raw, known) for i, raw in enumerate(raw_list)]
    names = [v.name for v in variants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _problem(path, "variants", f"name(s) used twice: {', '.join(twice)}")
    references = [v.name for v in variants if v.reference]
    if len(references) > 1:
        raise _problem(
            path, "variants", f"only one variant can be the reference, got {', '.join(references)}"
        )
    if not references:
        variants[0] = dataclasses.replace(variants[0], reference=True)
    return tuple(variants)


def load_variants(path: Path, known_engines: Sequence[str]) -> tuple[Variant, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--llmperf-variants {path}: cannot read: {exc.strerror}") from None
    return parse_variants(text, path, known_engines)


def reference_of(variants: Sequence[Variant]) -> str | None:
    for variant in variants:
        if variant.reference:
            return variant.name
    return variants[0].name if variants else None


def find(variants: Sequence[Variant], name: str) -> Variant:
    for variant in variants:
        if variant.name == name:
            return variant
    # A single engine without a variants file: the engine's defaults.
    return Variant(name=name, engine=name, reference=True)


def settings_for(settings: Settings, variant: Variant) -> Settings:
    """The session's settings as this variant changes them (one engine, its model and args)."""
    return dataclasses.replace(
        settings,
        engines=(variant.engine,),
        model=variant.model if variant.model is not None else settings.model,
        engine_args=(*settings.engine_args, *variant.engine_args),
        engine_bin=variant.engine_bin or settings.engine_bin,
        engine_env=(*settings.engine_env, *variant.env),
        endpoint=variant.endpoint
        if variant.endpoint is not None
        else _shared_endpoint(settings, variant),
    )


def _shared_endpoint(settings: Settings, variant: Variant) -> str | None:
    """--endpoint belongs to the `external` engine when the session has one (vllm,external
    compares a started vLLM with a running server); otherwise it is where the engine runs."""
    if variant.engine != "external" and "external" in settings.engines:
        return None
    return settings.endpoint
