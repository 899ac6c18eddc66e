"""pytest wiring: options, fixtures, parametrization, reporting. No computation lives here.

pytest imports this module in every run of every project where the plugin is installed, so
everything heavy (httpx, numpy, the runner) is imported inside hooks and fixtures.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.engines.fingerprint import Fingerprint
from pytest_llmperf.errors import ConfigError, LLMPerfError
from pytest_llmperf.gate.ledger import Ledger, ProfileResult
from pytest_llmperf.settings import add_options, resolve

if TYPE_CHECKING:
    from pytest_llmperf.engines.alternation import OneServerAtATime
    from pytest_llmperf.engines.server import EngineServer
    from pytest_llmperf.engines.session import Target
    from pytest_llmperf.gate.loop import GateRequest
    from pytest_llmperf.measure.profiles import WorkloadProfile
    from pytest_llmperf.measure.run import Measurement, Workloads

SETTINGS = pytest.StashKey[Settings]()
LEDGER = pytest.StashKey[Ledger]()
HARDWARE = pytest.StashKey[str]()
MACHINE = pytest.StashKey[Fingerprint | None]()
HISTORY = pytest.StashKey[list[dict[str, Any]]]()  # the history file as the session began
MISMATCH = pytest.StashKey[str | None]()  # --hardware names another family than this machine
PROFILES = pytest.StashKey[dict[str, "WorkloadProfile"]]()
# --llmperf-ab-restart: which server is up (engines/alternation.py), one per session.
ALTERNATION = pytest.StashKey["OneServerAtATime"]()
MARKER = "llmperf"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_llmperf import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    # A CI job that is cancelled sends SIGTERM; turning it into KeyboardInterrupt lets the
    # session fixture stop the engine instead of leaving it serving.
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(profiles=None, tolerances=None): run only these profiles, and override "
        f"per-metric tolerances (percent) for this test",
    )
    try:
        settings = resolve(config)
        if settings.active:
            from pytest_llmperf.measure import profiles

            known = profiles.load_profiles(
                tuple(_ini_relative(config, p) for p in settings.profile_files)
            )
            if settings.profiles:
                profiles.select(known, list(settings.profiles))
            config.stash[PROFILES] = known
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    from pytest_llmperf import rootdir_guard

    try:
        rootdir_guard.check(config.invocation_params.args, config.rootpath, config.inipath)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SETTINGS] = settings
    if not settings.active:
        return
    from pytest_llmperf import redact
    from pytest_llmperf.engines import fingerprint, hardware

    redact.remember_settings(settings)
    from pytest_llmperf.gate.ledger import Ledger

    config.stash[LEDGER] = Ledger()
    here = fingerprint.this_machine()
    # The fingerprint describes the server's machine only when the server runs here.
    config.stash[MACHINE] = here if _serves_here(settings) else None
    # Without --hardware, baselines are read from this machine's own key folder, then from its
    # family's (where shipped baselines live); its own numbers go to its own folder.
    config.stash[HARDWARE] = settings.hardware or hardware.family(fingerprint.machine_key(here))
    config.stash[MISMATCH] = _hardware_mismatch(settings, config.stash[MACHINE])
    if hasattr(config, "workerinput"):
        return  # xdist workers inherit the controller's signal handling
    if sys.platform != "win32" and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


def _serves_here(settings: Settings) -> bool:
    if settings.endpoint is None:
        return True
    from urllib.parse import urlsplit

    host = (urlsplit(settings.endpoint).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def _ini_relative(config: pytest.Config, path: Path) -> Path:
    return path if path.is_absolute() else config.rootpath / path


def pytest_sessionstart(session: pytest.Session) -> None:
    settings = session.config.stash[SETTINGS]
    if not settings.dry_run:
        return
    if not settings.active:
        raise pytest.UsageError("--llmperf-dry-run: choose an engine with --engine=NAME")
    from pytest_llmperf.engines.session import dry_run

    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    try:
        # Nothing is written there in a dry run; the folder only names generated files.
        with tempfile.TemporaryDirectory(prefix="llmperf-dry-run-") as work:
            text = dry_run(settings, Path(work))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if tr is not None:
        tr.write_line(text)
    else:
        print(text)
    pytest.exit("llmperf dry run: nothing was started", returncode=0)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    settings = config.stash.get(SETTINGS, None)
    if settings is None or not settings.active:
        return None
    from pytest_llmperf.engines import fingerprint

    declared = config.stash[HARDWARE]
    line = (
        f"llmperf: engine={','.join(settings.engines)} hardware={declared} "
        f"model={settings.model or 'embedded tiny-qwen3'} baselines={settings.baseline_dir}"
        f"{' (updating)' if settings.update_baselines else ''}"
    )
    lines = [line]
    machine = config.stash[MACHINE]
    if machine is not None:
        lines.append(f"llmperf: machine {fingerprint.describe(machine.as_dict())}")
    else:
        lines.append(
            "llmperf: machine of the endpoint unknown (not on this host): baselines are "
            "compared by the hardware key alone"
        )
    lines.append(
        f"llmperf: a profile without a baseline for this machine is "
        f"{'recorded' if settings.first_run == 'record' else 'a failure'} "
        f"(--llmperf-first-run={settings.first_run})"
    )
    if settings.variants_file is not None:
        names = ", ".join(f"{v.name}{' (reference)' * v.reference}" for v in settings.variants)
        lines.append(f"llmperf: variants from {settings.variants_file}: {names}")
    mismatch = config.stash[MISMATCH]
    if mismatch:
        lines.append(f"llmperf: WARNING {mismatch}: the baselines compared may not apply")
    return lines


def _hardware_mismatch(settings: Settings, machine: Fingerprint | None) -> str | None:
    """A declared key of another family than this machine's (``--hardware=a100`` on a CPU)."""
    from pytest_llmperf.engines import fingerprint, hardware

    if not settings.hardware or machine is None:
        return None
    detected = fingerprint.machine_key(machine)
    if hardware.family(detected) == hardware.family(settings.hardware):
        return None
    return f"--hardware={settings.hardware} but this machine looks like {detected}"


def _alternation(config: pytest.Config, settings: Settings) -> OneServerAtATime | None:
    """The session's one-server-at-a-time switch under --llmperf-ab-restart, else None."""
    if not settings.ab_restart:
        return None
    if ALTERNATION not in config.stash:
        from pytest_llmperf.engines.alternation import OneServerAtATime

        config.stash[ALTERNATION] = OneServerAtATime()
    return config.stash[ALTERNATION]


def _restartable(target: Target) -> EngineServer:
    if target.server is None:
        raise ConfigError(
            f"--llmperf-ab-restart: {target.variant} is an endpoint the plugin does not start, "
            f"so it cannot be stopped and restarted; give both configurations as engines the "
            f"plugin starts, or drop the option"
        )
    return target.server


def _with_restarts(result: ProfileResult, restarts: int, seconds: float) -> ProfileResult:
    """What one server at a time cost the experiment, in its ``ab`` record and its notes."""
    assert result.ab is not None
    minutes = float(result.ab.get("minutes") or 0.0)
    share = seconds / (minutes * 60.0) * 100.0 if minutes else 0.0
    note = (
        f"one server at a time (--llmperf-ab-restart): {restarts} restart(s) took "
        f"{seconds:.0f} s, {share:.0f} % of the experiment's {minutes:.1f} min"
    )
    experiment = {**result.ab, "restarts": restarts, "restart_seconds": round(seconds, 1)}
    return dataclasses.replace(result, ab=experiment, notes=(*result.notes, note))


# -- parametrization -------------------------------------------------------------------------


def _history_at_start(config: pytest.Config, settings: Settings) -> list[dict[str, Any]]:
    """The history file's lines, read once: the sequential rule's between-session spread
    (gate/session_spread.py). This session appends its own lines only when it ends."""
    if settings.sequential_budget is None or settings.history_path is None:
        return []
    if HISTORY not in config.stash:
        from pytest_llmperf.reports import history

        config.stash[HISTORY] = history.read(settings.history_path)
    return config.stash[HISTORY]


def _marker_kwargs(definition: Any) -> dict[str, Any]:
    marker = definition.get_closest_marker(MARKER) if definition is not None else None
    return dict(marker.kwargs) if marker is not None else {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    settings = metafunc.config.stash.get(SETTINGS, None)
    if settings is None:
        return
    if "llmperf_engine_name" in metafunc.fixturenames and len(settings.variants) > 1:
        # A/B: each test is one candidate (B) measured against the reference, which serves
        # for the whole session (llmperf_reference_target).
        names = [v.name for v in settings.variants if not (settings.ab and v.reference)]
        metafunc.parametrize("llmperf_engine_name", names, indirect=True, scope="session")
    if "llmperf_profile" not in metafunc.fixturenames:
        return
    known = metafunc.config.stash.get(PROFILES, None)
    if known is None:
        from pytest_llmperf.measure import profiles

        known = profiles.builtin_profiles()
    wanted = _marker_kwargs(metafunc.definition).get("profiles")
    # Profiles that run only when named (sweeps, the newer workloads): by --llmperf-profile
    # or by the test's own marker.
    names = list(settings.profiles) or [
        name for name, p in known.items() if p.by_default or name in (wanted or ())
    ]
    if wanted is not None:
        unknown = [name for name in wanted if name not in known]
        if unknown:
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: @pytest.mark.llmperf names unknown profile(s) "
                f"{', '.join(unknown)}; valid profiles are {', '.join(known)}"
            )
        names = [name for name in names if name in wanted]
    metafunc.parametrize("llmperf_profile", [known[n] for n in names], ids=names, indirect=True)


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def llmperf_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved options of this session."""
    return pytestconfig.stash[SETTINGS]


def _require_active(settings: Settings) -> None:
    if not settings.active:
        pytest.skip("pytest-llmperf is idle: choose an engine with --engine=NAME to measure")


@pytest.fixture(scope="session")
def llmperf_engine_name(request: pytest.FixtureRequest, llmperf_settings: Settings) -> str:
    """The configuration of this test: the engine, or the variant of ``--llmperf-variants``
    (parametrized when there are several, one server at a time)."""
    _require_active(llmperf_settings)
    candidates = [
        v for v in llmperf_settings.variants if not llmperf_settings.ab or not v.reference
    ]
    default = candidates[0].name if candidates else None
    return str(getattr(request, "param", default or llmperf_settings.engines[0]))


def _auth_headers(settings: Settings) -> tuple[dict[str, str], str | None]:
    from pytest_llmperf import redact

    try:
        return redact.request_auth(settings.api_key_env)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture(scope="session")
def llmperf_target(
    request: pytest.FixtureRequest,
    llmperf_settings: Settings,
    llmperf_engine_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Target]:
    """The running engine server (or external endpoint) of this session; one at a time."""
    yield from _serve(request, llmperf_settings, llmperf_engine_name, tmp_path_factory)


@pytest.fixture(scope="session")
def llmperf_reference_target(
    request: pytest.FixtureRequest,
    llmperf_settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Target]:
    """--llmperf-ab: the reference configuration (A), serving beside each candidate."""
    from pytest_llmperf.variants import reference_of

    _require_active(llmperf_settings)
    name = reference_of(llmperf_settings.variants) or llmperf_settings.engines[0]
    yield from _serve(request, llmperf_settings, name, tmp_path_factory)


def _serve(
    request: pytest.FixtureRequest,
    llmperf_settings: Settings,
    llmperf_engine_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Target]:
    from pytest_llmperf.engines.session import EngineSession
    from pytest_llmperf.variants import find, settings_for

    headers, _ = _auth_headers(llmperf_settings)
    variant = find(llmperf_settings.variants, llmperf_engine_name)
    session = EngineSession(
        settings_for(llmperf_settings, variant),
        variant.engine,
        tmp_path_factory.mktemp(f"llmperf-{llmperf_engine_name}"),
        headers,
        variant=variant.name,
    )
    ledger = request.config.stash[LEDGER]
    alternation = _alternation(request.config, llmperf_settings)
    if alternation is not None:
        alternation.make_room()  # the configuration up before this one stops first
    failure: str | None = None
    try:
        target = session.start()
        if alternation is not None and target.server is not None:
            alternation.started(target.server)
    except LLMPerfError as exc:
        failure = _shown(str(exc))
    if failure is not None:  # failed outside the except block: no chained traceback
        ledger.failed_starts[llmperf_engine_name] = failure.splitlines()[0]
        session.stop()
        pytest.fail(failure, pytrace=False)
    mismatch = request.config.stash[MISMATCH]
    if mismatch:
        target.notes.append(mismatch)
    try:
        yield target
    finally:
        session.stop()


@pytest.fixture(scope="session")
def llmperf_workloads(
    llmperf_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Workloads:
    from pytest_llmperf.measure.run import Workloads

    return Workloads(llmperf_settings, tmp_path_factory.mktemp("llmperf-data"))


@pytest.fixture
def llmperf_profile(request: pytest.FixtureRequest) -> WorkloadProfile:
    """The workload profile of this test (parametrized over the selected profiles)."""
    profile: WorkloadProfile = request.param
    return profile


class LLMPerf:
    """What a perf test holds: ``check()`` measures the profile and gates it."""

    def __init__(
        self,
        request: pytest.FixtureRequest,
        target: Target,
        workloads: Workloads,
        profile: WorkloadProfile | None,
    ) -> None:
        self._request = request
        self.target = target
        self.workloads = workloads
        self.profile = profile
        self.settings: Settings = request.config.stash[SETTINGS]

    def _gate_request(
        self, profile: WorkloadProfile, tolerances: Mapping[str, float] | None
    ) -> GateRequest:
        """This test's gate: the session's settings, the marker's tolerances under the call's."""
        from pytest_llmperf.gate.loop import gate_request

        config = self._request.config
        return gate_request(
            self.settings,
            target=self.target,
            profile=profile,
            hardware=config.stash[HARDWARE],
            machine=config.stash[MACHINE],
            nodeid=self._request.node.nodeid,
            tolerances=(_marker_kwargs(self._request.node).get("tolerances"), tolerances),
            history=_history_at_start(config, self.settings),
        )

    def scaled(self, profile: WorkloadProfile) -> WorkloadProfile:
        from pytest_llmperf.measure.run import scaled_profile

        return scaled_profile(profile, self.settings, embedded=self.target.embedded)

    def check(
        self, profile: WorkloadProfile | None = None, tolerances: dict[str, float] | None = None
    ) -> ProfileResult:
        """Measure the profile, compare with its baseline, fail this test if it regressed."""
        from pytest_llmperf.gate.loop import run_gate
        from pytest_llmperf.measure.run import measure

        chosen = profile or self.profile
        if chosen is None:
            raise pytest.UsageError(
                "llmperf.check(): no profile (use the llmperf_profile fixture or pass one)"
            )
        chosen = self.scaled(chosen)
        request = self._gate_request(chosen, tolerances)
        headers, api_key = _auth_headers(self.settings)
        progress = _progress_printer(self._request.config, chosen)

        def measure_on(target: Target) -> Callable[[], Measurement]:
            """One measurement of the profile on ``target``: a run, or a sweep's steps."""

            def measure_once(step: WorkloadProfile = chosen) -> Measurement:
                return measure(
                    target,
                    step,
                    self.workloads,
                    self.settings,
                    headers=headers,
                    api_key=api_key,
                    progress=progress,
                )

            def measure_profile() -> Measurement:
                if chosen.sweep is None:
                    return measure_once()
                from pytest_llmperf.gate.sweep import measure_sweep

                workload = self.workloads.workload(chosen, target.embedded)
                return measure_sweep(chosen, measure_once, workload)

            return measure_profile

        failure: str | None = None
        try:
            if self.settings.ab:
                result = self._run_ab(chosen, request.tolerance_overrides, measure_on)
            else:
                result = run_gate(request, measure_on(self.target))
        except LLMPerfError as exc:
            failure = _shown(str(exc))
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        self._publish(result)
        if self.settings.ab:
            self._enforce_ab(result)
        else:
            self._enforce(result)
        return result

    def _run_ab(
        self,
        profile: WorkloadProfile,
        tolerances: Mapping[str, float] | None,
        measure_on: Any,
    ) -> ProfileResult:
        """--llmperf-ab: this test's configuration (B) in pairs against the reference (A)."""
        from pytest_llmperf.gate.ab import AB_TOLERANCES, ABRequest, run_ab
        from pytest_llmperf.gate.paired import SequentialPlan
        from pytest_llmperf.measure.run import ab_budget

        reference: Target = self._request.getfixturevalue("llmperf_reference_target")
        alternation = _alternation(self._request.config, self.settings)
        measure_a, measure_b = measure_on(reference), measure_on(self.target)
        restarts, seconds = 0, 0.0
        if alternation is not None:
            measure_a = alternation.on(_restartable(reference), measure_a)
            measure_b = alternation.on(_restartable(self.target), measure_b)
            restarts, seconds = alternation.restarts, alternation.seconds
        machine = self._request.config.stash[MACHINE]
        request = ABRequest(
            reference=reference,
            candidate=self.target,
            profile=profile,
            hardware=self._request.config.stash[HARDWARE],
            plan=SequentialPlan(
                budget=ab_budget(profile, self.settings, embedded=self.target.embedded)
            ),
            tolerances=tolerances,
            minutes=self.settings.ab_minutes,
            max_failed_requests=self.settings.max_failed_requests,
            nodeid=self._request.node.nodeid,
            machine=machine.as_dict() if machine is not None else None,
            # A default metric the test chose not to gate is still shown, pair by pair.
            watch=tuple(AB_TOLERANCES),
        )
        result = run_ab(request, measure_a, measure_b)
        if alternation is None or result.ab is None:
            return result
        return _with_restarts(
            result, alternation.restarts - restarts, alternation.seconds - seconds
        )

    def _enforce_ab(self, result: ProfileResult) -> None:
        """Fail on a regression (or a run that could not be compared); an inconclusive
        experiment fails only under --llmperf-strict, else it passes with a warning."""
        from pytest_llmperf.models import Outcome
        from pytest_llmperf.reports.ab_report import ab_message

        outcome = result.verdict.outcome
        strict_failure = outcome is Outcome.INCONCLUSIVE and self.settings.strict
        message = _shown(ab_message(result))
        if outcome is Outcome.INCONCLUSIVE and not strict_failure:
            self._request.node.warn(pytest.PytestWarning(message))
            return
        if not (result.verdict.failed or strict_failure):
            return
        if self.settings.warn_only:
            self._request.node.warn(pytest.PytestWarning(message))
            return
        pytest.fail(message, pytrace=False)

    def _publish(self, result: ProfileResult) -> None:
        config = self._request.config
        config.stash[LEDGER].add(result)
        properties = self._request.node.user_properties
        properties.append(("llmperf_outcome", result.verdict.outcome.value))
        for key, value in result.metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                properties.append((f"llmperf_{key}", value))
        config.hook.pytest_llmperf_result(config=config, result=result)

    def _enforce(self, result: ProfileResult) -> None:
        from pytest_llmperf.accept import accept_command
        from pytest_llmperf.models import Outcome
        from pytest_llmperf.reports.tables import verdict_message

        verdict = result.verdict
        failing = verdict.failed or (verdict.outcome is Outcome.IMPROVED and self.settings.strict)
        if not failing:
            return
        message = _shown(
            verdict_message(
                verdict,
                profile=result.profile,
                engine=result.engine,
                baseline_file=result.baseline_file,
                accept_command=accept_command(
                    self._request.config.invocation_params.args, result.profile
                ),
                verbose=self._request.config.get_verbosity() > 0,
            )
        )
        if self.settings.warn_only:
            self._request.node.warn(pytest.PytestWarning(message))
            return
        pytest.fail(message, pytrace=False)


def _shown(text: str) -> str:
    """Text of ours that quotes engines and servers, as it may be printed: no credentials,
    no terminal escape sequences."""
    from pytest_llmperf import redact
    from pytest_llmperf.escape import printable

    return redact.text(printable(text))


def _progress_printer(config: pytest.Config, profile: WorkloadProfile) -> Any:
    """A progress callback that writes a line every ~10 % of requests, readable in CI logs."""
    from pytest_llmperf.measure.progress import ProgressLine

    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.get_verbosity() < 0:
        return None
    capture = config.pluginmanager.get_plugin("capturemanager")

    def write_line(line: str) -> None:
        # While a test runs, its output is captured (and dropped when it passes): step past
        # the capture, as pytest's live logging does, so the line shows as the run goes.
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return ProgressLine(profile.name, write_line)


class LLMPerfScenario(LLMPerf):
    """An async test's measured request flow: ``await llmperf_scenario.check(name, flow)``.

    ``flow`` is ``async def flow(client)``; it runs in the test's event loop, as often as
    repeats and confirm reruns ask, and every request it sends through ``client`` (a
    ``MeasuredClient``) is timed like a profile's. The aggregate is gated against the
    baseline entry named ``name``, exactly as a profile is.
    """

    def client(self) -> Any:
        """A measured client for a flow that is not gated (``async with ... as client``)."""
        from pytest_llmperf.measure.client import MeasuredClient
        from pytest_llmperf.measure.scenario import scenario_config

        _, api_key = _auth_headers(self.settings)
        return MeasuredClient(scenario_config(self.target, self.settings, api_key))

    async def check(  # type: ignore[override]
        self, name: str, flow: Any, tolerances: dict[str, float] | None = None
    ) -> ProfileResult:
        import asyncio

        from pytest_llmperf.gate.loop import run_gate
        from pytest_llmperf.measure.profiles import WorkloadProfile
        from pytest_llmperf.measure.scenario import measure_scenario

        loop = asyncio.get_running_loop()
        _, api_key = _auth_headers(self.settings)
        # The gate is synchronous: it runs in a worker thread and hands each measurement
        # back to this loop, where the flow (and whatever the test made for it) lives.
        profile = WorkloadProfile(name=name, dataset="scenario", num_prompts=1)

        def measure_once() -> Any:
            work = measure_scenario(name, flow, self.target, self.settings, api_key)
            return asyncio.run_coroutine_threadsafe(work, loop).result()

        failure: str | None = None
        try:
            result = await asyncio.to_thread(
                run_gate, self._gate_request(profile, tolerances), measure_once
            )
        except LLMPerfError as exc:
            failure = _shown(str(exc))
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        self._publish(result)
        self._enforce(result)
        return result


@pytest.fixture
def llmperf_scenario(
    request: pytest.FixtureRequest, llmperf_target: Target, llmperf_workloads: Workloads
) -> LLMPerfScenario:
    """Gate a request flow the test writes itself (an async test, e.g. with pytest-asyncio):
    ``await llmperf_scenario.check("tool-loop", flow)``."""
    return LLMPerfScenario(request, llmperf_target, llmperf_workloads, None)


@pytest.fixture
def llmperf(
    request: pytest.FixtureRequest,
    llmperf_target: Target,
    llmperf_workloads: Workloads,
    llmperf_profile: WorkloadProfile,
) -> LLMPerf:
    """Measure and gate the test's profile against the session's engine: ``llmperf.check()``."""
    return LLMPerf(request, llmperf_target, llmperf_workloads, llmperf_profile)


# -- reporting -------------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    ledger = config.stash.get(LEDGER, None)
    if ledger is None or not (ledger.results or ledger.failed_starts):
        return
    from pytest_llmperf.reports.summary import terminal_lines

    terminalreporter.section("llmperf")
    for line in terminal_lines(
        ledger, verbose=config.get_verbosity() > 0, settings=config.stash[SETTINGS]
    ):
        terminalreporter.write_line(_shown(line))
    for problem in ledger.output_errors:
        terminalreporter.write_line(f"ERROR: {_shown(problem)}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    ledger = config.stash.get(LEDGER, None)
    settings = config.stash.get(SETTINGS, None)
    if ledger is None or settings is None or hasattr(config, "workerinput"):
        return
    from pytest_llmperf.reports.summary import write_outputs

    write_outputs(ledger, settings, hardware=config.stash[HARDWARE])
    if ledger.output_errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a report asked for is missing
