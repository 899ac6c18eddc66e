"""Issue acceptance 1: the dry run reproduces the seeds' serving commands exactly.

Each expected line is the command printed in the seed documents plus only the host and port
flags the plugin adds at the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.engines import LaunchRequest, get_engine
from pytest_llmperf.engines.dryrun import command_line, describe_launch

HOST_PORT = " --host 127.0.0.1 --port 8000"


def command_of(description: str) -> str:
    (line,) = [line for line in description.splitlines() if line.startswith("command: ")]
    return line.removeprefix("command: ")


@pytest.mark.parametrize(
    ("engine", "model", "engine_args", "executable", "seed_command"),
    [
        pytest.param(
            "trtllm",
            "Qwen/Qwen3-32B",
            ("--max_seq_len=40960", "--enable_chunked_prefill"),
            None,
            "trtllm-serve Qwen/Qwen3-32B --max_seq_len=40960 --enable_chunked_prefill",
            id="trtllm-a100-winner",
        ),
        pytest.param(
            "trtllm",
            "Qwen/Qwen3-14B",
            ("--max_num_tokens=16384",),
            None,
            "trtllm-serve Qwen/Qwen3-14B --max_num_tokens=16384",
            id="trtllm-max-tokens",
        ),
        pytest.param(
            "vllm",
            "Qwen/Qwen3-32B",
            ("--max-model-len", "32768"),
            "vllm",
            "vllm serve Qwen/Qwen3-32B --max-model-len 32768",
            id="vllm-baseline",
        ),
        pytest.param(
            "vllm",
            "Qwen/Qwen3-30B-A3B",
            ("-tp", "2"),
            "vllm",
            "vllm serve Qwen/Qwen3-30B-A3B -tp 2",
            id="vllm-910b-baseline",
        ),
        pytest.param(
            "sglang",
            "Qwen/Qwen3-32B",
            (),
            None,
            "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B",
            id="sglang",
        ),
    ],
)
def test_seed_serving_commands(
    engine: str, model: str, engine_args: tuple[str, ...], executable: str | None, seed_command: str
) -> None:
    request = LaunchRequest(model=model, port=8000, engine_args=engine_args, executable=executable)
    spec = get_engine(engine)
    assert command_line(spec.plan(request).argv) == seed_command + HOST_PORT
    assert command_of(describe_launch(spec, request)) == seed_command + HOST_PORT


def test_mindie_prefix_caching_seed_writes_the_config(tmp_path: Path) -> None:
    # Seed: `mindie serve Qwen3-30B-A3B --enable-prefix-caching` (GPUStack's wrapper).
    request = LaunchRequest(
        model="Qwen/Qwen3-30B-A3B",
        port=8000,
        config_dir=tmp_path,
        engine_args=("--enable-prefix-caching", "--management-port", "8001"),
    )
    spec = get_engine("mindie")
    plan = spec.plan(request)
    config_path = tmp_path / "mindie-config.json"
    assert command_line(plan.argv) == "mindieservice_daemon"
    assert dict(plan.env) == {
        "MIES_CONFIG_JSON_PATH": str(config_path),
        "MINDIE_LOG_TO_STDOUT": "1",
        "MIES_SERVICE_MONITOR_MODE": "1",
    }
    config = json.loads(plan.files[config_path])
    model_config = config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert config["BackendConfig"]["ScheduleConfig"]["enablePrefixCache"] is True
    assert json.loads(model_config["plugin_params"]) == {"plugin_type": "prefix_cache"}
    assert model_config["modelName"] == "Qwen3-30B-A3B"  # MindIE refuses a "/" in it
    assert model_config["modelWeightPath"] == "Qwen/Qwen3-30B-A3B"
    assert config["ServerConfig"]["port"] == 8000
    assert config["ServerConfig"]["managementPort"] == 8001
    assert config["ServerConfig"]["httpsEnabled"] is False

    description = describe_launch(spec, request)
    assert command_of(description) == "mindieservice_daemon"
    assert f"  MIES_CONFIG_JSON_PATH={config_path}" in description.splitlines()
    # The file is shown verbatim between its markers, so it can be copied out.
    shown = description.split("----- begin mindie-config.json -----\n")[1]
    shown = shown.split("\n----- end mindie-config.json -----")[0]
    assert json.loads(shown) == config
    assert not config_path.exists()  # a dry run writes nothing


def test_mindie_default_seed_leaves_prefix_caching_off(tmp_path: Path) -> None:
    # Seed: `mindie serve Qwen/Qwen3-30B-A3B` (defaults; prefix caching crashed for this model).
    plan = get_engine("mindie").plan(
        LaunchRequest(model="Qwen/Qwen3-30B-A3B", port=8000, config_dir=tmp_path)
    )
    config = json.loads(plan.files[tmp_path / "mindie-config.json"])
    model_config = config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert config["BackendConfig"]["ScheduleConfig"]["enablePrefixCache"] is False
    assert "plugin_params" not in model_config


def test_external_dry_run_starts_nothing() -> None:
    description = describe_launch(
        get_engine("external"),
        LaunchRequest(model="Qwen/Qwen3-32B", port=0, endpoint="http://gpu-box:8000/v1"),
    )
    assert command_of(description) == (
        "(none: the plugin starts nothing and uses http://gpu-box:8000)"
    )
    assert "ready when: GET http://gpu-box:8000/v1/models answers 200" in description


def test_shell_quoting_of_awkward_arguments() -> None:
    request = LaunchRequest(
        model="/models/my model",
        port=8000,
        engine_args=("--chat-template", "{{ 'x' }}"),
        executable="vllm",
    )
    line = command_line(get_engine("vllm").plan(request).argv)
    assert line == (
        "vllm serve '/models/my model' --chat-template '{{ '\"'\"'x'\"'\"' }}'" + HOST_PORT
    )
