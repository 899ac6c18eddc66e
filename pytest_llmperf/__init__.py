"""pytest-llmperf: gate LLM-serving performance in pytest.

Only the light modules are re-exported, because pytest imports the plugin in every run.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

if sys.platform == "win32":
    # Engines are started in a process group of their own and stopped with POSIX signals
    # (SIGKILL, killpg); nothing of that exists on Windows. Say so instead of failing later
    # on a missing signal.
    raise ImportError(
        "pytest-llmperf runs on Linux and macOS, not on Windows: it starts and stops engines "
        "with POSIX process groups and signals. Run pytest with -p no:llmperf to skip it "
        "here, or uninstall pytest-llmperf from this environment."
    )


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
