"""ShareGPT: vLLM's selection and order, its filters, oversampling, errors, the synthetic file."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure import datasets
from pytest_llmperf.measure.datasets import (
    build_requests,
    random_requests,
    sharegpt_requests,
    write_synthetic_sharegpt,
)
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.tokenizer import Tokenizer, load_tokenizer

pytest.importorskip("tokenizers")

# sha256 of write_synthetic_sharegpt(path) with its defaults. The file is a workload: if this
# changes, every ShareGPT baseline recorded on the embedded model changes meaning.
DEFAULT_SYNTHETIC_SHA256 = "043988d56a2b45f394c0090b4c1434e5ebb888aff817dfef14054d22514db2b3"


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path) -> Tokenizer:
    return load_tokenizer(str(tiny_model_dir))


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_sharegpt(tmp_path_factory.mktemp("sharegpt") / "synthetic.json")


def triples(requests: list[Any]) -> list[tuple[str, int, int]]:
    return [(r.prompt, r.prompt_len, r.expected_output_len) for r in requests]


# ---------------------------------------------------------------------------------------------
# the synthetic file


def test_synthetic_file_is_deterministic(synthetic: Path, tmp_path: Path) -> None:
    again = write_synthetic_sharegpt(tmp_path / "again.json")
    assert again.read_bytes() == synthetic.read_bytes()
    assert hashlib.sha256(synthetic.read_bytes()).hexdigest() == DEFAULT_SYNTHETIC_SHA256
    other = write_synthetic_sharegpt(tmp_path / "other.json", seed=1)
    assert other.read_bytes() != synthetic.read_bytes()
    small = write_synthetic_sharegpt(tmp_path / "small.json", conversations=10)
    assert len(json.loads(small.read_text())) == 10


def test_synthetic_file_has_sharegpts_shape_and_spread(synthetic: Path, tok: Tokenizer) -> None:
    entries = json.loads(synthetic.read_text(encoding="utf-8"))
    assert len(entries) == 1200
    turn_counts = {len(e["conversations"]) for e in entries}
    assert {0, 1, 2, 4} <= turn_counts
    for entry in entries:
        assert set(entry) == {"id", "conversations"}
        assert entry["id"].endswith("_0")
        for turn in entry["conversations"]:
            assert set(turn) == {"from", "value"}
            assert turn["from"] in ("human", "gpt")
            assert isinstance(turn["value"], str)

    pairs = [
        (
            len(tok.encode(e["conversations"][0]["value"], add_special_tokens=True)),
            len(tok.encode(e["conversations"][1]["value"], add_special_tokens=True)),
        )
        for e in entries
        if len(e["conversations"]) >= 2
    ]
    # Entries each filter has to drop, and a wide spread among the ones it keeps.
    assert any(p < 4 for p, _ in pairs)
    assert any(o < 4 for _, o in pairs)
    assert any(p > 1024 for p, _ in pairs)
    assert any(p <= 1024 and p + o > 2048 for p, o in pairs)
    kept = [(p, o) for p, o in pairs if 4 <= p <= 1024 and o >= 4 and p + o <= 2048]
    assert len(kept) >= 1000  # the sharegpt profile's 1000 prompts need no oversampling
    prompt_lens = sorted(p for p, _ in kept)
    answer_lens = sorted(o for _, o in kept)
    assert prompt_lens[len(kept) // 10] < 40
    assert prompt_lens[-len(kept) // 10] > 300
    assert answer_lens[len(kept) // 10] < 80
    assert answer_lens[-len(kept) // 10] > 500


# ---------------------------------------------------------------------------------------------
# parity with vLLM's ShareGPTDataset


@pytest.fixture(scope="module")
def vllm_tok(tiny_model_dir: Path) -> object:
    pytest.importorskip("vllm.benchmarks.datasets", reason="vllm is not installed")
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(tiny_model_dir))


@pytest.mark.parametrize(
    ("seed", "num_prompts", "output_len"),
    [(0, 100, None), (0, 1000, None), (7, 300, None), (0, 200, 64), (3, 1500, None)],
)
def test_parity_with_vllm(
    synthetic: Path,
    tok: Tokenizer,
    vllm_tok: object,
    seed: int,
    num_prompts: int,
    output_len: int | None,
) -> None:
    from vllm.benchmarks.datasets import ShareGPTDataset

    theirs = ShareGPTDataset(dataset_path=str(synthetic), random_seed=seed).sample(
        tokenizer=vllm_tok, num_requests=num_prompts, output_len=output_len
    )
    ours = sharegpt_requests(
        synthetic, tok, num_prompts=num_prompts, seed=seed, output_len=output_len
    )
    assert len(ours) == num_prompts
    assert triples(ours) == triples(theirs)
    assert not any(r.ignore_eos for r in ours)


# ---------------------------------------------------------------------------------------------
# filters and oversampling on a hand-made file


def text_of(tok: Tokenizer, n: int, seed: int) -> str:
    """A text of exactly ``n`` tokens (the tiny tokenizer adds no special tokens)."""
    text = random_requests(tok, num_prompts=1, input_len=n, output_len=1, seed=seed)[0].prompt
    assert len(tok.encode(text, add_special_tokens=True)) == n
    return text


# label: (prompt tokens, answer tokens), or None for an entry that never reaches the filters
EDGE_CASES: dict[str, tuple[int, int]] = {
    "prompt-3": (3, 50),
    "prompt-4": (4, 50),
    "answer-3": (20, 3),
    "prompt-1024": (1024, 10),
    "prompt-1025": (1025, 10),
    "total-2048": (1000, 1048),
    "total-2049": (1000, 1049),
    "three-turns": (10, 10),
}


@pytest.fixture(scope="module")
def edge_file(
    tok: Tokenizer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    entries: list[dict[str, Any]] = []
    label_of: dict[str, str] = {}
    for seed, (label, (p, o)) in enumerate(EDGE_CASES.items()):
        prompt, answer = text_of(tok, p, seed), text_of(tok, o, 100 + seed)
        label_of[prompt] = label
        turns = [{"from": "human", "value": prompt}, {"from": "gpt", "value": answer}]
        if label == "three-turns":
            turns.append({"from": "human", "value": "and then?"})
        entries.append({"id": label, "conversations": turns})
    entries.append({"id": "one-turn", "conversations": [{"from": "human", "value": "lonely"}]})
    entries.append({"id": "no-turns", "conversations": []})
    entries.append({"id": "no-conversations-key"})
    path = tmp_path_factory.mktemp("edge") / "edge.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path, label_of


@pytest.mark.parametrize(
    ("output_len", "kept"),
    [
        (None, {"prompt-4", "prompt-1024", "total-2048", "three-turns"}),
        # A fixed output length lifts the minimum-answer filter; the total limit still holds.
        (100, {"prompt-4", "answer-3", "prompt-1024", "total-2048", "total-2049", "three-turns"}),
        (1100, {"prompt-4", "answer-3", "three-turns"}),
    ],
)
def test_filters(
    edge_file: tuple[Path, dict[str, str]], tok: Tokenizer, output_len: int | None, kept: set[str]
) -> None:
    path, label_of = edge_file
    requests = sharegpt_requests(path, tok, num_prompts=len(kept), output_len=output_len)
    assert {label_of[r.prompt] for r in requests} == kept
    for r in requests:
        p, o = EDGE_CASES[label_of[r.prompt]]
        assert r.prompt_len == p
        assert r.expected_output_len == (o if output_len is None else output_len)


def test_oversampling(edge_file: tuple[Path, dict[str, str]], tok: Tokenizer) -> None:
    path, label_of = edge_file
    requests = sharegpt_requests(path, tok, num_prompts=11, seed=5)
    assert len(requests) == 11
    labels = [label_of[r.prompt] for r in requests]
    kept = {"prompt-4", "prompt-1024", "total-2048", "three-turns"}
    assert set(labels[:4]) == kept  # each accepted conversation once, then repeats
    assert set(labels[4:]) <= kept
    assert requests == sharegpt_requests(path, tok, num_prompts=11, seed=5)


def test_order_follows_the_seed(synthetic: Path, tok: Tokenizer) -> None:
    first = sharegpt_requests(synthetic, tok, num_prompts=50, seed=0)
    assert first == sharegpt_requests(synthetic, tok, num_prompts=50, seed=0)
    assert first != sharegpt_requests(synthetic, tok, num_prompts=50, seed=1)
    # Fewer prompts are a prefix of more: the walk stops early, it does not reselect.
    assert sharegpt_requests(synthetic, tok, num_prompts=20, seed=0) == first[:20]


# ---------------------------------------------------------------------------------------------
# the streamed reader


@pytest.mark.parametrize("indent", [None, 2, "\t"])
def test_reader_with_tiny_pieces(
    tmp_path: Path, tok: Tokenizer, monkeypatch: pytest.MonkeyPatch, indent: object
) -> None:
    """Pieces smaller than one element, multi-byte text split across them: same result."""
    entries = [
        {
            "id": f"e{i}",
            "conversations": [
                {
                    "from": "human",
                    "value": f"日本語の質問 {i}: なぜ空は青いのですか? 🙂 " * (i + 1),
                },
                {"from": "gpt", "value": "Rayleigh scattering — ümlaut, ñ, 空 " * (i + 2)},
            ],
        }
        for i in range(12)
    ]
    path = tmp_path / "multibyte.json"
    path.write_text(json.dumps(entries, ensure_ascii=False, indent=indent), encoding="utf-8")  # type: ignore[arg-type]
    whole = sharegpt_requests(path, tok, num_prompts=12, seed=4)
    monkeypatch.setattr(datasets, "_CHUNK_CHARS", 7)
    assert sharegpt_requests(path, tok, num_prompts=12, seed=4) == whole
    raw = path.read_bytes()
    scanned = list(datasets._scan_list(path))
    assert [value for _, _, value in scanned] == entries
    for offset, size, value in scanned:
        assert json.loads(raw[offset : offset + size].decode("utf-8")) == value


# ---------------------------------------------------------------------------------------------
# errors


def test_missing_file_says_where_it_comes_from(tmp_path: Path, tok: Tokenizer) -> None:
    missing = tmp_path / "ShareGPT_V3_unfiltered_cleaned_split.json"
    with pytest.raises(ConfigError) as info:
        sharegpt_requests(missing, tok, num_prompts=1)
    message = str(info.value)
    assert str(missing) in message
    assert "no such file" in message
    assert "--llmperf-sharegpt PATH" in message
    assert "llmperf_sharegpt" in message
    assert "ShareGPT_V3_unfiltered_cleaned_split.json" in message
    assert "anon8231489123/ShareGPT_Vicuna_unfiltered" in message
    assert "Hugging Face hub" in message

    with pytest.raises(ConfigError, match="not a file"):
        sharegpt_requests(tmp_path, tok, num_prompts=1)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "the top level is not a JSON list"),
        (b'{"conversations": []}', "the top level is not a JSON list"),
        (b'[{"id": "x", "conversations": [{"from": "human", "val', "invalid JSON"),
        (b'[{"conversations": []}', "the list is not closed"),
        (b'[{"conversations": []},]', "invalid JSON"),
        (b'[{"conversations": []} {"conversations": []}]', "expected ',' or ']'"),
        (b'[{"conversations": []}] and more', "unexpected data after the top-level list"),
        (b"[1, 2]", "entry 0 is not an object"),
        (b'[{"conversations": "hello"}]', "entry 0: 'conversations' is not a list"),
        (
            b'[{"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}]',
            "entry 0: a turn without a string 'value'",
        ),
        (b'["\xff\xfe"]', "not UTF-8"),
        (
            b'[{"conversations": [{"value": "hi"}, {"value": "ok"}]}]',
            "none of its 1 conversation",
        ),
    ],
)
def test_malformed_file(tmp_path: Path, tok: Tokenizer, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        sharegpt_requests(path, tok, num_prompts=1)
    message = str(info.value)
    assert f"ShareGPT file {path} is malformed" in message
    assert reason in message
    assert "--llmperf-sharegpt PATH" in message


# ---------------------------------------------------------------------------------------------
# dispatch


def test_build_requests_sharegpt_profile(synthetic: Path, tok: Tokenizer) -> None:
    profile = builtin_profiles()["sharegpt"].scaled(30)
    assert build_requests(profile, tok, sharegpt_path=synthetic) == sharegpt_requests(
        synthetic, tok, num_prompts=30, seed=0
    )
    fixed = dataclasses.replace(profile, output_len=32)
    assert {r.expected_output_len for r in build_requests(fixed, tok, sharegpt_path=synthetic)} == {
        32
    }
    with pytest.raises(ConfigError, match="--llmperf-sharegpt PATH"):
        build_requests(profile, tok)
