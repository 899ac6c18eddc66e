"""The embedded default model: a tiny Qwen3-shaped model made here, offline, deterministically.

No hub download is possible on CI machines, so the model is generated: a byte-level BPE
tokenizer trained on ``corpus.txt`` (shipped with the package), a Qwen-style chat template, and
weights drawn from a fixed seed. The same files come out byte for byte on every machine, so a
content hash names the cache folder and baselines recorded on one machine apply to another.

Shape: hidden 128, 2 layers, 2 attention heads, 1 KV head, head_dim 64 (vLLM's CPU attention
backend rejects head_dim 16), 40,960 positions so the 32,000-token profile fits.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

GENERATOR_VERSION = 2
MODEL_NAME = "tiny-qwen3"
SEED = 20251129
VOCAB_SIZE = 2048
MAX_POSITIONS = 40960
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

SHAPE: dict[str, int] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 64,
}

# Qwen's chat format. No whitespace control ({%- ... -%}) here: it would eat the newline after
# the role name, letting the role merge with the first prompt token during tokenization.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
# sha256 of each file exactly as generate() writes it (the recipe above, GENERATOR_VERSION 2).
# The cache may be shared (a CI cache restored on every job): a folder whose files differ was
# not made by this recipe, is never served, and is replaced. Change these with the recipe.
FILE_DIGESTS: dict[str, str] = {
    "config.json": "c884f4d28545bfa349e8fe08a042c770bb0a30c2b0469f0329d128bf0882450d",
    "generation_config.json": "5b326179b109aca701ee58452c03433d8374372c078ec4de9b0d54b0ecdbd31b",
    "model.safetensors": "89a3c3f69c47498a0c6bf4b5373964494629d573084a48ad9536ee4dbc3a8c74",
    "tokenizer.json": "14ce9b5c8b12bc855b7e9473128679786580225284e3873ec4ec77fffab0b6ab",
    "tokenizer_config.json": "a553a9b74d1985d8e9533e5c8c7f226d91c3715e833f44b05f199d358682c8e7",
    "special_tokens_map.json": "903b2e6d39d7eebaf193b2051bcbd9fec59c43880be0bcf620dffb623d63ff45",
}


def corpus_text() -> str:
    return resources.files(__package__).joinpath("corpus.txt").read_text(encoding="utf-8")


def _recipe_digest() -> str:
    """Names the cache folder: changes whenever anything that shapes the files changes."""
    recipe = json.dumps(
        {
            "v": GENERATOR_VERSION,
            "seed": SEED,
            "vocab": VOCAB_SIZE,
            "shape": SHAPE,
            "positions": MAX_POSITIONS,
            "template": CHAT_TEMPLATE,
            "corpus": hashlib.sha256(corpus_text().encode()).hexdigest(),
        },
        sort_keys=True,
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def default_cache_dir() -> Path:
    root = os.environ.get("LLMPERF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pytest-llmperf"
    )
    return Path(root)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _train_tokenizer(out_dir: Path) -> int:
    # One thread: the trainer's result must not depend on how work is split across cores.
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_text().splitlines(), trainer=trainer)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    size: int = tokenizer.get_vocab_size()
    _write_json(
        out_dir / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "add_bos_token": False,
            "model_max_length": MAX_POSITIONS,
            "chat_template": CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            # Named so that every special token is excluded from random prompts.
            "additional_special_tokens": ["<|im_start|>"],
            "extra_special_tokens": ["<|im_start|>"],
        },
    )
    _write_json(
        out_dir / "special_tokens_map.json",
        {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    )
    return size


def _weights(vocab: int, shape: dict[str, int]) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(SEED)
    hidden, inter = shape["hidden_size"], shape["intermediate_size"]
    head_dim = shape["head_dim"]
    q_out = shape["num_attention_heads"] * head_dim
    kv_out = shape["num_key_value_heads"] * head_dim

    def normal(*dims: int) -> Any:
        return (rng.standard_normal(dims) * 0.02).astype(np.float32)

    def ones(size: int) -> Any:
        return np.ones(size, dtype=np.float32)

    tensors: dict[str, Any] = {"model.embed_tokens.weight": normal(vocab, hidden)}
    for layer in range(shape["num_hidden_layers"]):
        prefix = f"model.layers.{layer}"
        tensors.update(
            {
                f"{prefix}.input_layernorm.weight": ones(hidden),
                f"{prefix}.post_attention_layernorm.weight": ones(hidden),
                f"{prefix}.self_attn.q_proj.weight": normal(q_out, hidden),
                f"{prefix}.self_attn.k_proj.weight": normal(kv_out, hidden),
                f"{prefix}.self_attn.v_proj.weight": normal(kv_out, hidden),
                f"{prefix}.self_attn.o_proj.weight": normal(hidden, q_out),
                f"{prefix}.self_attn.q_norm.weight": ones(head_dim),
                f"{prefix}.self_attn.k_norm.weight": ones(head_dim),
                f"{prefix}.mlp.gate_proj.weight": normal(inter, hidden),
                f"{prefix}.mlp.up_proj.weight": normal(inter, hidden),
                f"{prefix}.mlp.down_proj.weight": normal(hidden, inter),
            }
        )
    tensors["model.norm.weight"] = ones(hidden)
    return tensors


def generate(out_dir: Path, shape: dict[str, int] | None = None) -> None:
    """Write every model file into ``out_dir`` (which must exist). Needs numpy, tokenizers,
    safetensors: all three come with the ``engine`` extra.

    ``shape`` overrides keys of SHAPE for a model of another size with the same tokenizer
    (benchmarks compare how steady runs are on a larger model); such a model is never the
    embedded one, whose files the digests above fix."""
    from safetensors.numpy import save_file

    shape = {**SHAPE, **(shape or {})}

    vocab = _train_tokenizer(out_dir)
    special_ids = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    _write_json(
        out_dir / "config.json",
        {
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": vocab,
            **shape,
            "hidden_act": "silu",
            "max_position_embeddings": MAX_POSITIONS,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "tie_word_embeddings": True,
            "torch_dtype": "float32",
            "use_cache": True,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": shape["num_hidden_layers"],
            "bos_token_id": special_ids["<|endoftext|>"],
            "eos_token_id": special_ids["<|im_end|>"],
        },
    )
    _write_json(
        out_dir / "generation_config.json",
        {"eos_token_id": special_ids["<|im_end|>"], "pad_token_id": special_ids["<|endoftext|>"]},
    )
    # Fixed metadata, so no timestamp or library version ends up in the bytes.
    save_file(_weights(vocab, shape), str(out_dir / "model.safetensors"), metadata={"format": "pt"})


def files_digest(model_dir: Path) -> str:
    """One hash over every model file: the model's identity in baselines."""
    digest = hashlib.sha256()
    for name in MODEL_FILES:
        digest.update(name.encode())
        digest.update((model_dir / name).read_bytes())
    return digest.hexdigest()


def mismatched_files(model_dir: Path) -> list[str]:
    """The model files of ``model_dir`` that are missing or differ from the recipe's."""
    bad = []
    for name, expected in FILE_DIGESTS.items():
        path = model_dir / name
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        except OSError:
            digest = ""
        if digest != expected:
            bad.append(name)
    return bad


def ensure_tiny_model(cache_dir: Path | None = None) -> Path:
    """Return the folder of the tiny model, generating it once per recipe.

    A cached folder is used only when every file has the recipe's digest; otherwise (damaged,
    or planted in a shared cache) it is replaced. Safe when several processes ask at once:
    generation happens in a private temporary folder under a file lock and is moved into
    place with one rename.
    """
    from filelock import FileLock

    root = cache_dir or default_cache_dir()
    target = root / f"{MODEL_NAME}-{_recipe_digest()}"
    if not target.is_symlink() and not mismatched_files(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{target.name}.lock")):
        if not target.is_symlink() and not mismatched_files(target):
            return target
        scratch = Path(tempfile.mkdtemp(prefix=".tiny-", dir=root))
        try:
            generate(scratch)
            _check_generated(scratch)
            scratch.chmod(0o755)  # mkdtemp makes it private; the model is for every user
            _remove(target)
            os.replace(scratch, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return target


def _check_generated(folder: Path) -> None:
    bad = mismatched_files(folder)
    if bad:
        from pytest_llmperf.errors import ConfigError

        raise ConfigError(
            f"the embedded tiny model generated here differs from its recipe in "
            f"{', '.join(bad)} (a tokenizers, numpy or safetensors release that writes other "
            f"bytes?); its baselines would not apply. Install the versions of the 'engine' "
            f"extra, or name a model with --model"
        )


def _remove(target: Path) -> None:
    """Take a cached folder that failed its digests out of the way (renamed first, so no
    reader sees it half deleted)."""
    if target.is_symlink():
        target.unlink()
    elif target.exists():
        stale = target.with_name(f".stale-{target.name}-{os.getpid()}")
        os.replace(target, stale)
        shutil.rmtree(stale, ignore_errors=True)
