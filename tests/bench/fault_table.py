"""Inject every fault of the reliability work and print what happened, one row each.

    python tests/bench/fault_table.py [--upstream URL] [--only WORD,...] [--rounds N]

Columns: the fault injected; the outcome a user sees (and how fast); the processes the
scenario started that are still alive after it (found by a token in their environment, so a
vLLM engine core that changed its process group is found too); and the reviewed files that
were damaged (a baseline that changed when it should not have, no longer parses, lost an
entry, or got a stray temporary file next to it). Every row must read 0 and 0: the script
exits 1 otherwise.

Scenarios run the plugin as CI does, as a separate pytest process in a scratch project.
Network faults go through the fault proxy (tests/support/fault_proxy.py) in front of one real
vLLM server (CPU build, tiny model) that the script starts, or the one ``--upstream`` names;
the engine-death and start-up scenarios start their own engines through the plugin.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from pytest_llmperf.gate import (
    store,
)
from tests.reliability import baseline_writer
from tests.reliability.helpers import (
    PERF_TEST,
    PROFILES_YAML,
    REPORTS,
    InnerRun,
    Project,
    damaged_files,
    external_args,
    file_hashes,
    inner_env,
    kill_all,
    leftover_processes,
    make_project,
    pytest_command,
    run_pytest,
    seed_baseline,
)
from tests.reliability.test_engine_death import KILLING_TESTS
from tests.reliability.test_startup_faults import PORT_THIEF_TESTS, TWO_TESTS
from tests.support.fault_proxy import Fault, FaultPlan, FaultProxy


@dataclass
class Row:
    fault: str
    outcome: str
    processes: int
    damaged: int


@dataclass
class Lab:
    root: Path
    model: Path  # the tiny model's folder: tokenizer and (for external runs) baseline key
    proxy: FaultProxy
    rounds: int

    def project(self, name: str, source: str = PERF_TEST, profiles: str | None = None) -> Project:
        kwargs = {} if profiles is None else {"profiles": profiles}
        return make_project(self.root / name, source, **kwargs)


# -- reading what happened -------------------------------------------------------------------


def headline(output: str, *needles: str) -> str:
    """The first output line holding one of ``needles`` (the user-facing message)."""
    for line in output.splitlines():
        text = line.strip().removeprefix("E ").strip()
        if any(needle in text for needle in needles):
            return text.removeprefix("ERROR: ")
    return "(no message found)"


def short(text: str, width: int = 110) -> str:
    # The scratch folder's name says nothing in a table.
    text = re.sub(r"/\S*/llmperf-faults-[^/]+/", "<tmp>/", " ".join(text.split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def entries_damage(folder: Path, before: dict[str, set[str]]) -> list[str]:
    """Baselines that no longer parse or lost an entry, and stray files; after an update."""
    problems = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.endswith(".lock"):
            continue
        name = str(path.relative_to(folder))
        if path.suffix != ".yaml":
            problems.append(f"{name}: stray file")
            continue
        try:
            entries = set(store.load_all(path))
        except Exception as exc:
            problems.append(f"{name}: {exc}")
            continue
        lost = before.get(name, set()) - entries
        if lost:
            problems.append(f"{name}: lost {sorted(lost)}")
    missing = [name for name in before if not (folder / name).exists()]
    return problems + [f"{name}: missing" for name in missing]


def entry_names(folder: Path) -> dict[str, set[str]]:
    return {
        str(p.relative_to(folder)): set(store.load_all(p)) for p in sorted(folder.rglob("*.yaml"))
    }


def finish(project: Project, run: InnerRun) -> int:
    """Processes of the scenario still alive; they are killed so the next row starts clean."""
    left = leftover_processes(run.token)
    kill_all(left)
    return len(left)


# -- scenarios: the engine ---------------------------------------------------------------------


def engine_killed(lab: Lab) -> Row:
    project = lab.project("engine-killed", KILLING_TESTS)
    seed_baseline(project.baseline_file("tiny-qwen3", "vllm"), {"busy": 1.0, "tiny": 1.0})
    before = file_hashes(project.baselines)
    run = run_pytest(
        project,
        [
            "--engine=vllm",
            "--hardware=cpu",
            "--llmperf-warmups=0",
            "--baseline-dir=baselines",
            "--basetemp=tmp",
            "--junitxml=junit.xml",
            "-o",
            "junit_duration_report=call",
            "--update-baselines",
        ],
        env={"LLMPERF_DEATH_DIR": str(project.root)},
        timeout=1200,
    )
    left = finish(project, run)
    cases = []
    for case in ET.parse(project.root / "junit.xml").getroot().iter("testcase"):
        failure = case.find("failure")
        message = "" if failure is None else failure.get("message") or ""
        cases.append((float(case.get("time", "0")), message))
    first_time, first_message = cases[0]
    died = "engine exited with code" in first_message
    later = [t for t, m in cases[1:] if "engine exited with code" in m]
    outcome = (
        f"running test failed after {first_time:.1f} s: "
        f"{'engine exited + log tail' if died else short(first_message, 60)}; "
        f"{len(later)} later tests failed at once ({max(later, default=0):.2f} s max)"
    )
    return Row(
        "engine core SIGKILL mid-run",
        outcome,
        left,
        len(damaged_files(before, file_hashes(project.baselines))),
    )


def startup(lab: Lab, name: str, args: list[str], needle: str, source: str = TWO_TESTS) -> Row:
    project = lab.project(re.sub(r"[^a-z0-9]+", "-", name), source)
    seed_baseline(project.baseline_file("tiny-qwen3", "vllm"), {"tiny": 1.0})
    before = file_hashes(project.baselines)
    run = run_pytest(
        project,
        [
            "--engine=vllm",
            "--hardware=cpu",
            "--llmperf-profile=tiny",
            "--update-baselines",
            "--basetemp=tmp",
            *args,
        ],
        timeout=600,
    )
    left = finish(project, run)
    message = headline(run.output, needle)
    both = "both tests failed" if run.output.count(needle) >= 2 else "failed"
    return Row(
        name,
        f"{both} in {run.seconds:.1f} s: " + short(message, 80),
        left,
        len(damaged_files(before, file_hashes(project.baselines))),
    )


def engine_scenarios(lab: Lab) -> list[tuple[str, Callable[[], Row]]]:
    missing_bin = lab.root / "nowhere" / "vllm"
    missing_model = lab.root / "models" / "Qwen3-32B"
    broken = lab.root / "broken-model"

    def broken_model() -> Row:
        broken.mkdir(parents=True, exist_ok=True)
        for item in lab.model.iterdir():
            if item.is_file():
                (broken / item.name).write_bytes(item.read_bytes())
        (broken / "config.json").write_text('{"model_type": "qwen3", "hidden_size": ')
        return startup(
            lab, "model broken (cut config.json)", [f"--model={broken}"], "exited with code"
        )

    return [
        ("engine-kill", lambda: engine_killed(lab)),
        (
            "port",
            lambda: startup(lab, "port already taken", [], "already in use", PORT_THIEF_TESTS),
        ),
        (
            "binary",
            lambda: startup(
                lab, "engine binary missing", [f"--llmperf-engine-bin={missing_bin}"], "not found"
            ),
        ),
        (
            "model-missing",
            lambda: startup(
                lab, "model folder missing", [f"--model={missing_model}"], "no such file or folder"
            ),
        ),
        ("model-broken", broken_model),
        (
            "readiness",
            lambda: startup(
                lab, "readiness timeout (4 s)", ["--llmperf-startup-timeout=4"], "was not ready"
            ),
        ),
    ]


# -- scenarios: the network ------------------------------------------------------------------


def stream_fault(lab: Lab, name: str, fault: Fault, extra: list[str] | None = None) -> Row:
    project = lab.project(name.split(" ")[0] + "-" + uuid.uuid4().hex[:6])
    seed_baseline(project.baseline_file(str(lab.model)), {"tiny": 1.0})
    before = file_hashes(project.baselines)
    lab.proxy.set_plan(FaultPlan(requests={2: fault, 5: fault}))
    run = run_pytest(
        project,
        [*external_args(lab.proxy.url, lab.model), "--update-baselines", *(extra or [])],
    )
    left = finish(project, run)
    note = headline(run.output, "requests failed (allowed")
    counted = note.split(" (allowed")[0].removeprefix("note: ")
    reason = note.split("first reasons: ", 1)[-1]
    return Row(
        name,
        f"test failed in {run.seconds:.1f} s: {counted}: " + short(reason, 70),
        left,
        len(damaged_files(before, file_hashes(project.baselines))),
    )


def within_budget(lab: Lab) -> Row:
    project = lab.project("within-budget")
    path = project.baseline_file(str(lab.model))
    seed_baseline(path, {"tiny": 1.0, "kept": 2.0})
    names = entry_names(project.baselines)
    cut = Fault("cut", after_events=2)
    lab.proxy.set_plan(FaultPlan(requests={1: cut, 6: Fault("status", status=503)}))
    run = run_pytest(
        project,
        [*external_args(lab.proxy.url, lab.model), "--update-baselines", "--llmperf-max-failed=2"],
    )
    left = finish(project, run)
    entry = store.load_entry(path, "tiny")
    recorded = entry is not None and entry.metrics.get("failed") == 2
    return Row(
        "2 faults, --llmperf-max-failed=2, --update-baselines",
        f"{'passed' if run.returncode == 0 else 'FAILED'}; recorded with failed=2: {recorded}",
        left,
        len(entries_damage(project.baselines, names)),
    )


def network_scenarios(lab: Lab) -> list[tuple[str, Callable[[], Row]]]:
    return [
        (
            "cut",
            lambda: stream_fault(lab, "stream cut after 2 events", Fault("cut", after_events=2)),
        ),
        (
            "cut-bytes",
            lambda: stream_fault(
                lab, "stream cut mid-event (20 bytes)", Fault("cut", after_bytes=20)
            ),
        ),
        ("http500", lambda: stream_fault(lab, "HTTP 500", Fault("status", status=500))),
        (
            "http429",
            lambda: stream_fault(lab, "HTTP 429", Fault("status", status=429, message="slow down")),
        ),
        (
            "bad-sse",
            lambda: stream_fault(lab, "malformed SSE event", Fault("bad_sse", after_events=1)),
        ),
        (
            "error-event",
            lambda: stream_fault(
                lab,
                "error event mid-stream",
                Fault("error_event", after_events=2, message="EngineCore died"),
            ),
        ),
        (
            "stall",
            lambda: stream_fault(
                lab,
                "stalled stream, timeout 3 s",
                Fault("stall", after_events=1),
                ["--llmperf-request-timeout=3"],
            ),
        ),
        ("drop", lambda: stream_fault(lab, "connection dropped before answer", Fault("drop"))),
        ("budget", lambda: within_budget(lab)),
    ]


# -- scenarios: bad input --------------------------------------------------------------------


def bad_input(
    lab: Lab,
    name: str,
    args: list[str],
    needle: str,
    baseline_text: str | None = None,
    profiles: str | None = None,
) -> Row:
    project = lab.project("input-" + uuid.uuid4().hex[:6], profiles=profiles)
    path = project.baseline_file(str(lab.model))
    if baseline_text is None:
        seed_baseline(path, {"tiny": 1.0})
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(baseline_text)
    before = file_hashes(project.baselines)
    lab.proxy.set_plan(None)
    own_profile = any(a.startswith("--llmperf-profile") for a in args)
    common = [
        a for a in external_args(lab.proxy.url, lab.model) if not (own_profile and "profile" in a)
    ]
    run = run_pytest(project, [*common, "--update-baselines", "--llmperf-json=out.json", *args])
    left = finish(project, run)
    sent = lab.proxy.stats()["load_requests"]
    written = (project.root / "out.json").exists()
    return Row(
        name,
        f"{'usage error' if run.returncode == 4 else 'test failed'} in {run.seconds:.1f} s, "
        f"{sent} requests sent: "
        + short(headline(run.output, needle).replace(str(path), path.name), 70),
        left,
        len(damaged_files(before, file_hashes(project.baselines))) + int(written),
    )


def input_scenarios(lab: Lab) -> list[tuple[str, Callable[[], Row]]]:
    broken_yaml = "schema: 1\nprofiles:\n  tiny:\n    metrics: {mean_tpot_ms: [5.0}\n"
    sharegpt = PROFILES_YAML + "  sg:\n    dataset: sharegpt\n    num_prompts: 4\n"
    return [
        (
            "yaml",
            lambda: bad_input(lab, "malformed baseline YAML", [], "not valid YAML", broken_yaml),
        ),
        (
            "schema",
            lambda: bad_input(
                lab,
                "baseline with a wrong schema",
                [],
                "expected a number",
                "profiles:\n  tiny:\n    metrics: {mean_tpot_ms: fast}\n",
            ),
        ),
        (
            "profile",
            lambda: bad_input(
                lab, "unknown profile", ["--llmperf-profile=huge"], "unknown profile"
            ),
        ),
        ("engine", lambda: bad_input(lab, "unknown engine", ["--engine=tgi"], "unknown engine")),
        (
            "sharegpt",
            lambda: bad_input(
                lab,
                "ShareGPT file missing",
                ["--llmperf-profile=sg"],
                "reads a ShareGPT file",
                None,
                sharegpt,
            ),
        ),
        (
            "zero",
            lambda: bad_input(lab, "--num-prompts=0", ["--num-prompts=0"], "expected a positive"),
        ),
        (
            "negative",
            lambda: bad_input(
                lab, "--llmperf-max-failed=-1", ["--llmperf-max-failed=-1"], "expected a"
            ),
        ),
    ]


# -- scenarios: data safety ------------------------------------------------------------------


def xdist_update(lab: Lab) -> Row:
    project = lab.project("xdist")
    path = project.baseline_file(str(lab.model))
    seed_baseline(path, {"kept": 1.0})
    names = entry_names(project.baselines)
    lab.proxy.set_plan(None)
    args = [a for a in external_args(lab.proxy.url, lab.model) if "profile" not in a]
    run = run_pytest(
        project,
        [*args, "--llmperf-profile=tiny-a,tiny-b,tiny-c,tiny-d", "--update-baselines", "-n", "4"],
    )
    left = finish(project, run)
    entries = sorted(store.load_all(path)) if path.exists() else []
    return Row(
        "--update-baselines from 4 xdist workers",
        f"{'passed' if run.returncode == 0 else 'FAILED'} in {run.seconds:.1f} s; one file with "
        f"{', '.join(entries)}",
        left,
        len(entries_damage(project.baselines, names)) + (0 if len(entries) == 5 else 1),
    )


def writer_interrupted(lab: Lab, sig: signal.Signals) -> Row:
    folder = lab.root / f"writer-{sig.name}"
    path = folder / "cpu" / "tiny-qwen3" / "vllm.yaml"
    baseline_writer.seed(path, 40)
    names = entry_names(folder)
    token = uuid.uuid4().hex
    torn = 0
    last = 0
    for round_ in range(lab.rounds):
        writer = subprocess.Popen(
            [sys.executable, str(baseline_writer.SCRIPT), str(path), "p", str(last + 1)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "LLMPERF_FAULT_SCENARIO": token},
        )
        assert writer.stdout is not None
        writer.stdout.readline()
        time.sleep(0.13 * (round_ % 3))  # right after an update, or well inside the next
        writer.send_signal(sig)
        writer.communicate(timeout=60)
        try:
            entry = store.load_entry(path, "p")
            last = int(entry.metrics["metric_0"] // 1000) if entry else last
        except Exception:
            torn += 1
    strays_before_next = len([p for p in path.parent.iterdir() if p.name.endswith(".tmp")])
    left = leftover_processes(token, settle=2)
    kill_all(left)
    return Row(
        f"{sig.name} to a baseline update, {lab.rounds} times",
        f"{torn} torn reads; file holds a complete update ({last}); "
        f"{strays_before_next} temp file(s) of killed writes, removed by the next update",
        len(left),
        torn + len(entries_damage_after_next_update(path, names, folder)),
    )


def entries_damage_after_next_update(
    path: Path, names: dict[str, set[str]], folder: Path
) -> list[str]:
    store.record_entry(path, "p", baseline_writer.entry(0), header=baseline_writer.HEADER)
    return entries_damage(folder, names)


ATOMIC_WRITER = """
import sys
from pathlib import Path
from pytest_llmperf.atomic import write_atomically
path, texts = Path(sys.argv[1]), [Path(p).read_text() for p in sys.argv[2:]]
print("ready", flush=True)
k = 0
while True:
    k += 1
    write_atomically(path, texts[k % 2])
"""


def write_killed(lab: Lab) -> Row:
    """SIGKILL while a 1 MB baseline is being written: the rename is the only moment."""
    folder = lab.root / "write-killed"
    path = folder / "cpu" / "tiny-qwen3" / "vllm.yaml"
    texts = []
    for k in (0, 1):
        document = {
            "schema": 1,
            **baseline_writer.HEADER,
            "note": "x" * 1_000_000,
            "profiles": {"p": baseline_writer.entry(k)},
        }
        texts.append(store.dump_document(document))
        (lab.root / f"text-{k}.yaml").write_text(texts[k])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(texts[0])
    names = entry_names(folder)
    token = uuid.uuid4().hex
    torn = 0
    for round_ in range(lab.rounds):
        writer = subprocess.Popen(
            [sys.executable, "-c", ATOMIC_WRITER, str(path)]
            + [str(lab.root / f"text-{k}.yaml") for k in (0, 1)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "LLMPERF_FAULT_SCENARIO": token},
        )
        assert writer.stdout is not None
        writer.stdout.readline()
        time.sleep(0.05 + 0.07 * (round_ % 4))
        writer.kill()
        writer.communicate(timeout=60)
        torn += path.read_text() not in texts
    strays = len([p for p in path.parent.iterdir() if p.name.endswith(".tmp")])
    left = leftover_processes(token, settle=2)
    kill_all(left)
    return Row(
        f"SIGKILL inside a 1 MB baseline write, {lab.rounds} times",
        f"{torn} torn files; {strays} temp file(s) of killed writes, removed by the next update",
        len(left),
        torn + len(entries_damage_after_next_update(path, names, folder)),
    )


def pytest_interrupted(lab: Lab, sig: signal.Signals) -> Row:
    """The whole pytest gets the signal in the middle of an --update-baselines session."""
    project = lab.project(f"pytest-{sig.name}")
    path = project.baseline_file(str(lab.model))
    seed_baseline(path, {"kept": 1.0, "tiny-a": 1.0, "tiny-b": 1.0, "tiny-c": 1.0, "tiny-d": 1.0})
    names = entry_names(project.baselines)
    lab.proxy.set_plan(FaultPlan(default=Fault("pass", latency_ms=400)))
    args = [a for a in external_args(lab.proxy.url, lab.model) if "profile" not in a]
    child = subprocess.Popen(
        pytest_command(
            project, [*args, "--llmperf-profile=tiny-a,tiny-b,tiny-c,tiny-d", "--update-baselines"]
        ),
        cwd=project.root,
        env=inner_env(project),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while lab.proxy.stats()["load_requests"] < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(sig)
    output = child.communicate(timeout=120)[0]
    left = leftover_processes(project.token)
    kill_all(left)
    entries = entry_names(project.baselines).get(str(path.relative_to(project.baselines)), set())
    interrupted = "KeyboardInterrupt" in output or sig == signal.SIGKILL
    return Row(
        f"{sig.name} to pytest during --update-baselines",
        f"pytest {'stopped' if interrupted else 'ran on'} (exit {child.returncode}) in profile "
        f"2 of 4; file valid with all {len(entries)} entries",
        len(left),
        len(entries_damage(project.baselines, names)),
    )


def safety_scenarios(lab: Lab) -> list[tuple[str, Callable[[], Row]]]:
    return [
        ("xdist", lambda: xdist_update(lab)),
        ("writer-kill", lambda: writer_interrupted(lab, signal.SIGKILL)),
        ("writer-int", lambda: writer_interrupted(lab, signal.SIGINT)),
        ("write-kill", lambda: write_killed(lab)),
        ("pytest-int", lambda: pytest_interrupted(lab, signal.SIGINT)),
        ("pytest-kill", lambda: pytest_interrupted(lab, signal.SIGKILL)),
    ]


# -- scenarios: secrets ----------------------------------------------------------------------


def api_key(lab: Lab) -> Row:
    key = f"sk-llmperf-{uuid.uuid4().hex}"
    project = lab.project("api-key")
    seed_baseline(project.baseline_file(str(lab.model)), {"kept": 1.0})
    names = entry_names(project.baselines)
    echo = Fault("status", status=401, message="bad key {authorization}")
    lab.proxy.set_plan(FaultPlan(requests={3: echo}))
    reports = ["--llmperf-api-key-env=LLMPERF_TABLE_KEY", *REPORTS]
    env = {"LLMPERF_TABLE_KEY": key}
    runs = [
        run_pytest(
            project,
            [
                *external_args(lab.proxy.url, lab.model),
                *reports,
                "--update-baselines",
                "--llmperf-max-failed=1",
            ],
            env=env,
        )
    ]
    sent = lab.proxy.requests
    runs.append(run_pytest(project, [*external_args(lab.proxy.url, lab.model), *reports], env=env))
    sent += lab.proxy.requests
    left = sum(finish(project, run) for run in runs)
    files = [p for p in project.root.rglob("*") if p.is_file()]
    leaking = [p for p in files if key.encode() in p.read_bytes()]
    lines = sum(run.output.count(key) for run in runs)
    elsewhere = 0
    for request in sent:
        others = "".join(v for k, v in request["headers"] if k.lower() != "authorization")
        elsewhere += key in request["path"] + request["body"] + others
    load = [r for r in sent if r["ordinal"] is not None]
    bearer = ["authorization", f"Bearer {key}"]
    in_header = sum(1 for r in load if any([k.lower(), v] == bearer for k, v in r["headers"]))
    return Row(
        "API key from an env var (server echoes it back)",
        f"key in {len(leaking)} of {len(files)} files, {lines} output lines; in the Authorization "
        f"header of {in_header} of {len(load)} load requests, elsewhere in {elsewhere} requests",
        left,
        len(entries_damage(project.baselines, names)) + len(leaking),
    )


def hostile_engine_args(lab: Lab) -> Row:
    project = lab.project("engine-args")
    fake = project.root / "bin" / "fake-vllm"
    fake.parent.mkdir()
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "json.dump(sys.argv, open(os.environ['LLMPERF_ARGV_FILE'], 'w'))\nsys.exit(3)\n"
    )
    fake.chmod(0o755)
    marker = project.root / "pwned"
    hostile = ["--served-model-name", f"x; touch {marker}", "--chat-template", f"$(touch {marker})"]
    argv_file = project.root / "argv.json"
    run = run_pytest(
        project,
        [
            "--engine=vllm",
            f"--llmperf-engine-bin={fake}",
            f"--model={lab.model}",
            "--hardware=cpu",
            "--llmperf-profile=tiny",
            f"--engine-args={shlex.join(hostile)}",
        ],
        env={"LLMPERF_ARGV_FILE": str(argv_file)},
    )
    left = finish(project, run)
    argv = json.loads(argv_file.read_text()) if argv_file.exists() else []
    exact = argv[3 : 3 + len(hostile)] == hostile
    return Row(
        "engine args with shell syntax",
        f"argv received exactly: {exact}; shell ran: {marker.exists()}",
        left,
        int(marker.exists()) + int(not exact),
    )


def secret_scenarios(lab: Lab) -> list[tuple[str, Callable[[], Row]]]:
    return [("api-key", lambda: api_key(lab)), ("argv", lambda: hostile_engine_args(lab))]


# -- the table -------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    header = ("fault injected", "outcome", "processes left", "files damaged")
    cells = [header] + [(r.fault, r.outcome, str(r.processes), str(r.damaged)) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--upstream", help="a running vLLM server serving the tiny model")
    parser.add_argument("--only", help="comma-separated scenario keys (e.g. cut,xdist)")
    parser.add_argument("--rounds", type=int, default=10, help="interrupts per writer row")
    args = parser.parse_args()
    for key, value in {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}.items():
        os.environ.setdefault(key, value)

    from pytest_llmperf.engines.tinymodel import ensure_tiny_model
    from tests.conftest import start_vllm

    model = ensure_tiny_model()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="llmperf-faults-") as scratch:
        root = Path(scratch)
        server = None
        upstream = args.upstream
        if upstream is None:
            server = start_vllm(model, root / "shared-server.log")
            upstream = server.base_url
        try:
            with FaultProxy(upstream) as proxy:
                lab = Lab(root, model, proxy, args.rounds)
                chosen = set(args.only.split(",")) if args.only else None
                for key, scenario in (
                    network_scenarios(lab)
                    + input_scenarios(lab)
                    + safety_scenarios(lab)
                    + secret_scenarios(lab)
                    + engine_scenarios(lab)
                ):
                    if chosen is not None and key not in chosen:
                        continue
                    started = time.monotonic()
                    row = scenario()
                    rows.append(row)
                    print(
                        f"[{time.monotonic() - started:5.1f} s] {row}", file=sys.stderr, flush=True
                    )
        finally:
            if server is not None:
                server.stop()
                left = server.leftover_pids()
                print(f"shared vLLM server stopped, {len(left)} process(es) left", file=sys.stderr)
    print(table(rows))
    bad = [r for r in rows if r.processes or r.damaged]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
