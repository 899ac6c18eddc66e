"""What the reliability tests and ``tests/bench/fault_table.py`` share.

A scenario runs the plugin the way CI does, as a separate pytest process in a scratch
project (its own ``pytest.ini``, a small profiles file, a perf test), and then asks two
questions: which processes that the scenario started are still alive, and which files that a
person reviewed changed. Processes are found by a token in their environment, which every
child inherits (vLLM's engine core included, whatever process group it moves to).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from pytest_llmperf.engines.warden import is_alive, running
from pytest_llmperf.gate import store

TOKEN_VARIABLE = "LLMPERF_FAULT_SCENARIO"

# Small random workloads: 8 prompts of 32 tokens in, 32 out (fewer output tokens may all
# arrive in one network read, which leaves TPOT without samples). "tiny" is the default.
PROFILES_YAML = textwrap.dedent(
    """
    profiles:
      tiny:
        dataset: random
        input_len: 32
        output_len: 32
        num_prompts: 8
      tiny-a:
        dataset: random
        input_len: 32
        output_len: 32
        num_prompts: 8
        seed: 1
      tiny-b:
        dataset: random
        input_len: 32
        output_len: 32
        num_prompts: 8
        seed: 2
      tiny-c:
        dataset: random
        input_len: 32
        output_len: 32
        num_prompts: 8
        seed: 3
      tiny-d:
        dataset: random
        input_len: 32
        output_len: 32
        num_prompts: 8
        seed: 4
      busy:
        dataset: random
        input_len: 32
        output_len: 128
        num_prompts: 64
        max_concurrency: 2
    """
)

PERF_TEST = textwrap.dedent(
    """
    def test_perf(llmperf):
        llmperf.check()
    """
)

INI = textwrap.dedent(
    """
    [pytest]
    llmperf_profiles = profiles.yaml
    """
)


# Every report the plugin offers, and pytest's own temporary folder inside the project, so
# that a scan of the project sees everything a run wrote.
REPORTS = [
    "--llmperf-json=out/results.json",
    "--llmperf-summary=out/summary.md",
    "--llmperf-html=out/report.html",
    "--llmperf-history=out/history.jsonl",
    "--junitxml=out/junit.xml",
    "--basetemp=tmp",
    "-v",
]


def files_containing(root: Path, *needles: str) -> list[str]:
    """The files below ``root`` (relative paths) that hold any of ``needles``."""
    raw = [needle.encode() for needle in needles]
    return [
        str(path.relative_to(root))
        for path in sorted(root.rglob("*"))
        if path.is_file() and any(n in path.read_bytes() for n in raw)
    ]


@dataclass
class Project:
    """A scratch project: ``pytest.ini``, ``profiles.yaml``, tests, ``baselines/``."""

    root: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def baselines(self) -> Path:
        return self.root / "baselines"

    def baseline_file(self, model: str, engine: str = "external", hardware: str = "cpu") -> Path:
        return store.baseline_path(self.baselines, hardware, model, engine)


def make_project(
    root: Path, test_source: str = PERF_TEST, profiles: str = PROFILES_YAML
) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text(INI)
    (root / "profiles.yaml").write_text(profiles)
    (root / "test_perf.py").write_text(test_source)
    (root / "baselines").mkdir(exist_ok=True)
    return Project(root)


def external_args(endpoint: str, model: Path | str) -> list[str]:
    """Options that point the plugin at a running server and keep runs small."""
    return [
        "--engine=external",
        f"--endpoint={endpoint}",
        f"--model={model}",
        "--hardware=cpu",
        "--llmperf-warmups=0",
        "--baseline-dir=baselines",
        "--llmperf-profile=tiny",
    ]


@dataclass
class InnerRun:
    returncode: int
    output: str
    seconds: float
    token: str

    @property
    def log(self) -> str:
        """What a failed assertion shows (a string: pytest would shorten an object's repr)."""
        return f"exit {self.returncode} after {self.seconds:.1f} s\n{self.output[-6000:]}"


def inner_env(project: Project, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        TOKEN_VARIABLE: project.token,
    }
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.update(extra or {})
    return env


def pytest_command(project: Project, args: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(project.root / "pytest.ini"),
        "--rootdir",
        str(project.root),
        "-p",
        "no:cacheprovider",
        "-rA",
        *args,
    ]


def run_pytest(
    project: Project,
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> InnerRun:
    """Run pytest in the project as a separate process and wait for it."""
    started = time.monotonic()
    child = subprocess.Popen(
        pytest_command(project, args),
        cwd=project.root,
        env=inner_env(project, env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    try:
        output, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        output, _ = child.communicate()
        output += f"\n[killed after {timeout} s]"
    return InnerRun(child.returncode, output, time.monotonic() - started, project.token)


# -- what a scenario left behind ----------------------------------------------------------


def alive(pid: int) -> bool:
    return is_alive(pid)


def processes_with_token(token: str) -> list[int]:
    """Live processes whose environment carries the scenario's token."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            carries = process.environ().get(TOKEN_VARIABLE) == token
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
        if carries and running(process):
            found.append(process.pid)
    return found


def leftover_processes(token: str, settle: float = 15.0) -> list[int]:
    """Processes of the scenario still alive once ``settle`` seconds have passed.

    An engine told to stop may take a few seconds to go; what is alive after that is a leak.
    """
    deadline = time.monotonic() + settle
    while (found := processes_with_token(token)) and time.monotonic() < deadline:
        time.sleep(0.25)
    return found


def kill_all(pids: list[int]) -> None:
    """Clean up after a failing scenario so it does not poison the next one."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root``, by relative path (hidden files included)."""
    hashes = {}
    if root.exists():
        for path in sorted(root.rglob("*")):
            if path.is_file():
                hashes[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def damaged_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Reviewed files that changed or vanished, and stray files (temporary writes) added.

    Lock files are not damage: they hold no data and a later run takes them again.
    """
    changed = [name for name, digest in before.items() if after.get(name) != digest]
    added = [name for name in after if name not in before and not name.endswith(".lock")]
    return changed + added


def seed_baseline(path: Path, profiles: dict[str, float]) -> None:
    """A reviewed baseline file with one entry per profile (metrics are made up)."""
    for name, throughput in profiles.items():
        store.record_entry(
            path,
            name,
            {
                "status": "ok",
                "recorded": "2025-01-01",
                "runs": 1,
                "metrics": {"total_token_throughput": throughput, "mean_tpot_ms": 5.0},
            },
            # No model: header: the folder name of a local model is not its name, and a
            # header naming another model is refused (gate.modelkey.check_model).
            header={"hardware": "cpu", "engine": path.stem},
        )
