"""Sweep profiles in YAML: what they define, and errors that name the file and the key."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.measure.profiles import builtin_profiles, parse_profiles
from pytest_llmperf.measure.slo import Slo

BASE = """\
profiles:
  s:
    dataset: random
    input_len: 16
    output_len: 4
    num_prompts: 8
"""


def parse(extra: str) -> dict[str, object]:
    return parse_profiles(BASE + extra, "my-profiles.yaml")  # type: ignore[return-value]


def test_a_sweep_profile_parses_with_its_slos_and_goodput() -> None:
    profiles = parse_profiles(
        BASE
        + "    sweep: {axis: max_concurrency, loads: [1, 2, 4]}\n"
        + "    slo: {p99_ttft_ms: 500, min_goodput_ratio: 0.9}\n"
        + "    goodput: {ttft: 500}\n",
        "my-profiles.yaml",
    )
    profile = profiles["s"]
    assert profile.sweep is not None
    assert profile.sweep.loads == (1.0, 2.0, 4.0)
    assert profile.slo == (Slo("p99_ttft_ms", 500.0), Slo("min_goodput_ratio", 0.9))
    assert profile.goodput == (("ttft", 500.0),)
    workload = profile.workload()
    assert workload["sweep"] == {
        "axis": "max_concurrency",
        "loads": [1.0, 2.0, 4.0],
        "max_steps": 8,
        "slo": {"p99_ttft_ms": 500.0, "min_goodput_ratio": 0.9},
    }


def test_plain_profiles_keep_their_recorded_workload_shape() -> None:
    assert "sweep" not in builtin_profiles()["medium"].workload()
    assert "goodput" not in builtin_profiles()["medium"].workload()


def test_builtin_sweeps() -> None:
    profiles = builtin_profiles()
    for name in ("medium-sweep", "embedded-sweep", "embedded-concurrency-sweep"):
        assert profiles[name].sweep is not None, name
        assert profiles[name].slo, name


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    sweep: {axis: users}\n", "profile 's': sweep axis must be one of"),
        ("    sweep: {axis: request_rate, steps: 3}\n", "sweep: unknown key.*steps.*valid keys"),
        ("    sweep: {axis: request_rate, loads: 4}\n", "sweep.loads must be a list"),
        ("    sweep: {axis: request_rate, start: fast}\n", "sweep.start must be a number"),
        ("    sweep: {axis: request_rate, max_steps: 2.5}\n", "sweep.max_steps must be a whole"),
        ("    sweep: [1, 2]\n", "sweep must be a mapping"),
        ("    slo: {p99_ttft_ms: 100}\n", "slo needs a sweep"),
        (
            "    sweep: {axis: request_rate}\n    slo: {ttft: 100}\n",
            "slo key 'ttft' is neither a latency metric",
        ),
        ("    goodput: {itl: 5}\n", "goodput SLO key 'itl' is not one of ttft, tpot, e2el"),
    ],
)
def test_bad_sweeps_name_the_file_profile_and_key(extra: str, message: str) -> None:
    with pytest.raises(ProfileError, match=f"my-profiles.yaml: .*{message}"):
        parse(extra)
