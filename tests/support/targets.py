"""A ``Target`` for tests that never send a request through it (the gate's and A/B's loops
measure through the callables the tests give them)."""

from __future__ import annotations

from typing import Any

from pytest_llmperf.engines import get_engine
from pytest_llmperf.engines.session import Target


def unreachable_target(engine: str = "vllm", model: str = "m", **fields: Any) -> Target:
    """A target of ``engine`` serving ``model`` at a port nothing listens on."""
    values: dict[str, Any] = {
        "base_url": "http://127.0.0.1:1",
        "served_model": model,
        "model": model,
        "command": "",
        "version": None,
        **fields,
    }
    return Target(engine=engine, spec=get_engine(engine), **values)
