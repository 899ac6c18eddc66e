"""Tokenizer access: the light ``tokenizers`` path counts exactly as transformers does."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from pytest_llmperf.engines.tinymodel import corpus_text
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.tokenizer import Tokenizer, load_tokenizer

pytest.importorskip("tokenizers")

SAMPLES = [
    "",
    "hello world",
    "Hello, how are you today?\n\nFine.",
    "a <|im_start|> inside <|im_end|> text<|endoftext|>",
    "日本語のプロンプト 🙂 and ümlauts",
    "   leading spaces and trailing   ",
    *corpus_text().splitlines()[:10],
]


def both(folder: Path) -> tuple[Tokenizer, Tokenizer]:
    pytest.importorskip("transformers")
    return (
        load_tokenizer(str(folder), backend="tokenizers"),
        load_tokenizer(str(folder), backend="transformers"),
    )


def assert_agree(fast: Tokenizer, hf: Tokenizer) -> None:
    assert fast.vocab_size == hf.vocab_size
    assert sorted(fast.all_special_ids) == sorted(hf.all_special_ids)
    assert fast.num_special_tokens_to_add() == hf.num_special_tokens_to_add()
    for text in SAMPLES:
        for special in (False, True):
            assert fast.encode(text, add_special_tokens=special) == hf.encode(
                text, add_special_tokens=special
            ), (text, special)
    for start in range(0, fast.vocab_size, 97):
        ids = list(range(start, min(start + 120, fast.vocab_size)))
        assert fast.decode(ids) == hf.decode(ids), start


def test_auto_prefers_tokenizers_for_a_folder(tiny_model_dir: Path) -> None:
    tok = load_tokenizer(str(tiny_model_dir))
    assert "(tokenizers)" in repr(tok)
    assert isinstance(tok, Tokenizer)


def test_tiny_model_backends_agree(tiny_model_dir: Path) -> None:
    fast, hf = both(tiny_model_dir)
    assert_agree(fast, hf)
    # The facts the random dataset relies on for the embedded model.
    assert fast.num_special_tokens_to_add() == 0
    assert fast.vocab_size > 1000
    assert set(fast.all_special_ids) <= {0, 1, 2}


def copy_with_config(src: Path, dst: Path, **changes: object) -> Path:
    shutil.copytree(src, dst)
    config_path = dst / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.update(changes)
    config_path.write_text(json.dumps(config))
    return dst


def test_special_tokens_named_in_the_config(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = copy_with_config(
        tiny_model_dir,
        tmp_path / "named",
        bos_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        # Dropped by transformers when tokenizer.json exists: the post-processor decides.
        add_bos_token=True,
    )
    fast, hf = both(folder)
    assert_agree(fast, hf)
    assert sorted(fast.all_special_ids) == [0, 1, 2]
    assert fast.num_special_tokens_to_add() == 0


def test_bos_from_the_post_processor(tiny_model_dir: Path, tmp_path: Path) -> None:
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers import processors

    folder = copy_with_config(tiny_model_dir, tmp_path / "bos", bos_token="<|endoftext|>")
    raw = RawTokenizer.from_file(str(folder / "tokenizer.json"))
    raw.post_processor = processors.TemplateProcessing(
        single="<|endoftext|> $A",
        pair="<|endoftext|> $A <|endoftext|> $B",
        special_tokens=[("<|endoftext|>", 0)],
    )
    raw.save(str(folder / "tokenizer.json"))
    fast, hf = both(folder)
    assert_agree(fast, hf)
    assert fast.num_special_tokens_to_add() == 1
    assert fast.encode("hello", add_special_tokens=True)[0] == 0
    assert fast.encode("hello")[0] != 0


def test_model_specific_class_goes_to_transformers(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    folder = copy_with_config(tiny_model_dir, tmp_path / "qwen", tokenizer_class="Qwen2Tokenizer")
    assert "(transformers)" in repr(load_tokenizer(str(folder)))


def test_transformers_backend_on_request(tiny_model_dir: Path) -> None:
    pytest.importorskip("transformers")
    tok = load_tokenizer(str(tiny_model_dir), backend="transformers")
    assert "(transformers)" in repr(tok)


def test_folder_without_tokenizer_json(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no-json"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ConfigError) as info:
        load_tokenizer(str(folder))
    message = str(info.value)
    assert "the folder has no tokenizer.json" in message
    assert str(folder) in message


def test_unknown_model_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_tokenizer(str(tmp_path / "no-such-model"))
    message = str(info.value)
    assert "no-such-model" in message
    assert "pytest-llmperf[tokenizer]" in message
    assert "--llmperf-tokenizer" in message


def test_no_tokenizer_library_installed(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A None entry in sys.modules makes the import fail, as on a machine without them.
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(ConfigError) as info:
        load_tokenizer(str(tiny_model_dir))
    message = str(info.value)
    assert str(tiny_model_dir) in message
    assert "tokenizers library is not installed" in message
    assert "transformers is not installed" in message
    assert "pytest-llmperf[tokenizer]" in message


def test_unknown_backend() -> None:
    with pytest.raises(ConfigError, match="valid ones are auto, tokenizers, transformers"):
        load_tokenizer("x", backend="sentencepiece")
