"""EngineServer: start an engine in its own process group, wait until it serves, stop it.

The rules come from how real engines behave: vLLM, SGLang and MindIE start children that must
die with the parent, so the server runs in a process group of its own and is killed by process
group; an engine that exits during start-up must fail the run within seconds, not at the
timeout; and exit codes that follow a stop we asked for are not crashes.

A new process group, not a new session: MindIE's daemon calls ``setpgrp()`` first thing and
exits with 255 when that fails, which it always does in a session leader. As the leader of a
group (but not of a session) its own ``setpgrp()`` succeeds and changes nothing, and
``killpg`` reaches the whole engine as before.

Processes are found, watched and signalled through psutil (``warden``), so the same code
stops an engine's whole tree on Linux and on macOS. The group and the signals are POSIX;
the package refuses to load on Windows (``pytest_llmperf/__init__.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from types import TracebackType

import httpx

from pytest_llmperf import redact
from pytest_llmperf.engines import scratch
from pytest_llmperf.engines.base import EngineSpec, LaunchPlan
from pytest_llmperf.engines.held_interrupts import interrupts_held
from pytest_llmperf.engines.warden import EngineFamily
from pytest_llmperf.engines.warden import descendants as _descendants
from pytest_llmperf.engines.warden import group_members as _group_members
from pytest_llmperf.errors import EngineDiedError, EngineStartError
from pytest_llmperf.escape import printable

LOG_TAIL_LINES = 20
WARDEN = Path(__file__).with_name("warden.py")
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: lead a new process group, and on Linux get SIGTERM when
    the process that started us dies.

    A pytest that is SIGKILLed runs no teardown; the death signal makes the engine shut itself
    down (and vLLM then takes its own children with it) instead of serving on forever. Other
    systems have no such signal; the warden stops the engine there (and here too, when the
    engine ignores the signal).
    """
    os.setpgid(0, 0)  # not setsid(): see the module docstring (MindIE)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def group_members(pgid: int) -> set[int]:
    """Pids of the running (non-zombie) processes of a process group."""
    return {process.pid for process in _group_members(pgid)}


def descendants(root: int) -> set[int]:
    """Pids of the running processes below ``root``, also those that left its process group."""
    return {process.pid for process in _descendants(root)}


def engine_version(
    spec: EngineSpec,
    base_url: str,
    headers: dict[str, str] | None = None,
    paths: tuple[str, ...] | None = None,
) -> str | None:
    """The version the server at ``base_url`` reports at the first of ``paths`` (default: the
    spec's) that gives one, or None.

    Sent with the run's credentials: a gateway in front of the engine may guard every path.
    Any failure gives None, because the version labels reports and is no reason to fail a run.
    """
    for path in spec.version_paths if paths is None else paths:
        try:
            response = httpx.get(base_url + path, headers=headers, timeout=5.0, trust_env=False)
        except (httpx.HTTPError, OSError):
            continue
        version = spec.parse_version(response.text) if response.status_code == 200 else None
        if version:
            return version
    return None


def port_taken(url: str) -> str | None:
    """Why the engine could not listen at ``url``'s local port, or None if it is free.

    Binding the port ourselves first turns "another process listens there" into an error
    that names the port at once, instead of an engine that exits after its imports with a
    bind error somewhere in its log. SO_REUSEADDR as servers use it: a port in TIME_WAIT is
    free for them, so it is free here too.
    """
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname, parsed.port
    if not host or not port:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is already in use by another process"
    return None


# Exit-time reports that say nothing about why an engine stopped, yet fill a log's last
# lines: nanobind's reference-leak listing (Triton's bindings print ~40 lines of it whenever a
# vLLM process exits).
_LOG_NOISE = re.compile(r"^(nanobind: |See https://nanobind| - leaked | - \.\.\. skipped )")


def tail_lines(path: Path, count: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as log:
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 64 * 1024))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    lines = [line for line in text.splitlines() if not _LOG_NOISE.match(line)]
    # The tail is quoted in errors that reach the terminal, junitxml and the reports: no
    # credentials the engine echoed (vLLM logs its arguments), no escape sequences.
    return redact.text(printable("\n".join(lines[-count:])))


class EngineServer:
    """One engine process (group) for one session; a context manager."""

    def __init__(
        self,
        spec: EngineSpec,
        plan: LaunchPlan,
        log_path: Path,
        *,
        startup_timeout: float = 900.0,
        stop_grace: float = 30.0,
        poll_interval: float = 0.25,
    ) -> None:
        self.spec = spec
        self.plan = plan
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.poll_interval = poll_interval
        self._warden: subprocess.Popen[bytes] | None = None
        self.scratch_folder: Path | None = None  # the engine's TMPDIR while it runs
        self._no_process_yet()

    def _no_process_yet(self) -> None:
        """The state of an engine process not started (before ``start``, or a restart)."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._family: EngineFamily | None = None  # every process of the engine seen so far
        self.exit_code: int | None = None
        self.stopped_on_request = False
        # Set when the engine ended before we asked it to: then no exit code is "normal"
        # (MindIE's abort() gives -6 both after a stop and when it crashes).
        self.exited_unasked = False
        # Why the engine is no longer usable, once found out: later checks repeat it at once.
        self._death: str | None = None

    @property
    def base_url(self) -> str:
        return self.plan.base_url

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    # -- start ---------------------------------------------------------------------------

    def start(self) -> None:
        """Launch the process; returns at once. ``wait_ready`` blocks until it serves."""
        taken = port_taken(self.plan.base_url) if self.spec.starts_server else None
        if taken:
            raise EngineStartError(
                f"{self.spec.display_name} cannot serve at {self.plan.base_url}: {taken}; "
                f"stop it or run again (the plugin picks a free port each time)"
            )
        for folder in self.plan.directories:
            folder.mkdir(parents=True, exist_ok=True)
        for path, content in self.plan.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            # MindIE refuses a config file with a mode above 640; no engine needs more.
            path.chmod(0o640)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.scratch_folder = scratch.make()
            own_tmp = scratch.environment(self.scratch_folder) if self.scratch_folder else {}
            # The plan's environment (with a variant's env:) may name another TMPDIR: it wins.
            env = {**os.environ, **own_tmp, **self.plan.env}
            try:
                self._proc = subprocess.Popen(
                    list(self.plan.argv),  # an argv list: never through a shell
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent,
                )
                self._family = EngineFamily(self._proc.pid)
            except FileNotFoundError:
                raise EngineStartError(
                    f"{self.spec.display_name}: executable {self.plan.argv[0]!r} not found; "
                    f"install the engine or point --llmperf-engine-bin at it"
                ) from None
            except PermissionError as exc:
                raise EngineStartError(
                    f"{self.spec.display_name}: cannot execute {self.plan.argv[0]!r}: {exc}"
                ) from None
            finally:
                if self._proc is None:  # no engine came to use the folder
                    self._remove_scratch()
        self._start_warden()

    def restart(self) -> None:
        """Serve again after ``stop()``: the same command on the same port, waited for until
        ready (A/B with one server at a time, ``engines/alternation.py``)."""
        if self._proc is not None and self._proc.poll() is None:
            raise RuntimeError("restart() of a server that still runs: stop() it first")
        self._no_process_yet()
        self._start_serving()

    def _start_serving(self) -> None:
        """Start and wait until it serves; a start that fails or is interrupted stops it."""
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start_warden(self) -> None:
        """Start the process that stops the engine if this one dies without teardown."""
        assert self._proc is not None
        try:
            self._warden = subprocess.Popen(
                [sys.executable, "-I", str(WARDEN), str(os.getpid()), str(self._proc.pid),
                 str(self.stop_grace),
                 *([str(self.scratch_folder)] if self.scratch_folder else [])],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to pytest's process group is not for it
            )  # fmt: skip
        except OSError:
            # The death signal still covers most cases; starting must not fail for this.
            self._warden = None

    def _stop_warden(self) -> None:
        if self._warden is not None:
            with contextlib.suppress(ProcessLookupError):
                self._warden.kill()
            self._warden.wait()
            self._warden = None

    def wait_ready(self) -> None:
        """Poll the health URL until the engine serves; fail fast if it exits first."""
        assert self._proc is not None, "start() first"
        deadline = time.monotonic() + self.startup_timeout
        last_problem = "no answer yet"
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                self._remember_pids()
                code = self._proc.poll()
                if code is not None:
                    self.exit_code = code
                    self.exited_unasked = True
                    self._reap_group()
                    raise EngineStartError(
                        f"{self.spec.display_name} exited with code {code} during start-up "
                        f"(log: {self.log_path}); last lines:\n{tail_lines(self.log_path)}"
                    )
                try:
                    response = client.get(self.plan.health_url)
                    if self.spec.is_ready(response.status_code, response.text):
                        return
                    last_problem = f"{self.plan.health_url} answered {response.status_code}"
                except httpx.HTTPError as exc:
                    last_problem = f"{self.plan.health_url}: {type(exc).__name__}"
                if time.monotonic() >= deadline:
                    self.stop()
                    raise EngineStartError(
                        f"{self.spec.display_name} was not ready after "
                        f"{self.startup_timeout:.0f} s ({last_problem}); raise "
                        f"--llmperf-startup-timeout if the model is large. Log {self.log_path}, "
                        f"last lines:\n{tail_lines(self.log_path)}"
                    )
                time.sleep(self.poll_interval)

    def check_alive(self) -> None:
        """Raise ``EngineDiedError`` with the log tail if the engine is gone."""
        if self._proc is None:
            raise EngineDiedError(f"{self.spec.display_name} was never started")
        if self._death is not None:
            raise EngineDiedError(self._death)
        code = self._proc.poll()
        if code is not None and not self.stopped_on_request:
            self.exit_code = code
            self.exited_unasked = True
            self._death = (
                f"{self.spec.display_name} engine exited with code {code} while the session "
                f"still needed it (log: {self.log_path}); last lines:\n"
                f"{tail_lines(self.log_path)}"
            )
            raise EngineDiedError(self._death)

    def check_serving(self, grace: float = 30.0) -> None:
        """``check_alive``, and ask the health URL too: for use after requests failed.

        An engine whose core died keeps its HTTP front end up for a while (vLLM's watchdog
        closes it within about 5 s, longer on a loaded machine), answering 503 or refusing
        connections. Wait for that exit, so that the test reports the engine's death with
        its exit code and log instead of a list of failed requests, and every later test
        of the session fails at once.
        """
        self.check_alive()
        problem = self._health_problem()
        if problem is None:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            time.sleep(self.poll_interval)
            self.check_alive()  # raises once it has exited
            if self._health_problem() is None:
                return  # a passing hiccup, not a death
        self._death = (
            f"{self.spec.display_name} engine exited from serving ({problem}) while the "
            f"session still needed it; its process was still shutting down {grace:.0f} s "
            f"later (log: {self.log_path}); last lines:\n{tail_lines(self.log_path)}"
        )
        raise EngineDiedError(self._death)

    def _health_problem(self) -> str | None:
        """None when the health URL says the engine serves, else what it said."""
        try:
            response = httpx.get(self.plan.health_url, timeout=10.0, trust_env=False)
        except httpx.HTTPError as exc:
            return f"{self.plan.health_url}: {type(exc).__name__}"
        if self.spec.is_ready(response.status_code, response.text):
            return None
        return f"{self.plan.health_url} answered {response.status_code}"

    def version(self, headers: dict[str, str] | None = None) -> str | None:
        """The engine's version as its server reports it, if it has a way to."""
        return engine_version(self.spec, self.base_url, headers)

    # -- stop ----------------------------------------------------------------------------

    def _remember_pids(self) -> None:
        """Note the engine's processes while the leader runs: once it is gone, children that
        left its group are tied to it only by this record."""
        if self._family is not None and self._proc is not None and self._proc.poll() is None:
            self._family.scan()

    def _signal_everything(self, sig: int) -> None:
        assert self._proc is not None
        assert self._family is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)
        # Children that left the group (setsid) are still ours: signal them one by one, each
        # only while it is the process we saw (psutil compares start times).
        self._family.scan()
        self._family.signal(sig, skip_group=self._proc.pid)

    def _leftovers(self) -> set[int]:
        assert self._proc is not None
        assert self._family is not None
        known = {process.pid for process in self._family.alive()}
        return group_members(self._proc.pid) | known

    def _reap_group(self, timeout: float = 10.0) -> None:
        """Make sure nothing of the group outlives the leader."""
        deadline = time.monotonic() + timeout
        self._signal_everything(signal.SIGKILL)
        while self._leftovers() and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> int | None:
        """SIGTERM the group, SIGKILL after the grace period, wait until every process is gone.

        Returns the leader's exit code. Safe to call twice and on a server that already died.
        A Ctrl-C that arrives meanwhile is raised when the engine is gone, not halfway.
        """
        with interrupts_held():
            return self._stop()

    def _stop(self) -> int | None:
        if self._proc is None:
            return None
        if not self.stopped_on_request and self._proc.poll() is not None:
            self.exited_unasked = True  # it was gone before we asked it to stop
        self.stopped_on_request = True
        self._remember_pids()
        if self.exited_unasked and self._leftovers():
            # A leader that died unasked stops no children: tell the orphans (a killed
            # engine core's workers) to go now instead of waiting the grace period for them.
            self._signal_everything(signal.SIGTERM)
        if self._proc.poll() is None:
            self._signal_everything(signal.SIGTERM)
            try:
                self._proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                self._signal_everything(signal.SIGKILL)
                self._proc.wait()
        self.exit_code = self._proc.returncode
        # The leader is gone; its children may not be (vLLM's EngineCore, MPI workers).
        deadline = time.monotonic() + self.stop_grace
        while self._leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._reap_group()
        self._stop_warden()
        if not self._leftovers():  # a process that would not die may still use it
            self._remove_scratch()
        return self.exit_code

    def _remove_scratch(self) -> None:
        if self.scratch_folder is not None:
            scratch.remove(self.scratch_folder)
            self.scratch_folder = None

    @property
    def exit_was_normal(self) -> bool:
        """Whether the exit followed our stop with one of the engine's usual codes."""
        if self.exit_code is None:
            return True
        return not self.exited_unasked and self.exit_code in self.spec.normal_stop_codes

    def leftover_pids(self) -> set[int]:
        """Processes of this server still alive; empty after a successful ``stop``."""
        return self._leftovers() if self._proc is not None else set()

    def __enter__(self) -> EngineServer:
        self._start_serving()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
