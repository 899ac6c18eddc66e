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


def test_sharegpt_conversations(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    import json

    from pytest_llmperf.measure.datasets import sharegpt_conversations, write_synthetic_sharegpt

    path = write_synthetic_sharegpt(tmp_path / "sharegpt.json", conversations=400)
    tok = load_tokenizer(str(tiny_model_dir), backend="tokenizers")
    requests = sharegpt_conversations(path, tok, num_conversations=10, turns=2, seed=3)
    assert len(requests) == 20
    assert requests == sharegpt_conversations(path, tok, num_conversations=10, turns=2, seed=3)
    # Each pair is the first two questions of one conversation in the file, with the
    # recorded answers' lengths.
    entries = json.loads(path.read_text())
    questions = {
        tuple(t["value"] for t in e["conversations"][0:4:2]): e["conversations"]
        for e in entries
        if len(e["conversations"]) >= 4
    }
    for first, second in zip(requests[0::2], requests[1::2], strict=True):
        turns = questions[(first.prompt, second.prompt)]
        answer = turns[3]["value"]
        assert second.expected_output_len == len(tok.encode(answer, add_special_tokens=True))
        assert not first.ignore_eos

    profile = parse_profiles(
        "profiles:\n  chats:\n    dataset: multi-turn\n    user_turns: sharegpt\n"
        "    turns: 2\n    num_prompts: 8\n",
        "my.yaml",
    )["chats"]
    assert profile.workload()["user_turns"] == "sharegpt"
    built = build_requests(profile, tok, sharegpt_path=path)
    assert built == sharegpt_conversations(path, tok, num_conversations=4, turns=2, seed=42)

    with pytest.raises(Exception, match="only 0 conversation\\(s\\) have 9 exchanges"):
        sharegpt_conversations(path, tok, num_conversations=1, turns=9)
    with pytest.raises(ProfileError, match="user_turns must be random or sharegpt"):
        parse_profiles(
            "profiles:\n  c:\n    dataset: multi-turn\n    user_turns: wiki\n    turns: 2\n"
            "    num_prompts: 8\n",
            "my.yaml",
        )
