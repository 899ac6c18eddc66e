"""--llmperf-ab's options and the variants file's engine_bin/env keys: bad input is a usage
error that names the option or the file and key; good input reaches the launch plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.config import Settings
from pytest_llmperf.engines.session import plan_launch
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.variants import parse_variants, settings_for
from tests.support.budgets import named_budgets, own_budgets
from tests.support.usage import assert_usage_error

ENGINES = ("vllm", "sglang", "external")


def test_help_documents_the_ab_options(pytester: pytest.Pytester) -> None:
    text = pytester.runpytest("--help").stdout.str()
    for option in (
        "--llmperf-ab ",
        "--llmperf-ab-candidate-args=",
        "--llmperf-ab-budget=",
        "--llmperf-ab-minutes=",
        "--llmperf-ab-restart ",
    ):
        assert option in text, option
    assert "llmperf_ab (" in text


def test_help_names_the_profiles_with_a_budget_of_their_own(pytester: pytest.Pytester) -> None:
    # The help restates profiles.yaml by hand (loading it at every start would cost more).
    text = " ".join(pytester.runpytest("--help").stdout.str().split())
    budget_help = text.split("--llmperf-ab-budget=")[1].split("--llmperf-ab-minutes=")[0]
    assert named_budgets(budget_help) == own_budgets()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--engine=vllm", "--llmperf-ab"], "*--llmperf-ab: needs a candidate besides*"),
        (
            ["--engine=vllm,sglang", "--llmperf-ab", "--llmperf-ab-budget=0"],
            "*--llmperf-ab-budget: expected a positive integer, got '0'*",
        ),
        (
            ["--engine=vllm,sglang", "--llmperf-ab", "--llmperf-ab-minutes=-2"],
            "*--llmperf-ab-minutes: expected a positive number of minutes*",
        ),
        (
            ["--engine=vllm", "--llmperf-ab-candidate-args=--x 'open"],
            "*--llmperf-ab-candidate-args: cannot split*",
        ),
        (
            ["--engine=vllm,sglang", "--llmperf-ab-candidate-args=--max-num-seqs 1"],
            "*--llmperf-ab-candidate-args: it builds B from the one configuration*",
        ),
        (
            ["--engine=vllm,sglang", "--llmperf-ab", "--update-baselines"],
            "*--update-baselines with --llmperf-ab*",
        ),
        (
            ["--engine=vllm,external", "--endpoint=http://127.0.0.1:9", "--llmperf-ab-restart"],
            "*--llmperf-ab-restart: an endpoint is a server the plugin does not start*",
        ),
    ],
)
def test_bad_ab_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], expected: str
) -> None:
    assert_usage_error(pytester, args, expected)


def test_candidate_args_make_a_candidate_variant(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nllmperf_ab = true\n")
    pytester.makepyfile(
        "def test_x(llmperf_settings):\n"
        "    names = [(v.name, v.reference, v.engine_args) for v in llmperf_settings.variants]\n"
        "    assert llmperf_settings.ab\n"
        "    assert names == [('vllm', True, ()), ('candidate', False, ('--max-num-seqs', '1'))]\n"
    )
    result = pytester.runpytest(
        "--engine=vllm", "--llmperf-ab-candidate-args=--max-num-seqs 1", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("engine_bin: ''", "variant 'b'.engine_bin: expected the path"),
        ("engine_bin: [a]", "variant 'b'.engine_bin: expected the path"),
        ("env: [A]", "variant 'b'.env: expected a mapping of NAME: value"),
        ("env: {'1BAD': x}", "variant 'b'.env: '1BAD' is not an environment variable name"),
        ("env: {GOOD: [1]}", "variant 'b'.env.GOOD: expected a string or a number"),
        ("env: {GOOD: true}", "variant 'b'.env.GOOD: expected a string or a number"),
    ],
)
def test_bad_engine_bin_and_env_name_the_file_and_key(entry: str, expected: str) -> None:
    text = f"variants:\n  - {{name: a, engine: vllm}}\n  - {{name: b, engine: vllm, {entry}}}\n"
    with pytest.raises(ConfigError) as raised:
        parse_variants(text, Path("ab.yaml"), ENGINES)
    assert str(raised.value).startswith("--llmperf-variants ab.yaml: ")
    assert expected in str(raised.value)


def test_engine_bin_and_env_reach_the_launch_plan(tmp_path: Path) -> None:
    text = (
        "variants:\n"
        "  - {name: main, engine: vllm}\n"
        "  - {name: pr, engine: vllm, engine_bin: /opt/pr/bin/python,"
        " env: {VLLM_CPU_OMP_THREADS_BIND: '0', EXTRA: 3}}\n"
    )
    main, pr = parse_variants(text, Path("ab.yaml"), ENGINES)
    settings = Settings(engines=("vllm",), model=str(tmp_path), variants=(main, pr))
    _, plan, _ = plan_launch(settings_for(settings, pr), "vllm", tmp_path / "pr")
    assert plan.argv[0] == "/opt/pr/bin/python"
    assert plan.env["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    assert plan.env["EXTRA"] == "3"
    _, reference_plan, _ = plan_launch(settings_for(settings, main), "vllm", tmp_path / "main")
    assert reference_plan.argv[0] != "/opt/pr/bin/python"
    assert "EXTRA" not in reference_plan.env
