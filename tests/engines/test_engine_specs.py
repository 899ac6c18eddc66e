"""The engine specs as pure descriptions: argv, quirks, stop codes, versions, MindIE's mapping."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.engines import LaunchRequest, engine_names, get_engine
from pytest_llmperf.errors import ConfigError

STARTING_ENGINES = ["vllm", "sglang", "trtllm", "mindie", "llamacpp"]


def test_every_engine_of_the_seeds_is_registered() -> None:
    assert set(engine_names()) >= {"vllm", "sglang", "trtllm", "mindie", "llamacpp", "external"}
    assert all(get_engine(name).starts_server for name in STARTING_ENGINES)
    assert not get_engine("external").starts_server


# engines.md §11: which length controls each engine takes.
@pytest.mark.parametrize(
    ("engine", "max_tokens_field", "ignore_eos", "min_tokens"),
    [
        ("vllm", "max_completion_tokens", True, True),
        ("sglang", "max_completion_tokens", True, True),
        ("trtllm", "max_completion_tokens", True, True),
        ("mindie", "max_tokens", True, False),
        ("llamacpp", "max_tokens", True, False),
        ("external", "max_tokens", True, False),
    ],
)
def test_request_quirks(
    engine: str, max_tokens_field: str, ignore_eos: bool, min_tokens: bool
) -> None:
    quirks = get_engine(engine).quirks
    assert quirks.chat_max_tokens_field == max_tokens_field
    assert quirks.supports_ignore_eos is ignore_eos
    assert quirks.supports_min_tokens is min_tokens


def test_normal_stop_codes() -> None:
    kill, abort, term = int(signal.SIGKILL), int(signal.SIGABRT), int(signal.SIGTERM)
    assert {-kill, 128 + kill} <= get_engine("sglang").normal_stop_codes
    assert {128 + term, 128 + int(signal.SIGINT)} <= get_engine("trtllm").normal_stop_codes
    assert {-abort, 128 + abort} <= get_engine("mindie").normal_stop_codes
    for engine in STARTING_ENGINES:
        assert {0, -term} <= get_engine(engine).normal_stop_codes
    # An abort is only expected from MindIE.
    assert -abort not in get_engine("sglang").normal_stop_codes
    assert 1 not in get_engine("mindie").normal_stop_codes


@pytest.mark.parametrize(
    ("engine", "paths", "body", "version"),
    [
        ("vllm", ("/version",), '{"version": "0.32.0"}', "0.32.0"),
        (
            "sglang",
            ("/server_info", "/get_server_info"),  # the second is a deprecated alias
            '{"version": "0.5.5.post1", "tp_size": 1}',
            "0.5.5.post1",
        ),
        ("trtllm", ("/version",), '{"version": "1.2.0rc1"}', "1.2.0rc1"),
        (
            "llamacpp",
            ("/props",),
            '{"build_info": "b6123-abcdef0", "total_slots": 4}',
            "b6123-abcdef0",
        ),
    ],
)
def test_version_probe(engine: str, paths: tuple[str, ...], body: str, version: str) -> None:
    spec = get_engine(engine)
    assert spec.version_paths == paths
    assert spec.parse_version(body) == version
    assert spec.parse_version("not json") is None


def test_no_version_probe_where_the_server_has_none() -> None:
    assert get_engine("mindie").version_paths == ()
    assert get_engine("external").version_paths == ()


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "llamacpp", "vllm"])
def test_user_args_verbatim_in_order_before_host_and_port(engine: str) -> None:
    args = ("--b", "2", "--a=1", "-x", "--b", "3")
    plan = get_engine(engine).plan(
        LaunchRequest(model="M", port=9123, host="10.0.0.5", engine_args=args, executable="tool")
    )
    assert plan.argv[-4:] == ("--host", "10.0.0.5", "--port", "9123")
    assert plan.argv[-4 - len(args) : -4] == args
    assert plan.base_url == "http://10.0.0.5:9123"


@pytest.mark.parametrize(
    ("engine", "executable", "argv"),
    [
        ("trtllm", "/opt/trt/bin/trtllm-serve", ("/opt/trt/bin/trtllm-serve", "M")),
        ("llamacpp", "/opt/llama/llama-server", ("/opt/llama/llama-server", "-m", "M")),
        (
            "sglang",
            "/venv/bin/python3.11",
            ("/venv/bin/python3.11", "-m", "sglang.launch_server", "--model-path", "M"),
        ),
        ("sglang", "sglang", ("sglang", "serve", "--model-path", "M")),
        ("vllm", "/venv/bin/vllm", ("/venv/bin/vllm", "serve", "M")),
    ],
)
def test_engine_bin_override(engine: str, executable: str, argv: tuple[str, ...]) -> None:
    plan = get_engine(engine).plan(LaunchRequest(model="M", port=1, executable=executable))
    assert plan.argv[: len(argv)] == argv


def test_health_urls() -> None:
    for engine in ("sglang", "trtllm", "llamacpp"):
        plan = get_engine(engine).plan(LaunchRequest(model="M", port=7000))
        assert plan.health_url == "http://127.0.0.1:7000/health"
    # SGLang answers /v1/models during warm-up; /health is the strict check.
    assert get_engine("sglang").health_path == "/health"


def test_llamacpp_gets_a_slot_save_path_so_that_slots_can_be_erased(tmp_path: Path) -> None:
    spec = get_engine("llamacpp")
    plan = spec.plan(LaunchRequest(model="M", port=1, config_dir=tmp_path))
    folder = tmp_path / "slots"
    assert plan.argv[3:5] == ("--slot-save-path", str(folder))
    assert plan.directories == (folder,)  # llama-server wants an existing folder
    own = ("--slot-save-path=/kv",)
    plan = spec.plan(LaunchRequest(model="M", port=1, config_dir=tmp_path, engine_args=own))
    assert plan.argv.count("--slot-save-path") == 0
    assert plan.directories == ()


def test_llamacpp_loading_answer_is_not_ready() -> None:
    spec = get_engine("llamacpp")
    loading = '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
    assert not spec.is_ready(503, loading)
    assert spec.is_ready(200, '{"status":"ok"}')


# -- MindIE: vLLM-like arguments into config.json ---------------------------------------------


def mindie_plan(tmp_path: Path, *args: str, port: int = 8000) -> tuple[dict[str, Any], Any]:
    plan = get_engine("mindie").plan(
        LaunchRequest(
            model="/models/Qwen3-30B-A3B", port=port, engine_args=args, config_dir=tmp_path
        )
    )
    return json.loads(plan.files[tmp_path / "mindie-config.json"]), plan


def test_mindie_max_model_len(tmp_path: Path) -> None:
    config, _ = mindie_plan(tmp_path, "--max-model-len", "32768")
    deploy = config["BackendConfig"]["ModelDeployConfig"]
    schedule = config["BackendConfig"]["ScheduleConfig"]
    assert deploy["maxSeqLen"] == deploy["maxInputTokenLen"] == 32768
    assert schedule["maxIterTimes"] == schedule["maxPrefillTokens"] == 32768


def test_mindie_defaults_cap_the_context_like_gpustack(tmp_path: Path) -> None:
    config, plan = mindie_plan(tmp_path)
    assert config["BackendConfig"]["ModelDeployConfig"]["maxSeqLen"] == 8192
    assert config["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] == 200
    assert config["BackendConfig"]["npuDeviceIds"] == [[0]]
    assert "NPU_MEMORY_FRACTION" not in plan.env
    assert "MINDIE_ASYNC_SCHEDULING_ENABLE" not in plan.env


@pytest.mark.parametrize(
    "args",
    [("-tp", "2"), ("--tensor-parallel-size", "2"), ("--tensor-parallel-size=2",), ("-tp=2",)],
)
def test_mindie_tensor_parallel(tmp_path: Path, args: tuple[str, ...]) -> None:
    config, _ = mindie_plan(tmp_path, *args)
    assert config["BackendConfig"]["npuDeviceIds"] == [[0, 1]]
    assert config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldSize"] == 2


def test_mindie_batch_limits(tmp_path: Path) -> None:
    config, plan = mindie_plan(tmp_path, "--max-num-seqs", "32", "--max-num-batched-tokens", "4096")
    schedule = config["BackendConfig"]["ScheduleConfig"]
    assert schedule["maxBatchSize"] == 32
    assert schedule["maxPrefillBatchSize"] == 32  # never above maxBatchSize
    assert schedule["maxPrefillTokens"] == 4096
    # A prompt must fit one prefill batch.
    assert config["BackendConfig"]["ModelDeployConfig"]["maxInputTokenLen"] == 4096
    assert plan.env["MINDIE_ASYNC_SCHEDULING_ENABLE"] == "0"  # small batches, as GPUStack does


def test_mindie_names_memory_and_prefix_switches(tmp_path: Path) -> None:
    config, plan = mindie_plan(
        tmp_path,
        "--served-model-name",
        "qwen3-moe",
        "--gpu-memory-utilization",
        "0.85",
        "--trust-remote-code",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
    )
    model_config = config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert model_config["modelName"] == "qwen3-moe"
    assert model_config["modelWeightPath"] == "/models/Qwen3-30B-A3B"
    assert model_config["trustRemoteCode"] is True
    assert plan.env["NPU_MEMORY_FRACTION"] == "0.85"
    assert config["BackendConfig"]["ScheduleConfig"]["enablePrefixCache"] is False  # last wins


def test_mindie_server_config_has_the_keys_mindie_cannot_start_without(tmp_path: Path) -> None:
    # inferMode is compulsory; distDPServerEnabled is read unchecked (GPUStack's values).
    config, plan = mindie_plan(tmp_path)
    assert config["ServerConfig"]["inferMode"] == "standard"
    assert config["ServerConfig"]["distDPServerEnabled"] is False
    assert plan.env["MIES_SERVICE_MONITOR_MODE"] == "1"  # MindIE serves no metrics without it


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("/models/Qwen3-30B-A3B", "Qwen3-30B-A3B"),
        ("/models/Qwen3-30B-A3B/", "Qwen3-30B-A3B"),
        ("Qwen/Qwen3-32B", "Qwen3-32B"),
        ("tiny_qwen3.v2", "tiny_qwen3.v2"),
    ],
)
def test_mindie_model_name_is_a_plain_name_by_default(model: str, name: str) -> None:
    # MindIE refuses a modelName with "/": the default is the model's last path part.
    plan = get_engine("mindie").plan(LaunchRequest(model=model, port=8000, config_dir=Path("c")))
    config = json.loads(next(iter(plan.files.values())))
    model_config = config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]
    assert model_config["modelName"] == name
    assert model_config["modelWeightPath"] == model


def test_mindie_ports_and_urls(tmp_path: Path) -> None:
    config, plan = mindie_plan(tmp_path, port=8000)
    server = config["ServerConfig"]
    assert server["port"] == 8000
    assert server["managementPort"] not in (0, 8000)  # a free port chosen while planning
    assert server["metricsPort"] == server["managementPort"]
    assert server["ipAddress"] == server["managementIpAddress"] == "127.0.0.1"
    assert plan.base_url == "http://127.0.0.1:8000"
    assert plan.health_url == f"http://127.0.0.1:{server['managementPort']}/v2/health/ready"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--quantization", "fp8"), "'--quantization' is not understood"),
        (("--max-model-len",), "--max-model-len needs a value"),
        (("--max-num-seqs", "many"), "--max-num-seqs needs a positive integer"),
        (("-tp", "0"), "-tp needs a positive integer"),
        (("--npu-memory-fraction", "1.5"), "needs a fraction in (0, 1]"),
        (("--management-port", "8000"), "must differ from the serving port"),
        (("--enable-prefix-caching=yes",), "is not understood"),
        (("--management-port", "80"), "MindIE accepts ports 1024-65535 only"),
        (("--management-port", "70000"), "MindIE accepts ports 1024-65535 only"),
        (("--served-model-name", "org/model"), "name it with the engine argument"),
        (("--served-model-name", "-model"), "starting and ending with a letter or digit"),
    ],
)
def test_mindie_refuses_what_it_cannot_translate(
    tmp_path: Path, args: tuple[str, ...], words: str
) -> None:
    with pytest.raises(ConfigError) as error:
        mindie_plan(tmp_path, *args)
    assert words in str(error.value)


def test_mindie_refuses_a_serving_port_below_1024(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="serving port 80: MindIE accepts ports 1024-65535"):
        mindie_plan(tmp_path, port=80)


def test_mindie_needs_a_config_dir() -> None:
    with pytest.raises(ConfigError, match="config_dir"):
        get_engine("mindie").plan(LaunchRequest(model="M", port=8000))


# -- external ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoint", ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"]
)
def test_external_endpoint_forms(endpoint: str) -> None:
    plan = get_engine("external").plan(LaunchRequest(model="M", port=0, endpoint=endpoint))
    assert plan.argv == ()
    assert plan.base_url == "http://h:1"
    assert plan.health_url == "http://h:1/v1/models"


@pytest.mark.parametrize("endpoint", [None, "", "h:1", "ftp://h:1/v1"])
def test_external_needs_an_http_endpoint(endpoint: str | None) -> None:
    with pytest.raises(ConfigError):
        get_engine("external").plan(LaunchRequest(model="M", port=0, endpoint=endpoint))
