"""Data safety: concurrent updates all land; an interrupted update leaves the old file intact.

Baseline files are reviewed like code. Whatever happens to the process that updates one (a
second writer at the same moment, Ctrl-C, SIGKILL from a CI runner that times out), a reader
afterwards must find either the old file or the complete new one, never a mix, and no
temporary file may be left where it would be committed or read.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.gate import store
from tests.conftest import requires_vllm
from tests.reliability import baseline_writer
from tests.reliability.baseline_writer import HEADER, entry
from tests.reliability.helpers import (
    external_args,
    file_hashes,
    make_project,
    run_pytest,
    seed_baseline,
)
from tests.support.fault_proxy import FaultProxy
from tests.support.processes import default_sigint

FILLER_PROFILES = 40  # other profiles of the file, which every update must keep
WRITER = [sys.executable, str(baseline_writer.SCRIPT)]


def _seed(path: Path) -> None:
    baseline_writer.seed(path, FILLER_PROFILES)


def _stray_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith((".yaml", ".lock")))


def test_parallel_writers_each_keep_every_entry(tmp_path: Path) -> None:
    """Four processes recording 12 profiles each into one file, all at the same time."""
    path = tmp_path / "cpu" / "tiny-qwen3" / "vllm.yaml"
    writers = [
        subprocess.Popen(
            [*WRITER, str(path), f"w{w}-#", "0", "12"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    outputs = [writer.communicate(timeout=300)[0].split() for writer in writers]
    assert [writer.returncode for writer in writers] == [0, 0, 0, 0]
    assert all(len(done) == 12 for done in outputs)
    entries = store.load_all(path)
    assert sorted(entries) == sorted(f"w{w}-{k}" for w in range(4) for k in range(12))
    assert entries["w3-11"].metrics["metric_0"] == 11000.0
    assert _stray_files(path.parent) == []


def _expected_text(tmp_path: Path, k: int, cache: dict[int, str]) -> str:
    """The file after a complete update to ``k``, made the same way in another folder."""
    if k not in cache:
        reference = tmp_path / "reference" / f"{k}" / "vllm.yaml"
        _seed(reference)
        if k:
            store.record_entry(reference, "p", entry(k), header=HEADER)
        cache[k] = reference.read_text()
    return cache[k]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_interrupted_update_leaves_old_or_complete_new_file(
    tmp_path: Path, sig: signal.Signals
) -> None:
    path = tmp_path / "baselines" / "cpu" / "tiny-qwen3" / "vllm.yaml"
    _seed(path)
    rng = random.Random(int(sig))
    texts: dict[int, str] = {}
    written = 0  # the last k the file is known to hold
    strays_seen = 0
    for _round in range(12):
        writer = subprocess.Popen(
            [*WRITER, str(path), "p", str(written + 1)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        assert writer.stdout is not None
        first = writer.stdout.readline()  # one update done: the loop is running
        assert first.strip(), "the writer did not start"
        time.sleep(rng.uniform(0.0, 0.25))
        writer.send_signal(sig)
        rest = writer.communicate(timeout=60)[0].split()
        done = [int(first)] + [int(k) for k in rest]
        text = path.read_text()
        k = store.load_entry(path, "p").metrics["metric_0"] // 1000  # type: ignore[union-attr]
        # Done updates are in the file; at most the one under way may have landed too.
        assert done[-1] <= k <= done[-1] + 1
        assert text == _expected_text(tmp_path, int(k), texts), "a torn or mixed file"
        assert len(store.load_all(path)) == FILLER_PROFILES + 1
        strays_seen += len(_stray_files(path.parent))
        written = int(k)
    # A temporary file a killed writer left is never what a reader sees, and the next update
    # clears it away so it cannot be committed next to the baseline.
    store.record_entry(path, "p", entry(written + 1), header=HEADER)
    assert _stray_files(path.parent) == []
    print(f"{sig.name}: {strays_seen} temporary file(s) seen between rounds")


ATOMIC_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_llmperf.atomic import write_atomically
    path = Path(sys.argv[1])
    k = 0
    print("ready", flush=True)
    while True:
        k += 1
        write_atomically(path, f"{k % 2}\\n" * 2_000_000)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_interrupt_inside_the_write_never_tears_the_file(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Writes of 4 MB: most interrupts land while the bytes are being written."""
    path = tmp_path / "vllm.yaml"
    complete = {f"{b}\n" * 2_000_000 for b in (0, 1)}
    path.write_text("0\n" * 2_000_000)
    rng = random.Random(int(sig) + 1)
    for _ in range(10):
        writer = subprocess.Popen(
            [sys.executable, "-c", ATOMIC_WRITER, str(path)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=default_sigint,
        )
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.3))
        writer.send_signal(sig)
        writer.wait(60)
        writer.stdout.close()
        assert path.read_text() in complete
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "vllm.yaml"]
    if sig == signal.SIGINT:
        assert leftovers == [], "an interrupted write removes its temporary file"
    print(f"{sig.name}: {len(leftovers)} temporary file(s) left by killed writers")
    # SIGKILL leaves the temporary file of the write it stopped; the next update of the
    # baseline (under its lock, so no write can be under way) removes every such file.
    _seed(path)
    store.record_entry(path, "p", entry(1), header=HEADER)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == ["vllm.yaml"]


@pytest.mark.e2e
@requires_vllm
def test_four_xdist_workers_update_one_file(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    """``--update-baselines -n 4``: four profiles, four processes, one file with all four."""
    project = make_project(tmp_path)
    path = project.baseline_file(str(tiny_model_dir))
    seed_baseline(path, {"kept": 123.0})
    document = store.read_document(path)
    document["profiles"]["kept"]["tolerances"] = {"mean_tpot_ms": 7.5}
    write_atomically(path, store.dump_document(document))
    args = [a for a in external_args(proxy.url, tiny_model_dir) if "profile" not in a]
    run = run_pytest(
        project,
        [*args, "--llmperf-profile=tiny-a,tiny-b,tiny-c,tiny-d", "--update-baselines", "-n", "4"],
    )
    assert run.returncode == 0, run.log
    assert "4 passed" in run.output, run.log
    assert "4 workers [4 items]" in run.output, run.log
    entries = store.load_all(path)
    assert sorted(entries) == ["kept", "tiny-a", "tiny-b", "tiny-c", "tiny-d"]
    for name in ("tiny-a", "tiny-b", "tiny-c", "tiny-d"):
        assert entries[name].metrics["completed"] == 8
        assert entries[name].workload is not None
        assert entries[name].workload["seed"] == int("abcd".index(name[-1])) + 1
    assert entries["kept"].metrics["total_token_throughput"] == 123.0
    assert entries["kept"].tolerances == {"mean_tpot_ms": 7.5}, "a reviewer's edit survives"
    assert proxy.stats()["load_requests"] == 32
    assert [name for name in file_hashes(project.baselines) if not name.endswith(".lock")] == [
        str(path.relative_to(project.baselines))
    ]
