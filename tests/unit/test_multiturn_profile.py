"""The multi-turn profile: validation, scaling to whole conversations, its prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.measure.datasets import build_requests, random_requests
from pytest_llmperf.measure.multiturn import conversations
from pytest_llmperf.measure.profiles import builtin_profiles, parse_profiles
from pytest_llmperf.measure.tokenizer import load_tokenizer


def test_builtin_profile(tiny_model_dir: Path) -> None:
    pytest.importorskip("tokenizers")
    profile = builtin_profiles()["multi-turn"]
    assert profile.turns == 4
    assert profile.workload()["turns"] == 4
    assert "turns" not in builtin_profiles()["short"].workload()
    assert profile.scaled(30).num_prompts == 28  # whole conversations only
    small = profile.scaled(8)
    tok = load_tokenizer(str(tiny_model_dir), backend="tokenizers")
    requests = build_requests(small, tok)
    # The user turns are the random dataset's prompts, conversation by conversation.
    assert requests == random_requests(tok, num_prompts=8, input_len=200, output_len=100)
    chats = conversations(requests, 4)
    assert [len(chat) for chat in chats] == [4, 4]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("input_len: 8\n    output_len: 2\n    num_prompts: 8", "turns must be a positive integer"),
        (
            "input_len: 8\n    output_len: 2\n    num_prompts: 9\n    turns: 2",
            "num_prompts 9 is not a multiple of turns 2",
        ),
        (
            "input_len: 8\n    output_len: 2\n    num_prompts: 8\n    turns: 2\n"
            "    endpoint: /v1/completions",
            "use the endpoint /v1/chat/completions",
        ),
        ("output_len: 2\n    num_prompts: 8\n    turns: 2", "input_len must be a positive"),
        (
            "input_len: 8\n    output_len: 2\n    num_prompts: 8\n    turns: 2\n    think_time: -1",
            "think_time must be a number of seconds >= 0, got -1",
        ),
    ],
)
def test_validation(body: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profiles(f"profiles:\n  chat:\n    dataset: multi-turn\n    {body}\n", "my.yaml")


def test_turns_only_for_multi_turn() -> None:
    text = "profiles:\n  x:\n    dataset: random\n    input_len: 8\n    output_len: 2\n"
    with pytest.raises(ProfileError, match="turns only applies to dataset multi-turn"):
        parse_profiles(text + "    num_prompts: 4\n    turns: 2\n", "my.yaml")


def test_new_builtins_run_only_when_named(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    everything = pytester.runpytest("--collect-only", "-q", "--engine=vllm")
    assert "shared-prefix" not in everything.stdout.str()
    assert "multi-turn" not in everything.stdout.str()
    everything.stdout.fnmatch_lines(["*test_serving[[]sharegpt-bs4[]]"])
    named = pytester.runpytest(
        "--collect-only", "-q", "--engine=vllm", "--llmperf-profile=shared-prefix,multi-turn"
    )
    named.stdout.fnmatch_lines(
        ["*test_serving[[]shared-prefix[]]", "*test_serving[[]multi-turn[]]"]
    )
    with pytest.raises(ProfileError, match="by_default must be true or false"):
        parse_profiles(
            "profiles:\n  x:\n    dataset: random\n    input_len: 8\n    output_len: 2\n"
            "    num_prompts: 4\n    by_default: maybe\n",
            "my.yaml",
        )
