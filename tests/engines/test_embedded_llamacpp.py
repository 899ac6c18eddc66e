"""`--engine=llamacpp` without --model: llama-server serves the embedded tiny model as GGUF,
under the same name as on vLLM, while the safetensors folder stays the model the plugin
tokenizes with and records."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.engines import llamacpp_build
from pytest_llmperf.engines.session import plan_launch
from pytest_llmperf.errors import ConfigError

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")


def test_plans_llama_server_with_the_gguf(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    settings = Settings(engines=("llamacpp",), engine_bin="/opt/llama/llama-server")
    _, plan, model = plan_launch(settings, "llamacpp", tmp_path)
    argv = plan.argv
    assert argv[0] == "/opt/llama/llama-server"
    gguf_file = Path(argv[argv.index("-m") + 1])
    assert gguf_file.suffix == ".gguf"
    assert gguf_file.is_file()
    assert (Path(model) / "tokenizer.json").is_file()  # prompts are built with this
    assert gguf_file.parent == Path(model).parent  # cached side by side
    assert argv[argv.index("--alias") + 1] == "tiny-qwen3"
    # Four slots of the model's whole context each: a 32k prompt fits in every one.
    assert argv[argv.index("--parallel") + 1] == "4"
    assert argv[argv.index("--ctx-size") + 1] == str(4 * 40960)
    assert "--metrics" in argv


def test_engines_without_the_embedded_model_still_need_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--model is required with --engine=sglang"):
        plan_launch(Settings(engines=("sglang",)), "sglang", tmp_path)


def _fake_build(root: Path, cpu: str) -> Path:
    binary = llamacpp_build.build_dir(root) / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (binary.parent.parent / "build.json").write_text(json.dumps({"cpu": cpu}))
    return binary


def test_cached_build_is_used_only_on_the_cpu_it_was_built_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))  # no llama-server installed
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tmp_path))
    assert llamacpp_build.default_llama_server() == "llama-server"  # nothing built: the name
    binary = _fake_build(tmp_path, llamacpp_build.cpu_flags())
    assert llamacpp_build.default_llama_server() == str(binary)
    (binary.parent.parent / "build.json").write_text(json.dumps({"cpu": "another-cpu"}))
    # A native build for other CPU flags could die of an illegal instruction: not used.
    assert llamacpp_build.cached_llama_server() is None
