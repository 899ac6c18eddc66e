"""Where the llama-server that ``tests/support/build_llama_server.py`` builds is kept.

The build is native (``-march=native``): performance is what this project measures. A native
binary may use instructions another CPU lacks, so the folder records a hash of the CPU flags it
was built for and is used only on a CPU with the same flags. Standard library only: the build
script imports this before any dependency is installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from pytest_llmperf.engines.tinymodel import default_cache_dir

# The llama.cpp source comes vendored in this sdist of llama-cpp-python (MIT licensed).
SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
BINARY = "llama-server"
STAMP = "build.json"
BUILD_COMMAND = "python3 tests/support/build_llama_server.py"


def build_dir(root: Path | None = None) -> Path:
    """The cache folder of this build: one per source version."""
    return (root or default_cache_dir()) / f"{BINARY}-{SDIST_VERSION}"


def cpu_flags() -> str:
    """A short hash of this CPU's architecture and feature flags."""
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return hashlib.sha256(f"{os.uname().machine} {flags}".encode()).hexdigest()[:12]


def cached_llama_server(root: Path | None = None) -> Path | None:
    """The cached ``llama-server`` when it was built for this CPU; otherwise None."""
    folder = build_dir(root)
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    binary = folder / "bin" / BINARY
    if stamp.get("cpu") != cpu_flags() or not os.access(binary, os.X_OK):
        return None
    return binary


def default_llama_server() -> str:
    """The llama-server to start when ``--engine-bin`` names none.

    One on PATH wins (someone installed it on purpose); then the cached build. The bare name
    otherwise, so a start fails with the executable-not-found error, which names the fix.
    """
    if shutil.which(BINARY):
        return BINARY
    cached = cached_llama_server()
    return str(cached) if cached else BINARY
