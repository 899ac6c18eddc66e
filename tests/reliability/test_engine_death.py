"""The engine dies in the middle of a measured run (SIGKILL to vLLM's engine-core process).

The plugin starts its own vLLM server (the shared one must survive), the first test kills
the engine core as soon as the server reports requests running, and two later tests use the
same session. The test that was running must fail saying the engine exited, with the log
tail; the later ones must fail at once for the same reason instead of sending requests into
nothing and waiting for timeouts; and no process of the engine may be left.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_llmperf.engines.server import descendants
from tests.conftest import requires_vllm
from tests.reliability.helpers import (
    alive,
    file_hashes,
    kill_all,
    leftover_processes,
    make_project,
    run_pytest,
    seed_baseline,
)

pytestmark = [pytest.mark.e2e, requires_vllm]

KILLING_TESTS = textwrap.dedent(
    """
    import os
    import re
    import signal
    import threading
    import time
    from pathlib import Path

    import httpx
    import psutil
    import pytest

    from pytest_llmperf.measure import loadgen
    from pytest_llmperf.engines.server import descendants

    RUNNING = re.compile(r"^vllm:num_requests_running\\{[^}]*\\} ([0-9.]+)$", re.M)


    def engine_core(leader):
        for pid in descendants(leader):
            if "EngineCore" in " ".join(psutil.Process(pid).cmdline()):
                return pid
        raise AssertionError("no EngineCore process below the server")


    LOAD_STARTED = threading.Event()
    _run_load = loadgen.run_load


    def run_load(*args, **kwargs):
        LOAD_STARTED.set()
        return _run_load(*args, **kwargs)


    loadgen.run_load = run_load  # tells the killer when the measured load begins


    def kill_when_busy(server, core, report):
        # Kill while requests are being served: mid-run, not before it or after it. The
        # server's own count of running requests says when; one second into the load
        # at the latest.
        LOAD_STARTED.wait(300)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                text = httpx.get(server.base_url + "/metrics", timeout=1, trust_env=False).text
            except httpx.HTTPError:
                text = ""
            if sum(float(v) for v in RUNNING.findall(text)) >= 1:
                break
            time.sleep(0.02)
        os.kill(core, signal.SIGKILL)
        report.write_text(f"{time.monotonic()}")


    @pytest.mark.llmperf(profiles=["busy"])
    def test_1_engine_dies_mid_run(llmperf):
        server = llmperf.target.server
        out = Path(os.environ["LLMPERF_DEATH_DIR"])
        core = engine_core(server.pid)
        (out / "family").write_text(" ".join(map(str, {server.pid, *descendants(server.pid)})))
        (out / "core").write_text(str(core))
        threading.Thread(
            target=kill_when_busy, args=(server, core, out / "killed"), daemon=True
        ).start()
        llmperf.check()


    @pytest.mark.llmperf(profiles=["tiny"])
    def test_2_later_test(llmperf):
        llmperf.check()


    @pytest.mark.llmperf(profiles=["tiny"])
    def test_3_later_test(llmperf):
        llmperf.check()
    """
)


def _cases(junit: Path) -> dict[str, tuple[float, str]]:
    """name -> (seconds, failure message) from a JUnit XML report."""
    cases = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failure = case.find("failure")
        message = "" if failure is None else (failure.get("message") or "") + (failure.text or "")
        cases[case.get("name", "")] = (float(case.get("time", "0")), message)
    return cases


def test_engine_killed_mid_run_fails_that_test_and_later_ones_fast(tmp_path: Path) -> None:
    project = make_project(tmp_path, KILLING_TESTS)
    seed_baseline(project.baseline_file("tiny-qwen3", "vllm"), {"busy": 100.0, "tiny": 100.0})
    before = file_hashes(project.baselines)
    run = run_pytest(
        project,
        [
            "--engine=vllm",
            "--hardware=cpu",
            "--llmperf-warmups=0",
            "--baseline-dir=baselines",
            "--junitxml=junit.xml",
            "-o",
            "junit_duration_report=call",  # the test itself, not the session's teardown
            "--basetemp=tmp",  # keeps the engine's log with the test
            "--update-baselines",
        ],
        env={"LLMPERF_DEATH_DIR": str(tmp_path)},
        timeout=900,
    )
    leftovers = leftover_processes(run.token)
    kill_all(leftovers)
    family = [int(p) for p in (tmp_path / "family").read_text().split()]
    assert (tmp_path / "killed").exists(), run.log
    assert run.returncode == 1, run.log
    cases = _cases(tmp_path / "junit.xml")
    seconds, message = cases["test_1_engine_dies_mid_run[busy]"]
    assert "vLLM engine exited with code" in message, run.log
    assert "while the session still needed it" in message
    assert "last lines:" in message
    assert "nanobind" not in message, "exit-time noise must not hide the engine's last words"
    assert "server.log" in message
    for later in ("test_2_later_test[tiny]", "test_3_later_test[tiny]"):
        seconds, message = cases[later]
        assert "vLLM engine exited with code" in message, run.log
        assert seconds < 5, f"{later} took {seconds:.1f} s: it should fail at once"
    first = cases["test_1_engine_dies_mid_run[busy]"][0]
    print(f"engine death: first test {first:.1f} s, whole run {run.seconds:.1f} s")
    assert leftovers == [], f"processes left: {leftovers}"
    assert [pid for pid in family if alive(pid)] == []
    assert not [pid for pid in family if descendants(pid)]
    assert file_hashes(project.baselines) == before, "nothing may be recorded from a dead engine"
