"""The embedded tiny model is made offline and is the same, byte for byte, every time."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")

# Runs in a fresh interpreter with every network call turned into an error, so that an
# attempted download cannot hide behind a cache.
GENERATE_TWICE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    attempts = []

    def refuse_network(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            attempts.append(event)
            raise OSError("network access attempted: " + event)

    sys.addaudithook(refuse_network)
    from pytest_llmperf.engines.tinymodel import MODEL_FILES, ensure_tiny_model, files_digest

    first = ensure_tiny_model(Path(sys.argv[1]))
    second = ensure_tiny_model(Path(sys.argv[2]))
    print(json.dumps({
        "attempts": attempts,
        "first": files_digest(first),
        "second": files_digest(second),
        "per_file": [
            [name, (first / name).read_bytes() == (second / name).read_bytes()]
            for name in MODEL_FILES
        ],
        "config": json.loads((first / "config.json").read_text()),
    }))
    """
)


def test_generated_twice_identical_and_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", GENERATE_TWICE, str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["attempts"] == []
    assert report["first"] == report["second"]
    assert all(same for _, same in report["per_file"]), report["per_file"]
    config = report["config"]
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert (config["hidden_size"], config["num_hidden_layers"], config["head_dim"]) == (128, 2, 64)
    assert config["max_position_embeddings"] >= 33000  # very-long: 32,000 in + 100 out


def test_cached_model_is_reused(tmp_path: Path) -> None:
    from pytest_llmperf.engines.tinymodel import ensure_tiny_model

    first = ensure_tiny_model(tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    again = ensure_tiny_model(tmp_path)
    assert again == first
    assert (again / "model.safetensors").stat().st_mtime_ns == stamp


def test_chat_template_and_tokenizer_ship_with_the_model(tmp_path: Path) -> None:
    from pytest_llmperf.engines.tinymodel import ensure_tiny_model

    folder = ensure_tiny_model(tmp_path)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in config["chat_template"]
    assert config["eos_token"] == "<|im_end|>"
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) > 1000


def test_a_poisoned_cache_is_never_served(tmp_path: Path) -> None:
    from pytest_llmperf.engines.tinymodel import (
        FILE_DIGESTS,
        MODEL_NAME,
        _recipe_digest,
        ensure_tiny_model,
        mismatched_files,
    )

    # A shared CI cache restored with a folder of the right name but other weights.
    planted = tmp_path / f"{MODEL_NAME}-{_recipe_digest()}"
    planted.mkdir()
    (planted / "model.safetensors").write_bytes(b"not the recipe's weights")
    (planted / "config.json").write_text("{}")

    folder = ensure_tiny_model(tmp_path)

    assert folder == planted
    assert mismatched_files(folder) == []
    assert sorted(FILE_DIGESTS) == sorted(p.name for p in folder.iterdir())
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".stale")] == []


def test_a_larger_shape_keeps_the_tokenizer_and_changes_only_the_model(tmp_path: Path) -> None:
    # pair_spread.py --shape: a larger model of the same recipe, for measuring whether runs get
    # steadier; the prompts must stay the same (same tokenizer) and the shape must be honoured.
    from safetensors import safe_open

    from pytest_llmperf.engines.tinymodel import (
        SHAPE,
        ensure_tiny_model,
        generate,
        mismatched_files,
    )

    embedded = ensure_tiny_model(tmp_path / "cache")
    larger = tmp_path / "larger"
    larger.mkdir()
    generate(larger, {"hidden_size": 256, "num_hidden_layers": 3})

    config = json.loads((larger / "config.json").read_text())
    assert config["hidden_size"] == 256
    assert config["num_hidden_layers"] == config["max_window_layers"] == 3
    assert config["intermediate_size"] == SHAPE["intermediate_size"]  # keys not named stay
    assert (larger / "tokenizer.json").read_bytes() == (embedded / "tokenizer.json").read_bytes()
    with safe_open(str(larger / "model.safetensors"), "np") as weights:
        assert weights.get_tensor("model.embed_tokens.weight").shape[1] == 256
        assert "model.layers.2.mlp.up_proj.weight" in weights.keys()
        assert "model.layers.3.mlp.up_proj.weight" not in weights.keys()
    assert mismatched_files(larger) == ["config.json", "model.safetensors"]  # never "embedded"
