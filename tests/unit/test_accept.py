"""The accept command a failure prints, and the gate request built from the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.accept import accept_command
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.gate.loop import gate_request
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.redact import request_auth
from tests.support.targets import unreachable_target
from tests.unit.test_fingerprint import AMX, cpu_probe


def test_accept_command_keeps_the_options_and_names_one_profile() -> None:
    ran = ["--engine=vllm", "--llmperf-profile", "short,long", "-k", "long", "--hardware=cpu"]
    assert accept_command(ran, "long") == (
        "pytest --engine=vllm -k long --hardware=cpu --llmperf-profile long --update-baselines"
    )


def test_accept_command_drops_an_earlier_update_and_profile_in_either_spelling() -> None:
    ran = ["--profile=short", "--llmperf-update-baselines", "--update-baselines", "-x"]
    assert accept_command(ran, "short") == ("pytest -x --llmperf-profile short --update-baselines")


def test_accept_command_masks_a_secret_it_repeats() -> None:
    shown = accept_command(["--endpoint=http://user:hunter2@host:8000"], "short")
    assert "hunter2" not in shown


def test_request_auth_needs_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert request_auth(None) == ({}, None)
    monkeypatch.delenv("LLMPERF_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="LLMPERF_TEST_KEY is not set"):
        request_auth("LLMPERF_TEST_KEY")
    monkeypatch.setenv("LLMPERF_TEST_KEY", "sk-123\n")
    headers, key = request_auth("LLMPERF_TEST_KEY")
    assert key == "sk-123"
    assert headers == {"Authorization": "Bearer sk-123"}
    assert "sk-123" not in repr(headers)


def test_gate_request_takes_the_settings_and_layers_the_tolerances(tmp_path: Path) -> None:
    from pytest_llmperf.config import Settings
    from pytest_llmperf.engines import fingerprint

    settings = Settings(
        engines=("vllm",), baseline_dir=tmp_path, repeat=3, confirm_reruns=0, first_run="record"
    )
    target = unreachable_target()
    machine = fingerprint.from_probe(cpu_probe(AMX))
    request = gate_request(
        settings,
        target=target,
        profile=builtin_profiles()["short"],
        hardware="cpu",
        machine=machine,
        nodeid="test_serving[short]",
        tolerances=({"mean_tpot_ms": 20.0, "total_token_throughput": 9.0}, {"mean_tpot_ms": 5.0}),
    )
    assert request.tolerance_overrides == {"mean_tpot_ms": 5.0, "total_token_throughput": 9.0}
    assert (request.repeat, request.confirm_reruns, request.first_run) == (3, 0, "record")
    assert request.baseline_root == tmp_path
    assert request.hardware_detected
    assert request.machine_key == "cpu-amx-2c"
    assert (
        gate_request(
            settings, target=target, profile=request.profile, hardware="cpu", machine=None
        ).tolerance_overrides
        is None
    )
