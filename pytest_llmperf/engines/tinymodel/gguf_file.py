"""The embedded tiny model as one GGUF file, for llama.cpp's ``llama-server``.

Written from the generated safetensors folder itself (its tokenizer.json, config.json and
weights), so both engines serve the same model and a prompt is the same tokens on both. The
``gguf`` package (llama.cpp's own writer; the ``llamacpp`` extra) writes it directly: llama.cpp's
HF converter recognises a tokenizer's pre-tokenizer only by hashing known tokenizers' outputs
and refuses ours, so the pre-tokenizer is named here instead. Ours is the byte-level GPT-2 split
(``ByteLevel(use_regex=True)``), which llama.cpp calls ``gpt-2``.

Weights stay float32 like the safetensors file; no timestamp or library version goes into the
metadata, so the same bytes come out on every run.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pytest_llmperf.engines.tinymodel import MODEL_NAME, ensure_tiny_model

# Bump when the file's layout or metadata changes: it names the cached file.
LAYOUT_VERSION = 1
PRE_TOKENIZER = "gpt-2"
# llama.cpp's token types (gguf.TokenType): the chat markers are control tokens, never text.
TOKEN_NORMAL = 1
TOKEN_CONTROL = 3


def _missing_gguf() -> ImportError:
    return ImportError(
        "writing the tiny model as GGUF needs the `gguf` package: install the plugin's "
        "`llamacpp` extra (pip install 'pytest-llmperf[llamacpp]')"
    )


def gguf_path(model_dir: Path) -> Path:
    """Where the GGUF of the safetensors model in ``model_dir`` is cached: next to it."""
    return model_dir.with_name(f"{model_dir.name}-v{LAYOUT_VERSION}.gguf")


def _tokenizer_tables(model_dir: Path) -> tuple[list[str], list[int], list[str]]:
    """Tokens by id, their types, and the merges as ``"a b"`` strings, from tokenizer.json."""
    data = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    by_id: dict[int, str] = {index: token for token, index in data["model"]["vocab"].items()}
    control: set[int] = set()
    for added in data["added_tokens"]:
        by_id[added["id"]] = added["content"]
        if added["special"]:
            control.add(added["id"])
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError(f"{model_dir / 'tokenizer.json'}: token ids are not 0..n-1")
    tokens = [by_id[index] for index in range(len(by_id))]
    types = [TOKEN_CONTROL if index in control else TOKEN_NORMAL for index in range(len(tokens))]
    # tokenizers writes merges as pairs since 0.20, as "a b" strings before.
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, types, merges


def _add_hyperparameters(writer: Any, config: dict[str, Any]) -> None:
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_key_length(config["head_dim"])
    writer.add_value_length(config["head_dim"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])


def _add_tokenizer(writer: Any, model_dir: Path, config: dict[str, Any]) -> None:
    tokens, types, merges = _tokenizer_tables(model_dir)
    tokenizer_config = json.loads((model_dir / "tokenizer_config.json").read_text("utf-8"))
    ids = {token: index for index, token in enumerate(tokens)}
    writer.add_tokenizer_model("gpt2")  # llama.cpp's name for byte-level BPE
    writer.add_tokenizer_pre(PRE_TOKENIZER)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(ids[tokenizer_config["eos_token"]])
    writer.add_pad_token_id(ids[tokenizer_config["pad_token"]])
    # llama.cpp adds a BOS to every prompt unless told not to; vLLM (add_bos_token false) adds
    # none, and one extra token would break token-exact prompts.
    writer.add_add_bos_token(bool(tokenizer_config.get("add_bos_token", False)))
    writer.add_chat_template(tokenizer_config["chat_template"])


def _add_tensors(writer: Any, model_dir: Path, blocks: int) -> None:
    import gguf
    from safetensors.numpy import load_file

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, blocks)
    weights = load_file(str(model_dir / "model.safetensors"))
    for hf_name in sorted(weights):  # sorted: the file's order must not depend on the reader
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"no GGUF name for tensor {hf_name} of a Qwen3 model")
        # Same (out, in) layout as the HF tensors: llama.cpp's Qwen3 takes them unpermuted.
        writer.add_tensor(name, weights[hf_name])
    # No output.weight: the embeddings are tied, and llama.cpp falls back to token_embd.


def write_gguf(model_dir: Path, out: Path) -> None:
    """Write the model in ``model_dir`` (the safetensors folder) as GGUF to ``out``."""
    try:
        import gguf
    except ImportError as exc:
        raise _missing_gguf() from exc

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3])
    writer.add_name(MODEL_NAME)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    _add_hyperparameters(writer, config)
    _add_tokenizer(writer, model_dir, config)
    _add_tensors(writer, model_dir, config["num_hidden_layers"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def ensure_tiny_gguf(cache_dir: Path | None = None) -> Path:
    """The GGUF file of the tiny model, written once next to the safetensors folder.

    Like ``ensure_tiny_model``: under a file lock, into a temporary file, moved into place
    with one rename, so a concurrent reader never sees half a file.
    """
    from filelock import FileLock

    model_dir = ensure_tiny_model(cache_dir)
    target = gguf_path(model_dir)
    if target.exists():
        return target
    with FileLock(str(target.with_name(f".{target.name}.lock"))):
        if target.exists():
            return target
        handle, scratch = tempfile.mkstemp(prefix=".tiny-", suffix=".gguf", dir=target.parent)
        os.close(handle)
        try:
            write_gguf(model_dir, Path(scratch))
            os.chmod(scratch, 0o644)  # mkstemp makes it private; the model is for every user
            os.replace(scratch, target)
        finally:
            if os.path.exists(scratch):
                os.unlink(scratch)
    return target
