"""Tokenizer access for token-exact prompts.

Two backends behind one small interface:

- the light ``tokenizers`` library reading ``tokenizer.json`` (plus ``tokenizer_config.json``
  and ``special_tokens_map.json`` for the named special tokens) from a local model folder;
  importing it costs milliseconds;
- ``transformers.AutoTokenizer`` with local files only, for hub ids already in the local cache,
  folders without ``tokenizer.json``, and model-specific tokenizer classes.

The first backend counts exactly as transformers' generic fast-tokenizer class does with the
same files (``vocab_size`` without added tokens, ``all_special_ids`` from the *named* special
tokens only, special tokens added on encode from the post-processor), because the engine server
and ``vllm bench serve`` tokenize through transformers, and a prompt is only token-exact if both
sides count the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_llmperf.errors import ConfigError

__all__ = ["Tokenizer", "load_tokenizer"]

# transformers' order of the named special-token attributes; extra ones follow.
_NAMED_SPECIAL = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
_EXTRA_SPECIAL = ("additional_special_tokens", "extra_special_tokens")

# Tokenizer classes that are tokenizer.json and nothing else. A model-specific class (Qwen2,
# Llama, ...) may rebuild parts of the pipeline in code, so for those transformers is asked
# first when it is installed: it is what the server tokenizes with.
_GENERIC_CLASSES = (None, "PreTrainedTokenizerFast", "TokenizersBackend")

_HOW_TO_FIX = (
    "install the tokenizer extra (pip install 'pytest-llmperf[tokenizer]'), or pass a local "
    "model folder that contains tokenizer.json (--llmperf-tokenizer DIR)"
)


@runtime_checkable
class Tokenizer(Protocol):
    """The few tokenizer operations the datasets need."""

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary, without added tokens (transformers' meaning)."""
        ...

    @property
    def all_special_ids(self) -> list[int]:
        """Ids of the named special tokens (BOS, EOS, PAD, ... and the extra ones)."""
        ...

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; special tokens (BOS, ...) only when asked for."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens kept."""
        ...

    def num_special_tokens_to_add(self) -> int:
        """How many tokens encoding a single sequence with special tokens adds."""
        ...


def _token_text(value: Any) -> str | None:
    """A special token as written in a config: a string, or an AddedToken-like mapping."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read tokenizer file {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


class _FastTokenizer:
    """``tokenizers.Tokenizer`` read from a folder, counting like transformers does."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer as RawTokenizer

        self.name = str(folder)
        self._tok = RawTokenizer.from_file(str(folder / "tokenizer.json"))
        # special_tokens_map.json first, tokenizer_config.json wins where both name a token.
        config = {**_read_json(folder / "special_tokens_map.json")}
        config.update(_read_json(folder / "tokenizer_config.json"))
        listed: list[Any] = [config.get(key) for key in _NAMED_SPECIAL]
        for key in _EXTRA_SPECIAL:  # a list (transformers 4) or a name -> token map (5)
            extra = config.get(key)
            if isinstance(extra, dict):
                listed.extend(extra.values())
            elif isinstance(extra, list):
                listed.extend(extra)
        special = [text for text in map(_token_text, listed) if text is not None]
        # Unique, first occurrence first; a named token missing from the vocabulary is added,
        # as transformers does when it loads the same files.
        self._special_ids = [self._token_id(token) for token in dict.fromkeys(special)]

        # With a tokenizer.json, transformers' generic class takes the special tokens added on
        # encode (BOS, ...) from its post-processor alone; add_bos_token in the config is
        # dropped on loading (transformers 5), so no post-processor means nothing is added.
        processor = self._tok.post_processor
        self._num_special = int(processor.num_special_tokens_to_add(False)) if processor else 0
        # Clean-up of spaces before punctuation: off by default, and transformers skips it for
        # BPE models even when a config asks for it.
        self._clean_up = (
            bool(config.get("clean_up_tokenization_spaces", False))
            and type(self._tok.model).__name__ != "BPE"
        )

    def _token_id(self, token: str) -> int:
        token_id = self._tok.token_to_id(token)
        if token_id is None:
            from tokenizers import AddedToken

            self._tok.add_special_tokens([AddedToken(token, special=True, normalized=False)])
            token_id = self._tok.token_to_id(token)
        if token_id is None:
            raise ConfigError(f"tokenizer {self.name}: cannot add special token {token!r}")
        return int(token_id)

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size(with_added_tokens=False))

    @property
    def all_special_ids(self) -> list[int]:
        return list(self._special_ids)

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=add_special_tokens).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=False)
        if self._clean_up:
            for before, after in (
                (" .", "."),
                (" ?", "?"),
                (" !", "!"),
                (" ,", ","),
                (" ' ", "'"),
                (" n't", "n't"),
                (" 'm", "'m"),
                (" 's", "'s"),
                (" 've", "'ve"),
                (" 're", "'re"),
            ):
                text = text.replace(before, after)
        return text

    def num_special_tokens_to_add(self) -> int:
        return self._num_special

    def __repr__(self) -> str:
        return f"<tokenizer {self.name} (tokenizers)>"


class _HFTokenizer:
    """A transformers tokenizer behind the same interface."""

    def __init__(self, name: str, tok: Any) -> None:
        self.name = name
        self._tok = tok
        # transformers recomputes these on every access; they never change after loading.
        self._special_ids = [int(i) for i in tok.all_special_ids]
        self._vocab_size = int(tok.vocab_size)
        self._num_special = int(tok.num_special_tokens_to_add())

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def all_special_ids(self) -> list[int]:
        return list(self._special_ids)

    def encode(self, text: str, *, add_special_tokens: bool = False) -> list[int]:
        return [int(i) for i in self._tok.encode(text, add_special_tokens=add_special_tokens)]

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._tok.decode(list(ids))
        return text

    def num_special_tokens_to_add(self) -> int:
        return self._num_special

    def __repr__(self) -> str:
        return f"<tokenizer {self.name} (transformers)>"


def _load_fast(folder: Path) -> Tokenizer | str:
    """The tokenizer, or why the ``tokenizers`` path could not give one."""
    if not folder.is_dir():
        return "it is not a local folder"
    if not (folder / "tokenizer.json").is_file():
        return "the folder has no tokenizer.json"
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        return "the tokenizers library is not installed"
    try:
        return _FastTokenizer(folder)
    except ConfigError:
        raise
    except Exception as exc:  # a tokenizer.json this version cannot read: try transformers
        return f"tokenizers could not read it ({type(exc).__name__}: {exc})"


def _load_transformers(model: str) -> Tokenizer | str:
    """The tokenizer, or why transformers could not give one."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return "transformers is not installed"
    try:
        tok = AutoTokenizer.from_pretrained(model, local_files_only=True)
    except Exception as exc:  # OSError, ValueError, ...: all mean "not available here"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"transformers could not load it offline ({type(exc).__name__}: {first_line})"
    return _HFTokenizer(model, tok)


def _generic(folder: Path) -> bool:
    config = _read_json(folder / "tokenizer_config.json") if folder.is_dir() else {}
    return config.get("tokenizer_class") in _GENERIC_CLASSES


def _transformers_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("transformers") is not None
    except ValueError:  # a None placeholder in sys.modules
        return False


def load_tokenizer(model: str, *, backend: str = "auto") -> Tokenizer:
    """The tokenizer of ``model``: a local folder, or a hub id already in the local cache.

    :param backend: ``"auto"``, ``"tokenizers"`` or ``"transformers"``. Auto reads a folder's
        ``tokenizer.json`` with ``tokenizers`` when its tokenizer class is the generic one or
        transformers is missing, and asks transformers otherwise.
    :raises ConfigError: when neither library can load it offline.
    """
    if backend not in ("auto", "tokenizers", "transformers"):
        raise ConfigError(
            f"unknown tokenizer backend {backend!r}; valid ones are auto, tokenizers, transformers"
        )
    folder = Path(model).expanduser()
    if backend == "auto" and not _generic(folder) and _transformers_installed():
        order = ("transformers", "tokenizers")
    else:
        order = ("tokenizers", "transformers")
    reasons: list[str] = []
    for step in order:
        if backend not in ("auto", step):
            continue
        loaded = (
            _load_fast(folder)
            if step == "tokenizers"
            else _load_transformers(str(folder) if folder.is_dir() else model)
        )
        if not isinstance(loaded, str):
            return loaded
        reasons.append(loaded)
    raise ConfigError(
        f"cannot load a tokenizer for model {model!r}: {'; '.join(reasons)}. "
        f"To fix it, {_HOW_TO_FIX}."
    )
