"""Each engine process gets a temporary folder of its own, and nothing of it outlives the engine.

A stand-in engine leaves files in its temporary folder as vLLM does (sockets, a rendezvous
file), then the server stops it. The system's temporary folder is a new, empty one here,
so the test sees everything made in it and leaves the rest of the machine's alone.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf.engines import get_engine, scratch
from pytest_llmperf.engines.base import LaunchPlan
from pytest_llmperf.engines.server import EngineServer
from pytest_llmperf.errors import EngineStartError
from tests.conftest import free_port
from tests.support.files import wait_for_file

# Writes where its temporary folder is, leaves a file and a socket in it, and waits.
LITTERING_ENGINE = textwrap.dedent(
    """
    import os, socket, sys, tempfile, time
    folder = tempfile.gettempdir()
    open(os.path.join(folder, "vllm_dist_left"), "w").close()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(folder, "ipc-left"))
    with open(sys.argv[1] + ".partial", "w") as out:
        out.write(folder)
    os.replace(sys.argv[1] + ".partial", sys.argv[1])
    time.sleep(600)
    """
)


# Only says where its temporary folder is (a socket would not fit in a long one).
REPORTING_ENGINE = textwrap.dedent(
    """
    import os, sys, tempfile, time
    with open(sys.argv[1] + ".partial", "w") as out:
        out.write(tempfile.gettempdir())
    os.replace(sys.argv[1] + ".partial", sys.argv[1])
    time.sleep(600)
    """
)


@pytest.fixture
def system_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary folder of this process, for the duration of a test: a new one under /tmp,
    short as a system's is (tmp_path is too long for sockets inside a folder inside it)."""
    folder = Path(tempfile.mkdtemp(prefix="llmperf-test-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # what gettempdir() returns
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _server(
    tmp_path: Path, env: dict[str, str] | None = None, engine: str = LITTERING_ENGINE
) -> tuple[EngineServer, Path]:
    script = tmp_path / "stand_in_engine.py"
    script.write_text(engine)
    report = tmp_path / "engine-tmp.txt"
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(sys.executable, str(script), str(report)),
        base_url=url,
        health_url=url + "/health",
        env=env or {},
    )
    return EngineServer(get_engine("vllm"), plan, tmp_path / "engine.log", stop_grace=2.0), report


def test_the_engine_litters_its_own_folder_which_goes_when_it_stops(
    tmp_path: Path, system_tmp: Path
) -> None:
    server, report = _server(tmp_path)
    server.start()
    try:
        assert wait_for_file(report, 30), "the stand-in engine never started"
        engine_tmp = Path(report.read_text())
        assert engine_tmp == server.scratch_folder
        assert engine_tmp.parent == system_tmp
        assert engine_tmp.name.startswith("llmperf-engine-")
        assert {"vllm_dist_left", "ipc-left"} <= {p.name for p in engine_tmp.iterdir()}
    finally:
        server.stop()
    assert not engine_tmp.exists()
    assert server.scratch_folder is None
    # Nothing else was left in the system's folder but torch's shared cache folder.
    assert [p.name for p in system_tmp.iterdir()] == [_inductor_name()]


def test_torchs_header_cache_is_shared_between_starts_and_kept(
    tmp_path: Path, system_tmp: Path
) -> None:
    shared = system_tmp / _inductor_name()
    server, report = _server(tmp_path)
    server.start()
    try:
        assert wait_for_file(report, 30), "the stand-in engine never started"
        link = Path(report.read_text()) / shared.name
        assert link.is_symlink()
        assert link.resolve() == shared.resolve()
        (link / "precompiled_headers").mkdir()  # what torch writes there
    finally:
        server.stop()
    assert (shared / "precompiled_headers").is_dir(), "removing the folder kept the cache"


def test_a_tmpdir_given_for_the_engine_wins(tmp_path: Path, system_tmp: Path) -> None:
    """A variant's ``env: {TMPDIR: ...}`` (or an engine's own plan) names the folder."""
    mine = tmp_path / "mine"
    mine.mkdir()
    server, report = _server(tmp_path, env={"TMPDIR": str(mine)})
    server.start()
    try:
        assert wait_for_file(report, 30), "the stand-in engine never started"
        assert Path(report.read_text()) == mine
    finally:
        server.stop()
    assert (mine / "vllm_dist_left").exists(), "the user's own folder is the user's to clean"
    assert not list(system_tmp.glob("llmperf-engine-*"))


def test_an_engine_that_cannot_start_leaves_no_folder(tmp_path: Path, system_tmp: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    plan = LaunchPlan(
        argv=(str(tmp_path / "no-such-engine"),), base_url=url, health_url=url + "/health"
    )
    server = EngineServer(get_engine("vllm"), plan, tmp_path / "engine.log")
    with pytest.raises(EngineStartError, match="not found"):
        server.start()
    assert not list(system_tmp.glob("llmperf-engine-*"))


def test_a_temporary_folder_too_long_for_sockets_falls_back_to_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM binds sockets inside the folder; a socket path has at most 104 bytes on macOS,
    whose TMPDIR (/var/folders/...) is already about 50 long."""
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    folder = scratch.make()
    assert folder is not None
    try:
        assert folder.parent == Path("/tmp")
        assert len(str(folder / ("u" * 36))) <= 100
    finally:
        scratch.remove(folder)
    assert not folder.exists()


def test_with_no_short_folder_the_engine_keeps_the_temporary_folder_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    monkeypatch.setattr(scratch, "FALLBACK_PARENT", str(deep))
    monkeypatch.setenv("TMPDIR", str(deep))
    server, report = _server(tmp_path, engine=REPORTING_ENGINE)
    server.start()
    try:
        assert wait_for_file(report, 30), "the stand-in engine never started"
        assert server.scratch_folder is None
        assert Path(report.read_text()) == deep
    finally:
        server.stop()


def test_removal_is_refused_for_a_folder_the_plugin_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "results"
    precious.mkdir()
    (precious / "run.json").write_text("{}")
    scratch.remove(precious)
    assert (precious / "run.json").exists()


def test_the_link_is_where_torch_looks_for_its_cache(system_tmp: Path) -> None:
    cache_dir_utils = pytest.importorskip("torch._inductor.runtime.cache_dir_utils")
    assert Path(cache_dir_utils.default_cache_dir()) == system_tmp / _inductor_name()


def _inductor_name() -> str:
    return scratch._inductor_folder_name()
