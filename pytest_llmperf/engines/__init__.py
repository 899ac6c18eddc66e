"""The engine registry: each engine is looked up by the name users pass to ``--engine``."""

from __future__ import annotations

from pytest_llmperf.engines.base import (
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    RequestQuirks,
)
from pytest_llmperf.engines.external import ExternalEngine
from pytest_llmperf.engines.llamacpp import LlamaCppEngine
from pytest_llmperf.engines.mindie import MindIEEngine
from pytest_llmperf.engines.sglang import SGLangEngine
from pytest_llmperf.engines.trtllm import TensorRTLLMEngine
from pytest_llmperf.engines.vllm import VLLMEngine
from pytest_llmperf.errors import ConfigError

_REGISTRY: dict[str, type[EngineSpec]] = {
    VLLMEngine.name: VLLMEngine,
    SGLangEngine.name: SGLangEngine,
    TensorRTLLMEngine.name: TensorRTLLMEngine,
    MindIEEngine.name: MindIEEngine,
    LlamaCppEngine.name: LlamaCppEngine,
    ExternalEngine.name: ExternalEngine,
}


def engine_names() -> list[str]:
    return sorted(_REGISTRY)


def register_engine(spec: type[EngineSpec]) -> None:
    """Add an engine; used by the built-in modules and open to users' conftest files."""
    _REGISTRY[spec.name] = spec


def get_engine(name: str) -> EngineSpec:
    try:
        return _REGISTRY[name]()
    except KeyError:
        valid = ", ".join(engine_names())
        raise ConfigError(
            f"unknown engine {name!r} (--engine): valid engines are {valid}"
        ) from None


__all__ = [
    "EngineSpec",
    "LaunchPlan",
    "LaunchRequest",
    "RequestQuirks",
    "engine_names",
    "get_engine",
    "register_engine",
]
