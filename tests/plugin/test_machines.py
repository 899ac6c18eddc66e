"""Baselines of one machine against runs on another, through pytest.

Each machine is a fingerprint built by the real fingerprint code from an injected probe
result (what /proc/cpuinfo or nvidia-smi would have said); the gate, the baseline files and
the reports are the real ones, against the stand-in streaming server as the endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_llmperf.engines import fingerprint
from tests.support.gate_suite import MINI_PROFILES, baseline_file, first_result, record, write_suite
from tests.support.stream_server import StandInProcess
from tests.unit.test_fingerprint import (
    A100_X8,
    AMX,
    AVX_ONLY,
    ZEN4_GUEST,
    ZEN5_GUEST,
    cpu_probe,
)

WIDE = {"total_token_throughput": 60.0, "mean_tpot_ms": 60.0}
H100 = "NVIDIA H100 80GB HBM3, 81559, 550.54.15"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandInProcess]:
    with StandInProcess("--ttft-ms", "20", "--gap-ms", "5", "--no-record") as server:
        yield server


@pytest.fixture
def on_machine(monkeypatch: pytest.MonkeyPatch) -> Callable[[fingerprint.Probe], None]:
    """Make the next pytest run see this probe result as the machine it runs on."""

    def use(probe: fingerprint.Probe) -> None:
        monkeypatch.setattr(fingerprint, "_CACHED", None)
        monkeypatch.setattr(fingerprint, "probe", lambda: probe)

    return use


@pytest.fixture
def args(pytester: pytest.Pytester, standin: StandInProcess, tiny_model_dir: Path) -> list[str]:
    options = write_suite(
        pytester, endpoint=standin.base_url, model_dir=tiny_model_dir, profiles_yaml=MINI_PROFILES
    )
    return [*options, "--llmperf-confirm=2"]


def _file(pytester: pytest.Pytester, key: str, model: Path) -> Path:
    return baseline_file(pytester, model, key)


def _record_wide(pytester: pytest.Pytester, args: list[str], path: Path) -> None:
    record(pytester, args, path, WIDE)


def _shipped(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, model: Path, cpuinfo: str = AMX
) -> tuple[Path, bytes]:
    """The file a project ships: recorded under --hardware=cpu on this CPU (an AMX machine
    unless told), wide limits."""
    shipped = _file(pytester, "cpu", model)
    on_machine(cpu_probe(cpuinfo))
    _record_wide(pytester, args, shipped)
    return shipped, shipped.read_bytes()


def test_recorded_entry_carries_the_machine(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    on_machine(cpu_probe(AMX))
    pytester.runpytest(*args, "--update-baselines").assert_outcomes(passed=1)
    entry = yaml.safe_load(_file(pytester, "cpu", tiny_model_dir).read_text())["profiles"]["mini"]
    assert entry["machine"]["key"] == "cpu-amx-2c"
    assert entry["machine"]["isa"] == "amx"
    assert entry["machine"]["plugin"]


def test_other_cpu_isa_in_ci_is_machine_changed_naming_the_fields(
    pytester: pytest.Pytester,
    args: list[str],
    on_machine: Any,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped, before = _shipped(pytester, args, on_machine, tiny_model_dir)

    on_machine(cpu_probe(AVX_ONLY))
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*profile 'mini' on external was measured on another machine than its baseline*",
            "*CPU vector ISA: amx recorded, avx here*",
            "*total_token_throughput*info*",
            "*they go to *cpu-avx-2c*external.yaml*stays as it is*",
            "*to record this machine's numbers: pytest *--update-baselines*",
        ]
    )
    outcome = first_result(pytester)
    assert outcome["outcome"] == "machine-changed"
    assert outcome["runs"] == 1  # not a regression: no confirm reruns
    assert shipped.read_bytes() == before
    assert not _file(pytester, "cpu-avx-2c", tiny_model_dir).exists()


def test_first_run_outside_ci_records_this_machine_then_gates_against_it(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    shipped, before = _shipped(pytester, args, on_machine, tiny_model_dir)

    on_machine(cpu_probe(AVX_ONLY))
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        [
            "*external/mini:*-> recorded*",
            "*first run on this machine: 1 profile(s) had no baseline measured on a machine "
            "like this one*",
            "*cpu-avx-2c*external.yaml (mini)*",
        ]
    )
    own = _file(pytester, "cpu-avx-2c", tiny_model_dir)
    entry = yaml.safe_load(own.read_text())["profiles"]["mini"]
    assert entry["machine"]["isa"] == "avx"
    assert entry["tolerances"] == WIDE  # the same profile's limits, taken from the other file
    assert shipped.read_bytes() == before
    assert first_result(pytester)["first_run"] is True

    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*external/mini:*-> pass (total_token_throughput*"])
    assert first_result(pytester)["baseline_file"] == str(own)


def test_equal_machine_gives_the_usual_verdicts(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    path = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, path)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert first_result(pytester)["outcome"] == "pass"

    document = yaml.safe_load(path.read_text())
    metrics = document["profiles"]["mini"]["metrics"]
    metrics["total_token_throughput"] *= 10  # the recorded machine was 10x faster
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    regressed = pytester.runpytest(*args)
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(["*profile 'mini' on external regressed*"])
    assert first_result(pytester)["outcome"] == "regressed"


def test_baseline_without_a_fingerprint_is_compared_with_a_note(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    path = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, path)
    document = yaml.safe_load(path.read_text())
    del document["profiles"]["mini"]["machine"]  # as written before fingerprints existed
    path.write_text(yaml.safe_dump(document, sort_keys=False))

    on_machine(cpu_probe(AVX_ONLY))
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    outcome = first_result(pytester)
    assert outcome["outcome"] == "pass"
    assert any("recorded before fingerprints" in note for note in outcome["notes"])


def test_same_cpu_name_and_key_but_another_generation_is_machine_changed(
    pytester: pytest.Pytester,
    args: list[str],
    on_machine: Any,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two guests that both say "AMD EPYC" and share cpu-avx512-2c: only the family and model
    # numbers tell that the baseline came from a slower CPU.
    shipped, before = _shipped(pytester, args, on_machine, tiny_model_dir, ZEN4_GUEST)

    on_machine(cpu_probe(ZEN5_GUEST))
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*CPU family and model number: family 25 model 17 recorded, family 26 model 2 here*"]
    )
    assert first_result(pytester)["outcome"] == "machine-changed"
    assert shipped.read_bytes() == before

    on_machine(cpu_probe(ZEN4_GUEST))
    pytester.runpytest(*args).assert_outcomes(passed=1)


def test_other_gpu_is_machine_changed_and_every_report_shows_both_machines(
    pytester: pytest.Pytester,
    args: list[str],
    on_machine: Any,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX, nvidia_query=A100_X8))
    _record_wide(pytester, args, path)

    on_machine(cpu_probe(AMX, nvidia_query=H100))
    monkeypatch.setenv("CI", "1")
    summary, page = pytester.path / "summary.md", pytester.path / "report.html"
    result = pytester.runpytest(*args, f"--llmperf-summary={summary}", f"--llmperf-html={page}")
    result.assert_outcomes(failed=1)
    recorded_on = "a100-80gb-x8: 8x NVIDIA A100-SXM4-80GB 80 GB"
    measured_on = "h100-80gb: 1x NVIDIA H100 80GB HBM3 80 GB"
    result.stdout.fnmatch_lines(
        [
            "*accelerator: NVIDIA A100-SXM4-80GB recorded, NVIDIA H100 80GB HBM3 here*",
            f"*measured on {measured_on}*",
            f"*baseline of external/mini measured on {recorded_on}*",
        ]
    )
    outcome = first_result(pytester)
    assert outcome["outcome"] == "machine-changed"
    assert outcome["machine"]["key"] == "h100-80gb"
    assert outcome["baseline_machine"]["key"] == "a100-80gb-x8"
    for text in (summary.read_text(), page.read_text()):
        assert measured_on in text
        assert recorded_on in text


def test_without_hardware_the_family_folder_is_read_and_the_own_folder_written(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    family = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, family)  # shipped under --hardware=cpu
    before = family.read_bytes()
    detected = [arg for arg in args if arg != "--hardware=cpu"]

    pytester.runpytest(*detected).assert_outcomes(passed=1)
    assert first_result(pytester)["outcome"] == "pass"
    assert first_result(pytester)["baseline_file"] == str(family)

    on_machine(cpu_probe(AVX_ONLY))
    pytester.runpytest(*detected).assert_outcomes(passed=1)
    assert first_result(pytester)["outcome"] == "recorded"
    assert first_result(pytester)["baseline_file"] == str(
        _file(pytester, "cpu-avx-2c", tiny_model_dir)
    )
    assert family.read_bytes() == before


def test_two_machines_under_one_named_key_write_nothing_until_given_keys_of_their_own(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    # Two AVX-only CPUs of different models share the machine key cpu-avx-2c; the user names
    # that key, so both would write the same file.
    shared = [arg.replace("--hardware=cpu", "--hardware=cpu-avx-2c") for arg in args]
    path = _file(pytester, "cpu-avx-2c", tiny_model_dir)
    on_machine(cpu_probe(AVX_ONLY))
    _record_wide(pytester, shared, path)
    before = path.read_bytes()

    on_machine(cpu_probe(AVX_ONLY.replace("AMD EPYC 7B13", "Intel(R) Core(TM) i7-2600")))
    refused = pytester.runpytest(*shared, "--update-baselines")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        [
            "*CPU model: AMD EPYC 7B13 recorded, Intel(R) Core(TM) i7-2600 here*",
            "*holds another machine's entries under the key this machine would use "
            "(cpu-avx-2c); nothing was written*--hardware=cpu-avx-2c-<name> --update-baselines*",
        ]
    )
    assert path.read_bytes() == before

    own_key = [arg.replace("--hardware=cpu", "--hardware=cpu-avx-2c-desk") for arg in args]
    pytester.runpytest(*own_key, "--update-baselines").assert_outcomes(passed=1)
    pytester.runpytest(*own_key).assert_outcomes(passed=1)
    assert first_result(pytester)["baseline_file"] == str(
        _file(pytester, "cpu-avx-2c-desk", tiny_model_dir)
    )
    assert path.read_bytes() == before
