"""The embedded tiny model on each engine that can serve it here: vLLM's CPU build and
llama.cpp's ``llama-server``.

Both serve the same model under the same name: vLLM from the generated safetensors folder,
llama-server from the GGUF file written from that folder. The folder stays the model the
plugin records (its tokenizer makes the token-exact prompts for either engine).
"""

from __future__ import annotations

EMBEDDED_SERVED_NAME = "tiny-qwen3"
MAX_MODEL_LEN = 40960  # the tiny model's positions: the 32,000-token profile must fit
EMBEDDED_ENGINES = ("vllm", "llamacpp")
LLAMACPP_SLOTS = 4

_ENGINE_ARGS: dict[str, tuple[str, ...]] = {
    "vllm": ("--served-model-name", EMBEDDED_SERVED_NAME, "--max-model-len", str(MAX_MODEL_LEN)),
    # --alias: the name /v1/models lists (the file name otherwise). --parallel with
    # --ctx-size: four slots (its automatic count) of the model's whole context each. The
    # automatic setting shares one context-sized pool between them, and a request that finds
    # the pool full fails ("Context size has been exceeded") instead of waiting: four 32k
    # prompts at once did. --metrics: llama-server offers Prometheus metrics only when asked.
    "llamacpp": (
        "--alias",
        EMBEDDED_SERVED_NAME,
        "--parallel",
        str(LLAMACPP_SLOTS),
        "--ctx-size",
        str(LLAMACPP_SLOTS * MAX_MODEL_LEN),
        "--metrics",
    ),
}


def embedded_engine_args(engine: str) -> tuple[str, ...]:
    """The arguments that make ``engine`` serve the tiny model as the plugin expects."""
    return _ENGINE_ARGS.get(engine, ())


def embedded_launch_model(engine: str, model_dir: str) -> str:
    """What ``engine`` is started with: the folder, or for llama.cpp its GGUF file."""
    if engine != "llamacpp":
        return model_dir
    from pathlib import Path

    from pytest_llmperf.engines.tinymodel.gguf_file import ensure_tiny_gguf

    return str(ensure_tiny_gguf(Path(model_dir).parent))


def default_executable(engine: str) -> str | None:
    """The executable when ``--engine-bin`` names none; None: the engine spec's default."""
    if engine != "llamacpp":
        return None
    from pytest_llmperf.engines.llamacpp_build import default_llama_server

    return default_llama_server()
