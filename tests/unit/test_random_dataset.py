"""The random dataset: vLLM's prompts, draw for draw, with exact token lengths."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.measure.datasets import build_requests, random_requests
from pytest_llmperf.measure.profiles import builtin_profiles
from pytest_llmperf.measure.tokenizer import Tokenizer, load_tokenizer

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path) -> Tokenizer:
    return load_tokenizer(str(tiny_model_dir), backend="tokenizers")


@pytest.fixture(scope="module")
def hf_tok(tiny_model_dir: Path) -> Tokenizer:
    pytest.importorskip("transformers")
    return load_tokenizer(str(tiny_model_dir), backend="transformers")


def test_same_seed_same_prompts(tok: Tokenizer) -> None:
    first = random_requests(tok, num_prompts=20, input_len=256, output_len=16)
    again = random_requests(tok, num_prompts=20, input_len=256, output_len=16)
    other = random_requests(tok, num_prompts=20, input_len=256, output_len=16, seed=43)
    assert first == again
    assert [r.prompt for r in first] != [r.prompt for r in other]
    assert len({r.prompt for r in first}) == 20  # each request starts elsewhere in the vocab


@pytest.mark.parametrize(
    ("input_len", "num_prompts"), [(128, 100), (2000, 30), (4000, 15), (32000, 4)]
)
@pytest.mark.parametrize("backend", ["tokenizers", "transformers"])
def test_lengths_are_exact(
    tiny_model_dir: Path, backend: str, input_len: int, num_prompts: int
) -> None:
    if backend == "transformers":
        pytest.importorskip("transformers")
    tokenizer = load_tokenizer(str(tiny_model_dir), backend=backend)
    requests = random_requests(
        tokenizer, num_prompts=num_prompts, input_len=input_len, output_len=7
    )
    assert [r.prompt_len for r in requests] == [input_len] * num_prompts
    # Re-encoding the text, as the server will, gives the same count.
    assert [len(tokenizer.encode(r.prompt)) for r in requests] == [input_len] * num_prompts
    assert {r.expected_output_len for r in requests} == {7}
    assert all(r.ignore_eos for r in requests)


def test_backends_make_the_same_prompts(tok: Tokenizer, hf_tok: Tokenizer) -> None:
    args = {"num_prompts": 40, "input_len": 700, "output_len": 9, "range_ratio": 0.4}
    assert random_requests(tok, **args) == random_requests(hf_tok, **args)


def test_range_ratio_bounds(tok: Tokenizer) -> None:
    requests = random_requests(tok, num_prompts=200, input_len=400, output_len=100, range_ratio=0.5)
    inputs = [r.prompt_len for r in requests]
    outputs = [r.expected_output_len for r in requests]
    assert 200 <= min(inputs) < 300
    assert 500 < max(inputs) <= 600
    assert 50 <= min(outputs) < 70
    assert 130 < max(outputs) <= 150
    assert all(len(tok.encode(r.prompt)) == r.prompt_len for r in requests)


def test_range_ratio_per_side(tok: Tokenizer) -> None:
    requests = random_requests(
        tok,
        num_prompts=50,
        input_len=300,
        output_len=40,
        range_ratio={"input": 0.0, "output": 0.5},
    )
    assert {r.prompt_len for r in requests} == {300}
    assert len({r.expected_output_len for r in requests}) > 5


def test_output_length_never_zero(tok: Tokenizer) -> None:
    requests = random_requests(tok, num_prompts=50, input_len=64, output_len=1, range_ratio=0.9)
    assert min(r.expected_output_len for r in requests) >= 1


@pytest.mark.parametrize("prefix_len", [16, 200])
def test_shared_prefix(tok: Tokenizer, prefix_len: int) -> None:
    requests = random_requests(
        tok, num_prompts=20, input_len=300, output_len=4, prefix_len=prefix_len
    )
    encoded = [tok.encode(r.prompt) for r in requests]
    # vLLM's meaning: the prefix comes on top of input_len.
    assert {len(ids) for ids in encoded} == {prefix_len + 300}
    shared = 0
    while all(ids[shared] == encoded[0][shared] for ids in encoded):
        shared += 1
    assert shared == prefix_len
    assert len({tuple(ids[prefix_len:]) for ids in encoded}) == 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"range_ratio": 1.0}, r"range_ratio must be in \[0, 1\)"),
        ({"range_ratio": -0.1}, r"range_ratio must be in \[0, 1\)"),
        ({"range_ratio": {"input": 0.1}}, "needs both 'input' and 'output'"),
        ({"input_len": 0}, "input_len 0 is too small"),
    ],
)
def test_bad_arguments(tok: Tokenizer, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"num_prompts": 2, "input_len": 16, "output_len": 4, **kwargs}
    with pytest.raises(ConfigError, match=message):
        random_requests(tok, **args)  # type: ignore[arg-type]


def test_build_requests_random_profile(tok: Tokenizer) -> None:
    profile = builtin_profiles()["medium"].scaled(5)
    requests = build_requests(profile, tok)
    assert requests == random_requests(tok, num_prompts=5, input_len=2000, output_len=100)
    assert {(r.prompt_len, r.expected_output_len) for r in requests} == {(2000, 100)}


# ---------------------------------------------------------------------------------------------
# parity with vLLM's own RandomDataset


@pytest.fixture(scope="module")
def vllm_tok(tiny_model_dir: Path) -> object:
    pytest.importorskip("vllm.benchmarks.datasets", reason="vllm is not installed")
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(tiny_model_dir))


PARITY_CASES = [
    {"input_len": 128, "output_len": 4},
    {"input_len": 2000, "output_len": 100},
    {"input_len": 900, "output_len": 50, "range_ratio": 0.3},
    {"input_len": 300, "output_len": 20, "prefix_len": 50},
    {"input_len": 500, "output_len": 30, "range_ratio": {"input": 0.2, "output": 0.6}},
]


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_parity_with_vllm(tok: Tokenizer, vllm_tok: object, case: dict[str, object]) -> None:
    from vllm.benchmarks.datasets import RandomDataset

    theirs = RandomDataset(random_seed=42).sample(tokenizer=vllm_tok, num_requests=40, **case)
    ours = random_requests(tok, num_prompts=40, seed=42, exact=False, **case)  # type: ignore[arg-type]
    assert [(r.prompt, r.prompt_len, r.expected_output_len) for r in ours] == [
        (r.prompt, r.prompt_len, r.expected_output_len) for r in theirs
    ]

    # With the length repair on, every prompt vLLM got exact is unchanged, and the others
    # (vLLM's fitting can settle a token or two off) now have the asked-for length.
    repaired = random_requests(tok, num_prompts=40, seed=42, **case)  # type: ignore[arg-type]
    targets = expected_lengths(case, 40)
    vllm_off = 0
    for mine, vllm, target in zip(repaired, theirs, targets, strict=True):
        assert mine.expected_output_len == vllm.expected_output_len
        assert mine.prompt_len == len(tok.encode(mine.prompt)) == target
        if vllm.prompt_len == target:
            assert mine.prompt == vllm.prompt
        else:
            vllm_off += 1
    print(f"{vllm_off} of 40 vLLM prompts were off their length; ours are exact")


def expected_lengths(case: dict[str, object], n: int) -> list[int]:
    """The input lengths vLLM draws first (the tiny tokenizer adds no special tokens)."""
    import math

    import numpy as np

    ratio = case.get("range_ratio", 0.0)
    r = float(ratio["input"] if isinstance(ratio, dict) else ratio)  # type: ignore[arg-type]
    length = int(case["input_len"])  # type: ignore[call-overload]
    low, high = math.floor(length * (1 - r)), math.ceil(length * (1 + r))
    drawn = np.random.default_rng(42).integers(low, high + 1, size=n)
    return [int(case.get("prefix_len", 0)) + int(x) for x in drawn]  # type: ignore[call-overload]
