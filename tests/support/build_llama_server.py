"""Build llama.cpp's ``llama-server`` once and keep it in the cache; print its path.

Usage: ``python3 tests/support/build_llama_server.py [--sdist FILE] [--jobs N] [--check]``

The source is the llama.cpp tree vendored in the ``llama-cpp-python`` sdist (MIT), fetched with
pip, so no git clone or extra host is needed. The build is native (``-march=native``) because
performance is what this project measures; the cache folder records the CPU flags it was built
for, and a machine with other flags rebuilds instead of running illegal instructions.
Two processes that ask at once build it once: the second waits on a lock.

Standard library only (with the plugin's own stdlib-only cache rules from this source tree),
so CI can call it before anything is installed. Needs cmake and g++; ninja when present.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The plugin's cache rules, imported from the source tree: they need only the standard library.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from pytest_llmperf.engines.llamacpp_build import (
    BINARY,
    SDIST_PACKAGE,
    SDIST_VERSION,
    STAMP,
    build_dir,
    cached_llama_server,
    cpu_flags,
)

# A static binary: one file to cache and copy, no RPATH pointing into a deleted build tree.
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: list[str], cwd: Path | None = None) -> None:
    print("+", " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run(argv, cwd=cwd, check=True)


def download_sdist(into: Path) -> Path:
    """Fetch the sdist through pip (which knows the configured index and proxies).

    Only this package is taken as source: ``:all:`` would also build pip's metadata step's own
    build tools (scikit-build-core, hatchling, ...) from source, minutes for nothing.
    """
    spec = f"{SDIST_PACKAGE}=={SDIST_VERSION}"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", SDIST_PACKAGE]
    _run([*pip, "--dest", str(into), spec])
    found = sorted(into.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise SystemExit(f"pip download {spec} left no sdist in {into}")
    return found[0]


def unpack_llama_cpp(sdist: Path, into: Path) -> Path:
    """Unpack the sdist; the llama.cpp source tree inside it."""
    with tarfile.open(sdist) as archive:
        if sys.version_info >= (3, 12):
            archive.extractall(into, filter="data")
        else:  # the filter argument arrived in 3.12; a registry sdist is trusted input here
            archive.extractall(into)
    sources = sorted(into.glob("*/vendor/llama.cpp/CMakeLists.txt"))
    if not sources:
        raise SystemExit(f"{sdist.name} has no vendor/llama.cpp source tree")
    return sources[0].parent


def compile_server(source: Path, jobs: int) -> Path:
    """Configure and build only the ``llama-server`` target; the binary's path."""
    out = source / "build"
    # Ninja when present; make otherwise (slower to configure, same result).
    generator = ["-G", "Ninja"] if shutil.which("ninja") else ["-G", "Unix Makefiles"]
    _run(["cmake", "-S", str(source), "-B", str(out), *generator, *CMAKE_OPTIONS])
    _run(["cmake", "--build", str(out), "--target", BINARY, f"-j{jobs}"])
    binary = out / "bin" / BINARY
    if not binary.is_file():
        raise SystemExit(f"the build finished without {binary}")
    return binary


def install(binary: Path, root: Path | None, seconds: float) -> Path:
    """Move the binary into the cache with one rename, so no reader sees half a folder."""
    target = build_dir(root)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    (scratch / "bin").mkdir()
    shutil.copy2(binary, scratch / "bin" / BINARY)
    stamp = {"version": SDIST_VERSION, "cpu": cpu_flags(), "build_seconds": round(seconds)}
    (scratch / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
    scratch.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)  # a build for another CPU, or a broken one
    os.replace(scratch, target)
    return target / "bin" / BINARY


def build(root: Path | None = None, sdist: Path | None = None, jobs: int = 2) -> Path:
    """The cached binary, building it first when it is absent or for another CPU."""
    found = cached_llama_server(root)
    if found:
        return found
    with _locked(build_dir(root).with_name(f".{BINARY}-{SDIST_VERSION}.lock")):
        found = cached_llama_server(root)  # another process may have built it while we waited
        if found:
            return found
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="llama-server-build-") as work:
            scratch = Path(work)
            archive = sdist or download_sdist(scratch)
            source = unpack_llama_cpp(archive, scratch / "src")
            binary = compile_server(source, jobs)
            return install(binary, root, time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="use this sdist instead of downloading it")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs")
    parser.add_argument(
        "--check", action="store_true", help="only say whether a usable build is cached"
    )
    args = parser.parse_args()
    if args.check:
        found = cached_llama_server()
        print(found or f"no {BINARY} build for this CPU in {build_dir()}")
        return 0 if found else 1
    print(build(sdist=args.sdist, jobs=args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
