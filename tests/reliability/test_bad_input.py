"""Bad input: each mistake is a clear error that names the cause, and nothing is written.

The plugin runs as CI runs it, a separate pytest process in a scratch project. Every run asks
for an update of the baselines and a JSON report, so "nothing written" is checked where it
would matter most. Mistakes that can only be seen once a server answers go through the fault
proxy (passing everything) in front of the real vLLM server, which also counts the load
requests: a bad file must stop the test before any load is sent.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import requires_vllm
from tests.reliability.helpers import (
    PROFILES_YAML,
    Project,
    external_args,
    file_hashes,
    make_project,
    run_pytest,
    seed_baseline,
)
from tests.support.fault_proxy import FaultProxy

WRITES = ["--update-baselines", "--llmperf-json=out/results.json"]


def _nothing_written(project: Project, before: dict[str, str]) -> None:
    assert file_hashes(project.baselines) == before
    assert not (project.root / "out").exists()


# -- mistakes seen before anything starts --------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--engine=vllm", "--llmperf-profile=nope"],
            "unknown profile(s) 'nope' (--llmperf-profile); valid profiles are sharegpt, short,",
        ),
        (
            ["--engine=tgi", "--llmperf-profile=tiny"],
            "unknown engine 'tgi' (--engine): valid engines are",
        ),
        (["--engine=vllm", "--num-prompts=0"], "--num-prompts: expected a positive integer"),
        (["--engine=vllm", "--num-prompts=-8"], "--num-prompts: expected a positive integer"),
        (["--engine=vllm", "--llmperf-repeat=0"], "--llmperf-repeat: expected a positive integer"),
        (
            ["--engine=vllm", "--llmperf-max-failed=-1"],
            "--llmperf-max-failed: expected a non-negative integer, got '-1'",
        ),
        (
            ["--engine=vllm", "--llmperf-warmups=-2"],
            "--llmperf-warmups: expected a non-negative integer",
        ),
        (
            ["--engine=vllm", "--llmperf-request-timeout=0"],
            "--llmperf-request-timeout: expected a positive number of seconds",
        ),
    ],
    ids=[
        "unknown-profile",
        "unknown-engine",
        "zero-prompts",
        "negative-prompts",
        "zero-repeat",
        "negative-budget",
        "negative-warmups",
        "zero-timeout",
    ],
)
def test_bad_option_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    project = make_project(tmp_path)
    seed_baseline(project.baseline_file("tiny-qwen3", "vllm"), {"tiny": 100.0})
    before = file_hashes(project.baselines)
    run = run_pytest(project, [*args, *WRITES], timeout=120)
    assert run.returncode == 4, run  # pytest's usage error: no test ran
    assert expected in run.output, run.log
    assert run.seconds < 30, run.log
    _nothing_written(project, before)


def test_unknown_engine_lists_every_valid_engine(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    run = run_pytest(project, ["--engine=vllm,tensorrt", *WRITES], timeout=120)
    assert run.returncode == 4, run.log
    for name in ("vllm", "sglang", "trtllm", "mindie", "llamacpp", "external"):
        assert name in run.output.split("valid engines are", 1)[1].splitlines()[0], run.log


def test_unknown_profile_lists_the_users_profiles_too(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    run = run_pytest(project, ["--engine=vllm", "--llmperf-profile=tiny,huge", *WRITES])
    assert run.returncode == 4, run.log
    valid = run.output.split("valid profiles are", 1)[1].splitlines()[0]
    for name in ("short", "very-long", "tiny", "tiny-a", "busy"):
        assert name in valid, run.log


def test_marker_naming_an_unknown_profile_is_a_usage_error(tmp_path: Path) -> None:
    source = textwrap.dedent(
        """
        import pytest

        @pytest.mark.llmperf(profiles=["tiny", "tinny"])
        def test_perf(llmperf):
            llmperf.check()
        """
    )
    project = make_project(tmp_path, source)
    run = run_pytest(project, ["--engine=vllm", *WRITES], timeout=120)
    assert run.returncode != 0, run.log
    assert "@pytest.mark.llmperf names unknown profile(s) tinny; valid profiles are" in run.output
    assert not (project.root / "out").exists()


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("num_prompts: 0", "profile 'bad': num_prompts must be a positive integer, got 0"),
        ("num_prompts: -4", "profile 'bad': num_prompts must be a positive integer, got -4"),
        ("input_len: 0", "profile 'bad': input_len must be a positive integer, got 0"),
        ("max_concurrency: 0", "profile 'bad': max_concurrency must be a positive integer"),
        ("request_rate: -1", "profile 'bad': request_rate must be a positive number or 'inf'"),
        ("num_promts: 8", "profile 'bad': unknown key(s) num_promts; valid keys are"),
    ],
)
def test_bad_profile_file_names_file_profile_and_key(
    tmp_path: Path, profile: str, expected: str
) -> None:
    settings = {"dataset": "random", "input_len": 32, "output_len": 8, "num_prompts": 8}
    key = profile.split(": ")[0]
    settings.pop("num_prompts" if key == "num_promts" else key, None)
    lines = [f"    {k}: {v}" for k, v in settings.items()] + [f"    {profile}"]
    project = make_project(tmp_path, profiles="profiles:\n  bad:\n" + "\n".join(lines) + "\n")
    run = run_pytest(project, ["--engine=vllm", "--llmperf-profile=bad", *WRITES], timeout=120)
    assert run.returncode == 4, run.log
    assert f"{project.root / 'profiles.yaml'}: {expected}" in run.output, run.log
    assert not (project.root / "out").exists()
    assert file_hashes(project.baselines) == {}


def test_malformed_profile_yaml_names_file_and_line(tmp_path: Path) -> None:
    project = make_project(tmp_path, profiles="profiles:\n  bad:\n    dataset: [random\n")
    run = run_pytest(project, ["--engine=vllm", *WRITES], timeout=120)
    assert run.returncode == 4, run.log
    assert f"{project.root / 'profiles.yaml'} line 4: not valid YAML" in run.output, run.log


# -- mistakes seen once a server answers ---------------------------------------------------

MALFORMED_YAML = textwrap.dedent(
    """\
    schema: 1
    hardware: cpu
    profiles:
      tiny:
        metrics: {total_token_throughput: 100.0, mean_tpot_ms: [5.0}
    """
)


def _file_for(project: Project, model: Path) -> Path:
    path = project.baseline_file(str(model))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.e2e
@requires_vllm
@pytest.mark.parametrize("update", [False, True], ids=["gate", "update"])
def test_malformed_baseline_yaml_names_file_and_line(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path, update: bool
) -> None:
    project = make_project(tmp_path)
    path = _file_for(project, tiny_model_dir)
    path.write_text(MALFORMED_YAML)
    before = file_hashes(project.baselines)
    args = [*external_args(proxy.url, tiny_model_dir), "--llmperf-json=out/results.json"]
    run = run_pytest(project, args + (["--update-baselines"] if update else []))
    assert run.returncode == 1, run.log
    assert f"{path}: line 5, column 64: not valid YAML" in run.output, run.log
    assert "restore it from version control" in run.output
    assert proxy.stats()["load_requests"] == 0, "a broken baseline must stop the test first"
    assert file_hashes(project.baselines) == before


@pytest.mark.e2e
@requires_vllm
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("schema: 2\nprofiles: {}\n", "schema: unsupported schema 2 (this plugin reads 1)"),
        ("schema: 1\nprofiles: [tiny]\n", "profiles: expected a mapping of name → entry"),
        ("- tiny\n- short\n", "top level: expected a mapping with 'profiles:'"),
        (
            "profiles:\n  tiny:\n    metrics: {total_token_throughput: fast}\n",
            "profiles.tiny.metrics.total_token_throughput: expected a number, got 'fast'",
        ),
        (
            "profiles:\n  tiny:\n    status: okay\n    metrics: {mean_tpot_ms: 5}\n",
            "profiles.tiny.status: expected 'ok' or 'failed', got 'okay'",
        ),
        (
            "profiles:\n  tiny:\n    metrics: {mean_tpot_ms: 5}\n"
            "    tolerances: {mean_tpot_ms: -1}\n",
            "profiles.tiny.tolerances.mean_tpot_ms: a tolerance cannot be negative",
        ),
        ("profiles:\n  tiny:\n    status: ok\n", "profiles.tiny.metrics: an 'ok' entry needs"),
    ],
    ids=["schema", "profiles-list", "top-list", "metric-text", "status", "tolerance", "no-metrics"],
)
def test_baseline_with_a_wrong_schema_is_named_and_kept(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path, content: str, expected: str
) -> None:
    project = make_project(tmp_path)
    path = _file_for(project, tiny_model_dir)
    path.write_text(content)
    before = file_hashes(project.baselines)
    run = run_pytest(project, [*external_args(proxy.url, tiny_model_dir), *WRITES])
    assert run.returncode == 1, run.log
    assert f"{path}: {expected}" in run.output, run.log
    assert proxy.stats()["load_requests"] == 0, run.log
    _nothing_written(project, before)


SHAREGPT_PROFILE = PROFILES_YAML + "  sg:\n    dataset: sharegpt\n    num_prompts: 4\n"


@pytest.mark.e2e
@requires_vllm
def test_missing_sharegpt_file_says_which_option_and_where_it_comes_from(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project = make_project(tmp_path, profiles=SHAREGPT_PROFILE)
    args = [a for a in external_args(proxy.url, tiny_model_dir) if "profile" not in a]
    run = run_pytest(project, [*args, "--llmperf-profile=sg", *WRITES])
    assert run.returncode == 1, run.log
    assert "profile 'sg' reads a ShareGPT file but none was given" in run.output, run.log
    assert "--llmperf-sharegpt" in run.output
    assert "ShareGPT_V3_unfiltered_cleaned_split.json" in run.output
    assert "anon8231489123/ShareGPT_Vicuna_unfiltered" in run.output
    assert proxy.stats()["load_requests"] == 0
    _nothing_written(project, {})

    missing = tmp_path / "data" / "ShareGPT_V3_unfiltered_cleaned_split.json"
    run = run_pytest(
        project, [*args, "--llmperf-profile=sg", f"--llmperf-sharegpt={missing}", *WRITES]
    )
    assert run.returncode == 1, run.log
    assert f"ShareGPT file {missing}:" in run.output, run.log
    assert "--llmperf-sharegpt PATH" in run.output
    assert "the plugin never downloads anything" in run.output
    assert proxy.stats()["load_requests"] == 0
    _nothing_written(project, {})
