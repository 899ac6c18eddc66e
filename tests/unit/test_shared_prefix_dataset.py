"""Shared-prefix prompts: vLLM's prefix_repetition draws, with exact lengths and seams."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from pytest_llmperf.errors import ConfigError, ProfileError
from pytest_llmperf.measure.datasets import build_requests
from pytest_llmperf.measure.profiles import builtin_profiles, parse_profiles
from pytest_llmperf.measure.shared_prefix import shared_prefix_requests
from pytest_llmperf.measure.tokenizer import Tokenizer, load_tokenizer

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def tok(tiny_model_dir: Path) -> Tokenizer:
    return load_tokenizer(str(tiny_model_dir), backend="tokenizers")


def _groups(tok: Tokenizer, prompts: list[str], prefix_len: int) -> Counter[tuple[int, ...]]:
    return Counter(tuple(tok.encode(p)[:prefix_len]) for p in prompts)


@pytest.mark.parametrize(
    ("num_prefixes", "per_prefix", "prefix_len", "suffix_len"),
    [(4, 5, 64, 32), (10, 4, 256, 256), (2, 3, 2000, 200), (3, 2, 1, 1)],
)
@pytest.mark.parametrize("backend", ["tokenizers", "transformers"])
def test_prefixes_shared_and_lengths_exact(
    tiny_model_dir: Path,
    backend: str,
    num_prefixes: int,
    per_prefix: int,
    prefix_len: int,
    suffix_len: int,
) -> None:
    if backend == "transformers":
        pytest.importorskip("transformers")
    tokenizer = load_tokenizer(str(tiny_model_dir), backend=backend)
    requests = shared_prefix_requests(
        tokenizer,
        num_prompts=num_prefixes * per_prefix,
        num_prefixes=num_prefixes,
        prefix_len=prefix_len,
        suffix_len=suffix_len,
        output_len=9,
    )
    total = prefix_len + suffix_len
    # Re-encoding each prompt, as the server will, gives exactly the asked-for count ...
    assert [len(tokenizer.encode(r.prompt)) for r in requests] == [total] * len(requests)
    assert {r.prompt_len for r in requests} == {total}
    assert {r.expected_output_len for r in requests} == {9}
    # ... and the first prefix_len ids fall into num_prefixes groups of per_prefix each.
    groups = _groups(tokenizer, [r.prompt for r in requests], prefix_len)
    assert sorted(groups.values()) == [per_prefix] * num_prefixes
    if suffix_len > 1:
        assert len({r.prompt for r in requests}) == len(requests)


def test_same_seed_same_prompts(tok: Tokenizer) -> None:
    args = {"num_prompts": 12, "num_prefixes": 3, "prefix_len": 100, "suffix_len": 20}
    first = shared_prefix_requests(tok, output_len=4, **args)
    again = shared_prefix_requests(tok, output_len=4, **args)
    other = shared_prefix_requests(tok, output_len=4, seed=43, **args)
    assert first == again
    assert not {r.prompt for r in first} & {r.prompt for r in other}


def test_requests_are_shuffled(tok: Tokenizer) -> None:
    requests = shared_prefix_requests(
        tok, num_prompts=40, num_prefixes=4, prefix_len=32, suffix_len=8, output_len=2
    )
    order = [tuple(tok.encode(r.prompt)[:32]) for r in requests]
    # Grouped by prefix before the shuffle; after it, neighbours change prefix often.
    changes = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert changes > 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_prompts": 10, "num_prefixes": 4}, "num_prompts 10 must be a multiple of"),
        ({"num_prompts": 2, "num_prefixes": 4}, "num_prompts 2 must be a multiple of"),
        ({"prefix_len": 0}, "prefix_len must be at least 1, got 0"),
        ({"suffix_len": -1}, "suffix_len must be at least 1"),
        ({"num_prefixes": 0}, "num_prefixes must be at least 1"),
    ],
)
def test_bad_arguments(tok: Tokenizer, kwargs: dict[str, int], message: str) -> None:
    args = {"num_prompts": 8, "num_prefixes": 2, "prefix_len": 16, "suffix_len": 8, **kwargs}
    with pytest.raises(ConfigError, match=message):
        shared_prefix_requests(tok, output_len=4, **args)


def test_builtin_profile_and_its_scales(tok: Tokenizer) -> None:
    profile = builtin_profiles()["shared-prefix"]
    assert profile.embedded_num_prompts is not None
    assert profile.num_prompts % (profile.num_prefixes or 0) == 0
    # --num-prompts 25 rounds down to a multiple of the ten prefixes.
    assert profile.scaled(25).num_prompts == 20
    assert profile.scaled(3).num_prompts == 10
    small = profile.scaled(20)
    requests = build_requests(small, tok)
    assert {r.prompt_len for r in requests} == {2200}
    assert sorted(_groups(tok, [r.prompt for r in requests], 2000).values()) == [2] * 10
    workload = small.workload()
    assert (workload["num_prefixes"], workload["prefix_len"], workload["suffix_len"]) == (
        10,
        2000,
        200,
    )
    # The other profiles' stored workloads do not grow the new keys.
    assert "prefix_len" not in builtin_profiles()["medium"].workload()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "dataset: shared-prefix\n    num_prompts: 8\n    prefix_len: 8\n    suffix_len: 8\n"
            "    output_len: 2",
            "num_prefixes must be a positive integer",
        ),
        (
            "dataset: shared-prefix\n    num_prompts: 9\n    num_prefixes: 2\n    prefix_len: 8\n"
            "    suffix_len: 8\n    output_len: 2",
            "num_prompts 9 is not a multiple",
        ),
        (
            "dataset: shared-prefix\n    num_prompts: 8\n    num_prefixes: 2\n    prefix_len: 8\n"
            "    suffix_len: 8\n    output_len: 2\n    embedded_num_prompts: 3",
            "embedded_num_prompts 3 is not a multiple",
        ),
        (
            "dataset: shared-prefix\n    num_prompts: 8\n    num_prefixes: 2\n    prefix_len: 8\n"
            "    suffix_len: 8\n    input_len: 16\n    output_len: 2",
            "remove input_len",
        ),
        (
            "dataset: shared-prefix\n    num_prompts: 8\n    num_prefixes: 2\n    prefix_len: 8\n"
            "    suffix_len: 8",
            "output_len must be a positive integer",
        ),
        (
            "dataset: random\n    num_prompts: 8\n    input_len: 8\n    output_len: 2\n"
            "    prefix_len: 4",
            "prefix_len only apply to dataset shared-prefix, not random",
        ),
    ],
)
def test_profile_validation(body: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as info:
        parse_profiles(f"profiles:\n  mine:\n    {body}\n", "my.yaml")
    assert "my.yaml: profile 'mine'" in str(info.value)


# ---------------------------------------------------------------------------------------------
# parity with vLLM's own PrefixRepetitionRandomDataset


@pytest.fixture(scope="module")
def vllm_tok(tiny_model_dir: Path) -> object:
    pytest.importorskip("vllm.benchmarks.datasets", reason="vllm is not installed")
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(str(tiny_model_dir))


PARITY_CASES = [
    {"prefix_len": 64, "suffix_len": 32, "num_prefixes": 4, "output_len": 8},
    {"prefix_len": 256, "suffix_len": 256, "num_prefixes": 10, "output_len": 128},
    {"prefix_len": 1000, "suffix_len": 50, "num_prefixes": 2, "output_len": 20},
]


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_parity_with_vllm(tok: Tokenizer, vllm_tok: object, case: dict[str, int]) -> None:
    from vllm.benchmarks.datasets import PrefixRepetitionRandomDataset

    count = case["num_prefixes"] * 5
    theirs = PrefixRepetitionRandomDataset(random_seed=7).sample(
        tokenizer=vllm_tok, num_requests=count, **case
    )
    ours = shared_prefix_requests(tok, num_prompts=count, seed=7, exact=False, **case)
    assert [(r.prompt, r.prompt_len, r.expected_output_len) for r in ours] == [
        (r.prompt, r.prompt_len, r.expected_output_len) for r in theirs
    ]

    # Exact: every prompt vLLM got right is unchanged; the others (prefix and suffix merged
    # at the seam, or a part that missed its length) now re-encode to exactly the total.
    exact = shared_prefix_requests(tok, num_prompts=count, seed=7, **case)
    total = case["prefix_len"] + case["suffix_len"]
    vllm_off = 0
    for mine, vllm in zip(exact, theirs, strict=True):
        assert len(tok.encode(mine.prompt)) == mine.prompt_len == total
        if len(tok.encode(vllm.prompt)) == total:
            assert mine.prompt == vllm.prompt
        else:
            vllm_off += 1
    print(f"{vllm_off} of {count} vLLM prompts were off their length; ours are exact")
