"""The tiny model as GGUF: the same bytes every time, the same tokenizer and weights as the
safetensors model that vLLM serves (so prompts are token-exact on llama.cpp too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")
gguf = pytest.importorskip("gguf", reason="the `gguf` package (the llamacpp extra) is absent")

from pytest_llmperf.engines.tinymodel import ensure_tiny_model  # noqa: E402
from pytest_llmperf.engines.tinymodel.gguf_file import ensure_tiny_gguf, write_gguf  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_tiny_model(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def reader(model_dir: Path) -> Any:
    return gguf.GGUFReader(str(ensure_tiny_gguf(model_dir.parent)))


def _field(reader: Any, key: str) -> Any:
    field = reader.get_field(key)
    assert field is not None, f"{key} missing"
    return field.contents()


def test_written_twice_byte_identical(model_dir: Path, tmp_path: Path) -> None:
    write_gguf(model_dir, tmp_path / "a.gguf")
    write_gguf(model_dir, tmp_path / "b.gguf")
    assert (tmp_path / "a.gguf").read_bytes() == (tmp_path / "b.gguf").read_bytes()


def test_cached_next_to_the_safetensors_model(model_dir: Path) -> None:
    path = ensure_tiny_gguf(model_dir.parent)
    assert path.parent == model_dir.parent
    assert path.name.startswith(model_dir.name)
    assert ensure_tiny_gguf(model_dir.parent) == path  # the second call reuses it
    assert not list(model_dir.parent.glob(".tiny-*.gguf"))  # no scratch file left behind


def test_same_tokenizer(model_dir: Path, reader: Any) -> None:
    data = json.loads((model_dir / "tokenizer.json").read_text())
    tokens = _field(reader, "tokenizer.ggml.tokens")
    for token, index in data["model"]["vocab"].items():
        assert tokens[index] == token
    for added in data["added_tokens"]:
        assert tokens[added["id"]] == added["content"]
    merges = _field(reader, "tokenizer.ggml.merges")
    assert merges == [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    # Named, not hashed: llama.cpp's own converter refuses an unknown pre-tokenizer.
    assert _field(reader, "tokenizer.ggml.pre") == "gpt-2"
    assert _field(reader, "tokenizer.ggml.add_bos_token") is False
    assert tokens[_field(reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"


def test_same_weights(model_dir: Path, reader: Any) -> None:
    from safetensors.numpy import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    stored = {tensor.name: tensor for tensor in reader.tensors}
    assert len(stored) == len(weights)
    embed = stored["token_embd.weight"]
    # GGUF lists dimensions innermost first; the data is the same row-major array.
    expected = weights["model.embed_tokens.weight"]
    assert list(embed.shape) == list(reversed(expected.shape))
    assert np.array_equal(np.asarray(embed.data).reshape(expected.shape), expected)
    q_proj = weights["model.layers.1.self_attn.q_proj.weight"]
    assert np.array_equal(
        np.asarray(stored["blk.1.attn_q.weight"].data).reshape(q_proj.shape), q_proj
    )


def test_hyperparameters_match_config(model_dir: Path, reader: Any) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    assert _field(reader, "general.architecture") == "qwen3"
    assert _field(reader, "qwen3.context_length") == config["max_position_embeddings"]
    assert _field(reader, "qwen3.attention.head_count_kv") == config["num_key_value_heads"]
    assert _field(reader, "qwen3.attention.key_length") == config["head_dim"]
