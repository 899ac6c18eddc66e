"""Huawei MindIE: ``mindieservice_daemon`` configured by a generated ``config.json``.

The daemon takes no command-line arguments. Like GPUStack's ``mindie serve`` wrapper (the form
in the seeds), this spec accepts vLLM-like engine arguments and translates them into MindIE's
JSON configuration, writes it into ``LaunchRequest.config_dir`` and names it with
``MIES_CONFIG_JSON_PATH``:

- ``--enable-prefix-caching`` (``--no-enable-prefix-caching`` undoes it):
  ``ScheduleConfig.enablePrefixCache`` and the ``prefix_cache`` plugin in ``ModelConfig[0]``;
- ``--max-model-len N`` (GPUStack: ``--max-seq-len``): ``maxSeqLen``, and the default of
  ``maxInputTokenLen``, ``maxIterTimes`` and ``maxPrefillTokens``; 8192 when not given;
- ``-tp N`` / ``--tensor-parallel-size N``: ``worldSize`` N on ``npuDeviceIds`` [[0..N-1]];
- ``--max-num-seqs N`` (GPUStack: ``--max-batch-size``): ``ScheduleConfig.maxBatchSize``;
- ``--max-num-batched-tokens N`` (GPUStack: ``--max-prefill-tokens``): ``maxPrefillTokens``;
- ``--served-model-name NAME``: ``modelName`` (default: the last part of the model's path or
  hub id, since MindIE accepts only plain names: letters, digits, ``_``, ``.`` and ``-``, at
  most 256, starting and ending with a letter or digit);
- ``--trust-remote-code``: ``trustRemoteCode``;
- ``--npu-memory-fraction F`` / ``--gpu-memory-utilization F``: env ``NPU_MEMORY_FRACTION``;
- ``--management-port N``: ``managementPort`` (see below).

Any other argument is a ``ConfigError``: the daemon could not take it.

Ports (MindIE accepts 1024-65535 only): the business (OpenAI) port is the plugin's
``LaunchRequest.port``. Readiness is read on
the separate management plane (``/v2/health/ready``), which needs a second port: the spec takes
it from ``--management-port`` or else asks the OS for a free one when it plans the launch (bind
to port 0, read the port, close). The metrics listener shares the management port, as GPUStack
lets all planes share one port. Both planes listen on the plugin's host: MindIE does not answer
on loopback when bound to another address. ``MIES_SERVICE_MONITOR_MODE=1`` turns the metrics
on (MindIE serves none without it).

``ServerConfig`` carries the two keys MindIE cannot start without, with GPUStack's values:
``inferMode`` (compulsory) and ``distDPServerEnabled`` (read unchecked, so a missing key fails
the whole JSON read).

After a requested stop the daemon SIGTERMs and SIGKILLs its own process group and then calls
``abort()``, so -6/134 is a normal end (and the plugin must run it in a process group of its
own). It calls ``setpgrp()`` first and exits with 255 if that fails, so it must not be started as
a session leader (``server.py`` starts engines in a new process group, not a new session).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_llmperf.engines.base import (
    COMMON_NORMAL_STOP_CODES,
    EngineSpec,
    LaunchPlan,
    LaunchRequest,
    RequestQuirks,
    free_port,
)
from pytest_llmperf.errors import ConfigError

DEFAULT_EXECUTABLE = "mindieservice_daemon"
CONFIG_FILE_NAME = "mindie-config.json"
CONFIG_PATH_ENV = "MIES_CONFIG_JSON_PATH"
MANAGEMENT_HEALTH_PATH = "/v2/health/ready"
# GPUStack caps the context at 8192 unless it is asked for more; a larger default would make
# MindIE reserve KV memory for contexts no profile needs.
DEFAULT_MAX_SEQ_LEN = 8192
# MindIE's own defaults for the schedule (maxBatchSize 200, maxPrefillBatchSize 50).
DEFAULT_MAX_BATCH_SIZE = 200
DEFAULT_MAX_PREFILL_BATCH_SIZE = 50
# At or below this batch size GPUStack turns MindIE's asynchronous scheduling off.
ASYNC_SCHEDULING_MIN_BATCH = 50
# MindIE's own check of modelName.
MODEL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9_.-]{0,254}[a-zA-Z0-9])?$")
PORT_RANGE = range(1024, 65536)


@dataclass
class MindIESettings:
    """The engine arguments after translation; ``None`` means 'derive the default'."""

    prefix_caching: bool = False
    max_seq_len: int | None = None
    world_size: int = 1
    max_batch_size: int | None = None
    max_prefill_tokens: int | None = None
    served_model_name: str | None = None
    trust_remote_code: bool = False
    npu_memory_fraction: str | None = None
    management_port: int | None = None


def _positive_int(flag: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"MindIE engine argument {flag} needs a positive integer, got {value!r}")
    return number


def _fraction(flag: str, value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0.0 < number <= 1.0:
        raise ConfigError(
            f"MindIE engine argument {flag} needs a fraction in (0, 1], got {value!r}"
        )
    return value


Setter = Callable[[MindIESettings, str, str], None]


def _set_max_seq_len(s: MindIESettings, flag: str, value: str) -> None:
    s.max_seq_len = _positive_int(flag, value)


def _set_world_size(s: MindIESettings, flag: str, value: str) -> None:
    s.world_size = _positive_int(flag, value)


def _set_max_batch_size(s: MindIESettings, flag: str, value: str) -> None:
    s.max_batch_size = _positive_int(flag, value)


def _set_max_prefill_tokens(s: MindIESettings, flag: str, value: str) -> None:
    s.max_prefill_tokens = _positive_int(flag, value)


def _set_served_name(s: MindIESettings, flag: str, value: str) -> None:
    del flag
    s.served_model_name = value


def _set_memory_fraction(s: MindIESettings, flag: str, value: str) -> None:
    s.npu_memory_fraction = _fraction(flag, value)


def _set_management_port(s: MindIESettings, flag: str, value: str) -> None:
    s.management_port = _check_port(flag, _positive_int(flag, value))


def _check_port(what: str, port: int) -> int:
    if port not in PORT_RANGE:
        raise ConfigError(
            f"MindIE {what} {port}: MindIE accepts ports {PORT_RANGE.start}-{PORT_RANGE.stop - 1} "
            f"only; choose one in that range"
        )
    return port


def model_name(model: str, served_model_name: str | None) -> str:
    """``modelName`` for the config: the served name, else the model's last path part."""
    name = served_model_name or model.rstrip("/").rsplit("/", 1)[-1]
    if not MODEL_NAME_PATTERN.match(name):
        given = "--served-model-name" if served_model_name else f"the model {model!r}"
        raise ConfigError(
            f"MindIE model name {name!r} (from {given}) is not one MindIE accepts: use letters, "
            f"digits, '_', '.' and '-', at most 256, starting and ending with a letter or digit; "
            f"name it with the engine argument --served-model-name"
        )
    return name


_VALUE_FLAGS: dict[str, Setter] = {
    "--max-model-len": _set_max_seq_len,
    "--max-seq-len": _set_max_seq_len,
    "-tp": _set_world_size,
    "--tensor-parallel-size": _set_world_size,
    "--max-num-seqs": _set_max_batch_size,
    "--max-batch-size": _set_max_batch_size,
    "--max-num-batched-tokens": _set_max_prefill_tokens,
    "--max-prefill-tokens": _set_max_prefill_tokens,
    "--served-model-name": _set_served_name,
    "--gpu-memory-utilization": _set_memory_fraction,
    "--npu-memory-fraction": _set_memory_fraction,
    "--management-port": _set_management_port,
}
_SWITCHES: dict[str, tuple[str, bool]] = {
    "--enable-prefix-caching": ("prefix_caching", True),
    "--no-enable-prefix-caching": ("prefix_caching", False),
    "--trust-remote-code": ("trust_remote_code", True),
}


def parse_engine_args(args: tuple[str, ...]) -> MindIESettings:
    """Read the vLLM-like arguments; ``ConfigError`` names what is not understood."""
    settings = MindIESettings()
    position = 0
    while position < len(args):
        arg = args[position]
        flag, has_inline, inline = arg.partition("=")
        if flag in _SWITCHES and not has_inline:
            field, value = _SWITCHES[flag]
            setattr(settings, field, value)
        elif flag in _VALUE_FLAGS:
            if not has_inline:
                position += 1
                if position == len(args):
                    raise ConfigError(f"MindIE engine argument {flag} needs a value")
                inline = args[position]
            _VALUE_FLAGS[flag](settings, flag, inline)
        else:
            known = ", ".join(sorted({*_VALUE_FLAGS, *_SWITCHES}))
            raise ConfigError(
                f"MindIE engine argument {arg!r} is not understood: mindieservice_daemon takes "
                f"no arguments, so the plugin translates these into its config.json: {known}"
            )
        position += 1
    return settings


def build_config(
    model: str, host: str, port: int, management_port: int, settings: MindIESettings
) -> dict[str, Any]:
    """MindIE's config.json for one model on one node, with plain HTTP for load tests."""
    max_seq_len = settings.max_seq_len or DEFAULT_MAX_SEQ_LEN
    max_prefill_tokens = settings.max_prefill_tokens or max_seq_len
    max_batch_size = settings.max_batch_size or DEFAULT_MAX_BATCH_SIZE
    model_config: dict[str, Any] = {
        "modelInstanceType": "Standard",
        "modelName": model_name(model, settings.served_model_name),
        "modelWeightPath": model,
        "worldSize": settings.world_size,
        "cpuMemSize": 0,
        "npuMemSize": -1,  # -1: MindIE sizes the KV cache itself
        "backendType": "atb",
        "trustRemoteCode": settings.trust_remote_code,
    }
    schedule_config: dict[str, Any] = {
        "templateType": "Standard",
        "templateName": "Standard_LLM",
        "cacheBlockSize": 128,
        "maxPrefillBatchSize": min(DEFAULT_MAX_PREFILL_BATCH_SIZE, max_batch_size),
        "maxPrefillTokens": max_prefill_tokens,
        "prefillTimeMsPerReq": 150,
        "prefillPolicyType": 0,
        "decodeTimeMsPerReq": 50,
        "decodePolicyType": 0,
        "maxBatchSize": max_batch_size,
        "maxIterTimes": max_seq_len,
        "maxPreemptCount": 0,
        "supportSelectBatch": False,
        "maxQueueDelayMicroseconds": 5000,
        "enablePrefixCache": settings.prefix_caching,
    }
    if settings.prefix_caching:
        # MindIE reads plugin_params as a JSON string, not as a nested object.
        model_config["plugin_params"] = json.dumps({"plugin_type": "prefix_cache"})
    return {
        "Version": "1.0.0",
        "ServerConfig": {
            "ipAddress": host,
            "managementIpAddress": host,
            "port": port,
            "managementPort": management_port,
            "metricsPort": management_port,
            "allowAllZeroIpListening": host in ("0.0.0.0", "::"),
            "maxLinkNum": 1000,
            # Plain HTTP: the load generator does not carry MindIE's certificates.
            "httpsEnabled": False,
            "interCommTLSEnabled": False,
            "openAiSupport": "vllm",
            "tokenTimeout": 600,
            "e2eTimeout": 600,
            # inferMode is compulsory and distDPServerEnabled is read unchecked: MindIE does not
            # start if either is missing (the values are GPUStack's).
            "inferMode": "standard",
            "distDPServerEnabled": False,
        },
        "BackendConfig": {
            "backendName": "mindieservice_llm_engine",
            "modelInstanceNumber": 1,
            "npuDeviceIds": [list(range(settings.world_size))],
            "tokenizerProcessNumber": 8,
            "multiNodesInferEnabled": False,
            "interNodeTLSEnabled": False,
            "ModelDeployConfig": {
                "maxSeqLen": max_seq_len,
                "maxInputTokenLen": min(max_seq_len, max_prefill_tokens),
                "truncation": False,
                "ModelConfig": [model_config],
            },
            "ScheduleConfig": schedule_config,
        },
    }


class MindIEEngine(EngineSpec):
    name = "mindie"
    display_name = "MindIE"
    health_path = MANAGEMENT_HEALTH_PATH
    ready_log_line = "Daemon start success!"
    normal_stop_codes: ClassVar[frozenset[int]] = COMMON_NORMAL_STOP_CODES | {
        -int(signal.SIGABRT),
        128 + int(signal.SIGABRT),
    }
    no_cache_reset: ClassVar[str] = "MindIE has no reset route"
    # Only max_tokens; ignore_eos works, min_tokens does not exist.
    quirks: ClassVar[RequestQuirks] = RequestQuirks(
        chat_max_tokens_field="max_tokens", supports_ignore_eos=True, supports_min_tokens=False
    )

    def plan(self, request: LaunchRequest) -> LaunchPlan:
        if request.config_dir is None:
            raise ConfigError(
                "MindIE needs a directory for its generated config.json (LaunchRequest.config_dir)"
            )
        settings = parse_engine_args(request.engine_args)
        management_port = settings.management_port
        if management_port is None:
            management_port = free_port(request.host)
            while management_port == request.port:  # the business port may still be unbound
                management_port = free_port(request.host)
        elif management_port == request.port:
            raise ConfigError(
                f"MindIE's management port {management_port} must differ from the serving port"
            )
        _check_port("serving port", request.port)
        config = build_config(request.model, request.host, request.port, management_port, settings)
        config_path = Path(request.config_dir) / CONFIG_FILE_NAME
        env = {
            CONFIG_PATH_ENV: str(config_path),
            # MindIE logs to files by default; the plugin shows the log tail on a failure.
            "MINDIE_LOG_TO_STDOUT": "1",
            "MIES_SERVICE_MONITOR_MODE": "1",  # metrics on the management port
        }
        if settings.npu_memory_fraction is not None:
            env["NPU_MEMORY_FRACTION"] = settings.npu_memory_fraction
        if config["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] <= ASYNC_SCHEDULING_MIN_BATCH:
            env["MINDIE_ASYNC_SCHEDULING_ENABLE"] = "0"
        base, _ = self.urls(request.host, request.port, self.health_path)
        _, health = self.urls(request.host, management_port, self.health_path)
        return LaunchPlan(
            argv=(request.executable or DEFAULT_EXECUTABLE,),
            base_url=base,
            health_url=health,
            env=env,
            files={config_path: json.dumps(config, indent=2) + "\n"},
        )
