"""pytest-llmperf: gate LLM-serving performance in pytest.

Only the light modules are re-exported, because pytest imports the plugin in every run.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from pytest_llmperf.errors import (
    BaselineError,
    ConfigError,
    EngineDiedError,
    EngineStartError,
    LLMPerfError,
    ProfileError,
)
from pytest_llmperf.models import (
    Direction,
    MetricComparison,
    Outcome,
    RequestRecord,
    SampleRequest,
    Verdict,
)

try:
    __version__ = version("pytest-llmperf")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"

__all__ = [
    "BaselineError",
    "ConfigError",
    "Direction",
    "EngineDiedError",
    "EngineStartError",
    "LLMPerfError",
    "MetricComparison",
    "Outcome",
    "ProfileError",
    "RequestRecord",
    "SampleRequest",
    "Verdict",
    "__version__",
]
