"""Variants: the file's validation, what a variant changes, and how pytest runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.engines import engine_names
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.variants import (
    Variant,
    find,
    from_engines,
    load_variants,
    parse_variants,
    reference_of,
    settings_for,
)

ENGINES = engine_names()
GOOD = """
variants:
  - name: vllm
    engine: vllm
  - name: vllm-chunked
    engine: vllm
    engine_args: --max-num-batched-tokens 16384
    reference: true
  - name: trt-fp8
    engine: trtllm
    model: Qwen/Qwen3-32B-FP8
    engine_args: [--max_seq_len, 40960]
"""


def test_a_good_file() -> None:
    variants = parse_variants(GOOD, Path("v.yaml"), ENGINES)
    assert variants == (
        Variant("vllm", "vllm"),
        Variant("vllm-chunked", "vllm", None, ("--max-num-batched-tokens", "16384"), None, True),
        Variant("trt-fp8", "trtllm", "Qwen/Qwen3-32B-FP8", ("--max_seq_len", "40960")),
    )
    assert reference_of(variants) == "vllm-chunked"
    # Named like its engine: that engine file's profiles; otherwise variants.<name>.
    assert [v.baseline_key for v in variants] == [None, "vllm-chunked", "trt-fp8"]


def test_first_is_the_reference_unless_one_is_marked() -> None:
    variants = parse_variants(
        "variants: [{name: a, engine: vllm}, {name: b, engine: sglang}]", Path("f"), ENGINES
    )
    assert [v.reference for v in variants] == [True, False]


def test_engines_list_is_a_variant_list() -> None:
    variants = from_engines(["vllm", "sglang", "trtllm"])
    assert [(v.name, v.engine, v.reference) for v in variants] == [
        ("vllm", "vllm", True),
        ("sglang", "sglang", False),
        ("trtllm", "trtllm", False),
    ]
    assert all(v.baseline_key is None for v in variants)
    assert find(variants, "sglang").engine == "sglang"


def test_settings_for_a_variant() -> None:
    session = Settings(
        engines=("vllm", "trtllm"), model="Qwen/Qwen3-32B", engine_args=("--seed", "0")
    )
    trt = Variant("trt-fp8", "trtllm", "Qwen/Qwen3-32B-FP8", ("--max_seq_len", "40960"))
    chosen = settings_for(session, trt)
    assert chosen.engines == ("trtllm",)
    assert chosen.model == "Qwen/Qwen3-32B-FP8"
    assert chosen.engine_args == ("--seed", "0", "--max_seq_len", "40960")
    assert settings_for(session, Variant("vllm", "vllm")).model == "Qwen/Qwen3-32B"
    external = settings_for(session, Variant("x", "external", endpoint="http://h:1"))
    assert external.endpoint == "http://h:1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("variants: [", "v.yaml: line 1: not valid YAML"),
        ("engines: []", "v.yaml: top level: expected a mapping with a list under 'variants:'"),
        ("variants: []", "v.yaml: variants: the list is empty"),
        ("variants: [vllm]", "v.yaml: variants[0]: expected a mapping with name and engine"),
        ("variants: [{engine: vllm}]", "v.yaml: variants[0].name: expected a name"),
        ("variants: [{name: 'a b', engine: vllm}]", "variants[0].name: expected a name"),
        (
            "variants: [{name: a, engine: tgi}]",
            "v.yaml: variant 'a'.engine: unknown engine 'tgi'; valid engines are",
        ),
        (
            "variants: [{name: a, engine: vllm, args: x}]",
            "v.yaml: variants[0]: unknown key(s) args; valid keys are name, engine, model",
        ),
        (
            'variants: [{name: a, engine: vllm, engine_args: "--x \'open"}]',
            "variant 'a'.engine_args: cannot split",
        ),
        (
            "variants: [{name: a, engine: vllm, engine_args: {x: 1}}]",
            "variant 'a'.engine_args: expected a shell-quoted string or a list",
        ),
        (
            "variants: [{name: a, engine: external, endpoint: 'localhost:8000'}]",
            "variant 'a'.endpoint: expected an http(s):// URL",
        ),
        (
            "variants: [{name: a, engine: vllm, reference: yes please}]",
            "variant 'a'.reference: expected true or false",
        ),
        (
            "variants: [{name: a, engine: vllm}, {name: a, engine: sglang}]",
            "v.yaml: variants: name(s) used twice: a",
        ),
        (
            "variants: [{name: a, engine: vllm, reference: true},"
            " {name: b, engine: sglang, reference: true}]",
            "only one variant can be the reference, got a, b",
        ),
    ],
)
def test_bad_files_name_the_file_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_variants(text, Path("v.yaml"), ENGINES)
    assert str(caught.value).startswith("--llmperf-variants v.yaml: ")
    assert message in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read: No such file"):
        load_variants(tmp_path / "nope.yaml", ENGINES)


# -- through pytest ---------------------------------------------------------------------------


@pytest.fixture
def variants_file(pytester: pytest.Pytester) -> Path:
    path = pytester.path / "variants.yaml"
    path.write_text(GOOD, encoding="utf-8")
    pytester.makepyfile(test_perf="def test_serving(llmperf):\n    llmperf.check()\n")
    return path


def test_one_test_per_variant_and_profile_grouped_by_variant(
    pytester: pytest.Pytester, variants_file: Path
) -> None:
    result = pytester.runpytest(
        "--llmperf-variants", str(variants_file), "--model", "m", "--llmperf-profile",
        "short,medium", "--collect-only", "-q",
    )  # fmt: skip
    ids = [
        line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_serving[" in line
    ]
    # Session-scoped parametrization orders by variant: one server at a time.
    assert ids == [
        "vllm-short", "vllm-medium", "vllm-chunked-short", "vllm-chunked-medium",
        "trt-fp8-short", "trt-fp8-medium",
    ]  # fmt: skip


def test_dry_run_shows_each_variants_command(
    pytester: pytest.Pytester, variants_file: Path
) -> None:
    result = pytester.runpytest(
        "--llmperf-variants", str(variants_file), "--model", "Qwen/Qwen3-32B", "--llmperf-dry-run"
    )
    text = result.stdout.str()
    assert result.ret == 0
    assert "[vllm-chunked]" in text
    assert "--model Qwen/Qwen3-32B --max-num-batched-tokens 16384" in text
    assert "[trt-fp8]" in text
    assert "trtllm-serve Qwen/Qwen3-32B-FP8 --max_seq_len 40960" in text


def test_engine_and_variants_together_is_a_usage_error(
    pytester: pytest.Pytester, variants_file: Path
) -> None:
    result = pytester.runpytest("--engine=vllm", "--llmperf-variants", str(variants_file))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llmperf-variants: the file names the engine*drop --engine*"])


def test_a_bad_variants_file_stops_before_anything_starts(pytester: pytest.Pytester) -> None:
    path = pytester.path / "v.yaml"
    path.write_text("variants: [{name: a, engine: tgi}]", encoding="utf-8")
    result = pytester.runpytest("--llmperf-variants", str(path))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*v.yaml: variant 'a'.engine: unknown engine 'tgi'*"])
