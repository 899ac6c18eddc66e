"""How a vLLM started by a test or a bench loads tests/bench/engine_slowdown: its folder goes
in front of the engine's PYTHONPATH, where vLLM finds the plugin's entry point."""

from __future__ import annotations

import os
from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "bench" / "engine_slowdown"


def pythonpath_with_slowdown() -> str:
    """This process's PYTHONPATH with the plugin's folder in front (kept for the engine, so
    whatever this process imports from it the engine can import too)."""
    return os.pathsep.join(p for p in (str(PLUGIN_DIR), os.environ.get("PYTHONPATH")) if p)
