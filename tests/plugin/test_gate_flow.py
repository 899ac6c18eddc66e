"""The gate end to end through pytest, against a stand-in streaming server as the endpoint.

The stand-in is a real HTTP server in another process (tests/support/stream_server.py); the
plugin treats it as an external engine. Each state of the gate is produced by editing the
baseline file the way a reviewer would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.gate_suite import MINI_PROFILES, baseline_file, edit_entry, write_suite
from tests.support.stream_server import StandInProcess

PROFILES = (
    MINI_PROFILES
    + """\
  mini-chat-4:
    dataset: random
    input_len: 16
    output_len: 4
    num_prompts: 6
    max_concurrency: 2
"""
)

STANDIN_VERSION = "0.32.0"  # what the stand-in answers at GET /version, as vLLM does


@pytest.fixture(scope="module")
def standin() -> Iterator[StandInProcess]:
    with StandInProcess("--gap-ms", "1", "--no-record", "--version", STANDIN_VERSION) as server:
        yield server


@pytest.fixture
def suite(pytester: pytest.Pytester, standin: StandInProcess, tiny_model_dir: Path) -> list[str]:
    return write_suite(
        pytester, endpoint=standin.base_url, model_dir=tiny_model_dir, profiles_yaml=PROFILES
    )


def _record_then_scale_throughput(
    pytester: pytest.Pytester, suite: list[str], model: Path, factor: float
) -> Path:
    """Record `mini`, then multiply its recorded throughput by ``factor``, as an edit would."""
    pytester.runpytest(*suite, "--update-baselines").assert_outcomes(passed=1)
    path = baseline_file(pytester, model)
    measured = yaml.safe_load(path.read_text())["profiles"]["mini"]["metrics"]
    edit_entry(
        path,
        "mini",
        metrics={"total_token_throughput": measured["total_token_throughput"] * factor},
    )
    return path


def test_missing_baseline_fails_in_ci_and_says_how_to_record(
    pytester: pytest.Pytester, suite: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest(*suite)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*llmperf: profile 'mini' on external has no baseline*",
            "*note: no baseline for this profile in *external.yaml*",
            "*to record this machine's numbers: pytest * --llmperf-profile mini "
            "--update-baselines*",
        ]
    )


def test_record_then_pass_then_keep_hand_edited_tolerances(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    recorded = pytester.runpytest(*suite, "--update-baselines")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["*external/mini:*-> recorded*"])
    path = baseline_file(pytester, tiny_model_dir)
    document = yaml.safe_load(path.read_text())
    entry = document["profiles"]["mini"]
    assert entry["workload"]["num_prompts"] == 8
    assert entry["metrics"]["completed"] == 8
    assert entry["tolerances"] == {"total_token_throughput": 5.0, "mean_tpot_ms": 10.0}

    # A reviewer widens the tolerances for this noisy stand-in; the next update keeps them.
    edit_entry(path, "mini", tolerances={"total_token_throughput": 900.0, "mean_tpot_ms": 900.0})
    again = pytester.runpytest(*suite, "--update-baselines")
    again.assert_outcomes(passed=1)
    kept = yaml.safe_load(path.read_text())["profiles"]["mini"]["tolerances"]
    assert kept == {"total_token_throughput": 900.0, "mean_tpot_ms": 900.0}

    plain = pytester.runpytest(*suite)
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["*external/mini:*-> pass (total_token_throughput *%*"])


def test_regression_fails_with_the_table(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    # Pretend the baseline was ten times faster: the run now looks 90 % slower.
    _record_then_scale_throughput(pytester, suite, tiny_model_dir, 10)
    result = pytester.runpytest(*suite)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*llmperf: profile 'mini' on external regressed (baseline: *external.yaml)*",
            "*confirmed: a rerun measured the regression again*",
            "*metric * baseline * measured * change * tolerance * verdict*",
            "*total_token_throughput * -*% * ±5% * REGRESSED*",
            "*mean_tpot_ms * ±10% *",
            "*to accept the new numbers: pytest * --update-baselines*",
        ]
    )
    accept = next(line for line in result.outlines if "to accept the new numbers" in line)
    assert accept.count("--llmperf-profile") == 1  # the profile that failed, named once


def test_improvement_beyond_tolerance_is_reported_and_strict_fails(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    path = _record_then_scale_throughput(pytester, suite, tiny_model_dir, 0.1)
    edit_entry(path, "mini", tolerances={"mean_tpot_ms": 900.0})
    lenient = pytester.runpytest(*suite)
    lenient.assert_outcomes(passed=1)
    lenient.stdout.fnmatch_lines(["*external/mini:*-> improved*"])
    strict = pytester.runpytest(*suite, "--llmperf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(
        ["*improved beyond tolerance*", "*refresh the baseline with --update-baselines*"]
    )


def test_changed_workload_is_not_compared(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    pytester.runpytest(*suite, "--update-baselines").assert_outcomes(passed=1)
    result = pytester.runpytest(*suite, "--num-prompts=4")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ran a workload that differs from its baseline*",
            "*num_prompts: baseline 8, now 4*",
        ]
    )


def test_engine_version_change_is_reported(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    pytester.runpytest(*suite, "--update-baselines").assert_outcomes(passed=1)
    path = baseline_file(pytester, tiny_model_dir)
    document = yaml.safe_load(path.read_text())
    assert document["profiles"]["mini"]["engine_version"] == STANDIN_VERSION
    document["profiles"]["mini"]["engine_version"] = "0.0.1"
    document["profiles"]["mini"]["tolerances"] = {"total_token_throughput": 900.0}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    json_path = pytester.path / "results.json"
    result = pytester.runpytest(*suite, f"--llmperf-json={json_path}")
    result.assert_outcomes(passed=1)
    import json

    record = json.loads(json_path.read_text())["results"][0]
    assert record["outcome"] == "pass"
    assert record["engine_version"] == STANDIN_VERSION
    assert f"engine version changed: baseline 0.0.1, now {STANDIN_VERSION}" in record["notes"]
    assert record["profile"] == "mini"
    assert record["metrics"]["completed"] == 8


def test_metrics_go_into_junitxml(pytester: pytest.Pytester, suite: list[str]) -> None:
    pytester.runpytest(*suite, "--update-baselines")
    xml = pytester.path / "junit.xml"
    pytester.runpytest(*suite, "--update-baselines", f"--junitxml={xml}")
    text = xml.read_text()
    assert '<property name="llmperf_outcome" value="recorded"' in text
    assert '<property name="llmperf_total_token_throughput"' in text
    assert '<property name="llmperf_mean_tpot_ms"' in text


def test_max_concurrency_profile_runs(pytester: pytest.Pytester, suite: list[str]) -> None:
    args = [a for a in suite if not a.startswith("--llmperf-profile")]
    result = pytester.runpytest(*args, "--llmperf-profile=mini-chat-4", "--update-baselines")
    result.assert_outcomes(passed=1)
