"""The plugin's command line: help text, and a clear error for every bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.usage import assert_usage_error

HELP_OPTIONS = [
    "--engine=",
    "--llmperf-engine=",
    "--hardware=",
    "--update-baselines",
    "--model=",
    "--engine-args=",
    "--endpoint=",
    "--llmperf-profile=",
    "--num-prompts=",
    "--baseline-dir=",
    "--llmperf-json=",
    "--llmperf-dry-run",
    "--llmperf-engine-bin=",
    "--llmperf-api-key-env=",
]


def test_help_lists_every_option_in_the_llmperf_group(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0
    text = result.stdout.str()
    assert "LLM serving performance gate (pytest-llmperf)" in text
    group = text.split("LLM serving performance gate (pytest-llmperf)", 1)[1]
    for option in HELP_OPTIONS:
        assert option in group, option
    for ini in ("llmperf_engine", "llmperf_hardware", "llmperf_profiles", "llmperf_baseline_dir"):
        assert ini in text, ini


def test_idle_without_an_engine(pytester: pytest.Pytester) -> None:
    """Installed but not asked to measure: other projects' test runs are untouched."""
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "llmperf:" not in result.stdout.str()


def test_idle_perf_test_is_skipped_with_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_perf(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest("-rs", "--llmperf-profile=short")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*choose an engine with --engine=NAME*"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--engine=tgi-nope"], "*unknown engine 'tgi-nope' (--engine): valid engines are *vllm*"),
        (["--engine=vllm,vllm"], "*names an engine twice*"),
        (
            ["--engine=vllm", "--hardware=a1000"],
            "*--hardware: unknown hardware 'a1000'; valid*a100*",
        ),
        (
            ["--engine=vllm", "--num-prompts=0"],
            "*--num-prompts: expected a positive integer, got '0'*",
        ),
        (["--engine=vllm", "--num-prompts=-3"], "*--num-prompts: expected a positive integer*"),
        (["--engine=vllm", "--num-prompts=many"], "*--num-prompts: expected a positive integer*"),
        (
            ["--engine=vllm", "--llmperf-profile=huge"],
            "*unknown profile(s) 'huge' (--llmperf-profile); valid profiles are sharegpt, short*",
        ),
        (["--engine=vllm", "--endpoint=localhost:8000"], "*--endpoint: expected an http*"),
        (["--engine=vllm", "--engine-args=--x 'unclosed"], "*--engine-args: cannot split*"),
        (["--engine=vllm", "--llmperf-startup-timeout=0"], "*--llmperf-startup-timeout: expected*"),
        (["--engine=vllm", "--llmperf-request-timeout=soon"], "*--llmperf-request-timeout*"),
        (["--engine=vllm", "--llmperf-warmups=-1"], "*--llmperf-warmups: expected a non-negative*"),
        (["--engine=vllm", "--llmperf-repeat=0"], "*--llmperf-repeat: expected a positive*"),
        (
            ["--engine=vllm", "--llmperf-sequential=some"],
            "*--llmperf-sequential: expected a positive integer*",
        ),
        (
            ["--engine=vllm", "--llmperf-context=weekly"],
            "*--llmperf-context: expected one of pr, nightly*",
        ),
        (
            ["--engine=vllm", "--llmperf-api-key-env=sk-123 secret"],
            "*--llmperf-api-key-env: expected the NAME of an environment variable*",
        ),
    ],
)
def test_bad_option_values_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], expected: str
) -> None:
    assert_usage_error(pytester, args, expected)


def test_ini_values_are_validated_like_options(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmperf_engine = vllm\nllmperf_num_prompts = zero\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--num-prompts: expected a positive integer, got 'zero'*"])


def test_user_profile_file_errors_name_the_file_and_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmperf_profiles = extra.yaml\n")
    pytester.path.joinpath("extra.yaml").write_text("profiles:\n  tiny: {dataset: random\n")
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--engine=vllm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*extra.yaml line *: not valid YAML*"])


def test_user_profile_with_bad_values(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmperf_profiles = extra.yaml\n")
    pytester.path.joinpath("extra.yaml").write_text(
        "profiles:\n  tiny:\n    dataset: random\n    input_len: 0\n    output_len: 4\n"
        "    num_prompts: 2\n"
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--engine=vllm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*extra.yaml: profile 'tiny': input_len must be a positive*"])


def test_marker_with_unknown_profile_names_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.llmperf(profiles=['shortish'])\n"
        "def test_perf(llmperf):\n    llmperf.check()\n"
    )
    result = pytester.runpytest("--engine=vllm")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*test_perf*unknown profile(s) shortish; valid profiles are*"])


def test_profiles_become_readable_test_ids(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest("--collect-only", "-q", "--engine=vllm")
    result.stdout.fnmatch_lines(
        [
            "*test_serving[[]sharegpt[]]",
            "*test_serving[[]short[]]",
            "*test_serving[[]medium[]]",
            "*test_serving[[]long[]]",
            "*test_serving[[]very-long[]]",
            "*test_serving[[]sharegpt-bs4[]]",
        ]
    )


def test_several_engines_put_the_engine_in_the_id(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest(
        "--collect-only", "-q", "--engine=vllm,sglang", "--llmperf-profile=short,medium"
    )
    result.stdout.fnmatch_lines(
        [
            "*test_serving[[]vllm-short[]]",
            "*test_serving[[]vllm-medium[]]",
            "*test_serving[[]sglang-short[]]",
            "*test_serving[[]sglang-medium[]]",
        ]
    )


def test_marker_selects_profiles(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.llmperf(profiles=['medium', 'short'])\n"
        "def test_perf(llmperf):\n    llmperf.check()\n"
    )
    result = pytester.runpytest("--collect-only", "-q", "--engine=vllm")
    result.stdout.fnmatch_lines(["*test_perf[[]short[]]", "*test_perf[[]medium[]]"])
    assert "sharegpt" not in result.stdout.str()


def test_engine_other_than_vllm_needs_a_model(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest("--engine=sglang", "--llmperf-profile=short")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--model is required with --engine=sglang*"])


def test_dry_run_prints_the_seed_command_and_starts_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest_subprocess(
        "--engine=trtllm",
        "--model=Qwen/Qwen3-32B",
        "--engine-args=--max_seq_len=40960 --enable_chunked_prefill",
        "--llmperf-dry-run",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "[[]trtllm[]]",
            "command: trtllm-serve Qwen/Qwen3-32B --max_seq_len=40960 --enable_chunked_prefill "
            "--host 127.0.0.1 --port *",
            "*nothing was started*",
        ]
    )
    assert "passed" not in result.stdout.str()


def test_dry_run_of_mindie_shows_the_generated_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest_subprocess(
        "--engine=mindie",
        "--model=Qwen/Qwen3-30B-A3B",
        "--engine-args=--enable-prefix-caching",
        "--llmperf-dry-run",
    )
    assert result.ret == 0
    text = result.stdout.str()
    assert "command: mindieservice_daemon" in text
    assert "MIES_CONFIG_JSON_PATH=" in text
    assert '"enablePrefixCache": true' in text
    assert '"modelName": "Qwen3-30B-A3B"' in text  # MindIE refuses a "/" in it
    assert '"modelWeightPath": "Qwen/Qwen3-30B-A3B"' in text


@pytest.mark.parametrize("option", ["--model", "--llmperf-tokenizer", "--baseline-dir"])
def test_a_path_value_after_a_space_that_moves_the_rootdir_is_refused_with_the_fix(
    pytester: pytest.Pytester, tiny_model_dir: Path, option: str
) -> None:
    # A project with testpaths, run against a model that lies outside it (an absolute path):
    # pytest would take the model folder for a test path and "/" for its rootdir.
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["perf"]\n')
    pytester.mkdir("perf").joinpath("test_perf.py").write_text(
        "def test_serving(llmperf):\n    llmperf.check()\n"
    )
    pytester.makepyfile(test_elsewhere="def test_not_mine():\n    pass\n")
    result = pytester.runpytest("--engine=vllm", option, str(tiny_model_dir), "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*{option} {tiny_model_dir}: pytest took * for a test path and chose * as its "
            f"rootdir instead of '{pytester.path}'*Write the value with '=': "
            f"{option}={tiny_model_dir}*"
        ]
    )


def test_a_path_value_with_equals_keeps_the_project_configuration(
    pytester: pytest.Pytester, tiny_model_dir: Path
) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["perf"]\n')
    pytester.mkdir("perf").joinpath("test_perf.py").write_text(
        "def test_serving(llmperf):\n    llmperf.check()\n"
    )
    pytester.makepyfile(test_elsewhere="def test_not_mine():\n    pass\n")
    result = pytester.runpytest("--engine=vllm", f"--model={tiny_model_dir}", "--co", "-q")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["perf/test_perf.py::test_serving[[]short[]]"])
    assert "test_not_mine" not in result.stdout.str()


def test_a_path_value_inside_the_project_after_a_space_is_harmless(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\ntestpaths = ["perf"]\n')
    pytester.mkdir("perf").joinpath("test_perf.py").write_text("def test_x():\n    pass\n")
    pytester.mkdir("tok")
    result = pytester.runpytest("--engine=vllm", "--llmperf-tokenizer", "tok", "--co", "-q")
    assert result.ret == pytest.ExitCode.OK


def test_endpoint_alone_measures_that_endpoint(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_serving(llmperf):\n    llmperf.check()\n")
    result = pytester.runpytest("--endpoint=http://127.0.0.1:9/v1", "--llmperf-dry-run")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*[[]external[]] nothing is started; requests go to *:9/v1*"])
