"""Baselines of one machine against runs on another, through pytest.

Each machine is a fingerprint built by the real fingerprint code from an injected probe
result (what /proc/cpuinfo or nvidia-smi would have said); the gate, the baseline files and
the reports are the real ones, against the stand-in streaming server as the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_llmperf.engines import fingerprint
from pytest_llmperf.gate.store import baseline_path
from tests.support.stream_server import StandInProcess
from tests.unit.test_fingerprint import A100_X8, AMX, AVX_ONLY, cpu_probe

PROFILES = "profiles:\n  mini:\n    dataset: random\n    input_len: 32\n    output_len: 8\n"
PROFILES += "    num_prompts: 8\n"
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
    pytester.makeini(
        "[pytest]\nllmperf_profiles = profiles.yaml\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester.path.joinpath("profiles.yaml").write_text(PROFILES)
    pytester.makepyfile(test_suite="def test_serving(llmperf):\n    llmperf.check()\n")
    return [
        "--engine=external",
        f"--endpoint={standin.base_url}",
        f"--model={tiny_model_dir}",
        "--hardware=cpu",
        "--llmperf-warmups=0",
        "--llmperf-profile=mini",
        "--llmperf-confirm=2",
        f"--baseline-dir={pytester.path / 'baselines'}",
        f"--llmperf-json={pytester.path / 'results.json'}",
        "-p",
        "no:cacheprovider",
    ]


def _file(pytester: pytest.Pytester, key: str, model: Path) -> Path:
    return baseline_path(pytester.path / "baselines", key, str(model), "external")


def _result(pytester: pytest.Pytester) -> dict[str, Any]:
    results: list[dict[str, Any]] = json.loads(pytester.path.joinpath("results.json").read_text())[
        "results"
    ]
    return results[0]


def _record_wide(pytester: pytest.Pytester, args: list[str], path: Path) -> None:
    pytester.runpytest(*args, "--update-baselines").assert_outcomes(passed=1)
    document = yaml.safe_load(path.read_text())
    document["profiles"]["mini"]["tolerances"] = dict(WIDE)  # a shared machine: wide limits
    path.write_text(yaml.safe_dump(document, sort_keys=False))


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
    shipped = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, shipped)
    before = shipped.read_bytes()

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
    outcome = _result(pytester)
    assert outcome["outcome"] == "machine-changed"
    assert outcome["runs"] == 1  # not a regression: no confirm reruns
    assert shipped.read_bytes() == before
    assert not _file(pytester, "cpu-avx-2c", tiny_model_dir).exists()


def test_first_run_outside_ci_records_this_machine_then_gates_against_it(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    shipped = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, shipped)
    before = shipped.read_bytes()

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
    assert _result(pytester)["first_run"] is True

    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*external/mini:*-> pass (total_token_throughput*"])
    assert _result(pytester)["baseline_file"] == str(own)


def test_equal_machine_gives_the_usual_verdicts(
    pytester: pytest.Pytester, args: list[str], on_machine: Any, tiny_model_dir: Path
) -> None:
    path = _file(pytester, "cpu", tiny_model_dir)
    on_machine(cpu_probe(AMX))
    _record_wide(pytester, args, path)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert _result(pytester)["outcome"] == "pass"

    document = yaml.safe_load(path.read_text())
    metrics = document["profiles"]["mini"]["metrics"]
    metrics["total_token_throughput"] *= 10  # the recorded machine was 10x faster
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    regressed = pytester.runpytest(*args)
    regressed.assert_outcomes(failed=1)
    regressed.stdout.fnmatch_lines(["*profile 'mini' on external regressed*"])
    assert _result(pytester)["outcome"] == "regressed"


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
    outcome = _result(pytester)
    assert outcome["outcome"] == "pass"
    assert any("recorded before fingerprints" in note for note in outcome["notes"])


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
    outcome = _result(pytester)
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
    assert _result(pytester)["outcome"] == "pass"
    assert _result(pytester)["baseline_file"] == str(family)

    on_machine(cpu_probe(AVX_ONLY))
    pytester.runpytest(*detected).assert_outcomes(passed=1)
    assert _result(pytester)["outcome"] == "recorded"
    assert _result(pytester)["baseline_file"] == str(_file(pytester, "cpu-avx-2c", tiny_model_dir))
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
    assert _result(pytester)["baseline_file"] == str(
        _file(pytester, "cpu-avx-2c-desk", tiny_model_dir)
    )
    assert path.read_bytes() == before
