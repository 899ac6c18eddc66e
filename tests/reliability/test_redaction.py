"""Credentials given on the command line are written and printed nowhere.

A session passes three secrets the ways users do: ``--engine-args "--api-key S --hf-token=S"``
for the started engine, ``--endpoint http://user:S@host`` for a running one, and an API key
through ``--llmperf-api-key-env``. The engine is a stand-in that echoes its argv into its log
the way vLLM logs its arguments, then serves. After a recording run with every report, a
failing run (its accept command), a dry run and an engine that fails to start (its log tail
quoted in the error), no file under the project (pytest's temporary folder included) and no
line of output holds any of the secrets, while the engine got them unchanged.
"""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.helpers import (
    REPORTS,
    InnerRun,
    Project,
    files_containing,
    make_project,
    run_pytest,
)
from tests.support.stream_server import StandInProcess

STREAM_SERVER = Path(__file__).resolve().parents[1] / "support" / "stream_server.py"
KEY_VARIABLE = "LLMPERF_TEST_REDACTION_KEY"

# A vLLM stand-in: logs its argv as vLLM logs its arguments, keeps it for the test, then
# serves on the port the plugin chose (or exits, to fail the start).
FAKE_VLLM = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    print("non-default args:", sys.argv[1:], flush=True)
    with open(os.environ["FAKE_ARGV_FILE"], "w") as out:
        json.dump(sys.argv, out)
    if os.environ.get("FAKE_FAIL"):
        print("error: cannot start", flush=True)
        sys.exit(3)
    port = sys.argv[sys.argv.index("--port") + 1]
    os.execv(sys.executable, [sys.executable, {server!r}, "--port", port, "--gap-ms", "1",
                              "--no-record"])
    """
)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[StandInProcess]:
    with StandInProcess("--gap-ms", "1", "--no-record") as server:
        yield server


def _secret(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex}"


def test_secrets_in_engine_args_endpoint_and_api_key_are_written_nowhere(
    tmp_path: Path, endpoint: StandInProcess, tiny_model_dir: Path
) -> None:
    arg_key, hf_token, url_password, api_key = (
        _secret(k) for k in ("argkey", "hftoken", "urlpass", "apikey")
    )
    secrets = [arg_key, hf_token, url_password, api_key]
    engine = tmp_path / "bin" / "fake-vllm"
    engine.parent.mkdir()
    engine.write_text(FAKE_VLLM.format(python=sys.executable, server=str(STREAM_SERVER)))
    engine.chmod(0o755)
    argv_file = tmp_path / "argv.json"
    project: Project = make_project(tmp_path / "project")
    host = endpoint.base_url.removeprefix("http://")
    args = [
        "--engine=vllm,external",
        f"--llmperf-engine-bin={engine}",
        f"--engine-args={shlex.join(['--api-key', arg_key, f'--hf-token={hf_token}'])}",
        f"--endpoint=http://llmperf:{url_password}@{host}/v1",
        f"--model={tiny_model_dir}",
        f"--llmperf-api-key-env={KEY_VARIABLE}",
        "--hardware=cpu",
        "--llmperf-warmups=1",
        "--baseline-dir=baselines",
    ]
    env = {KEY_VARIABLE: f"  {api_key}\n", "FAKE_ARGV_FILE": str(argv_file)}

    runs: list[InnerRun] = []
    recorded = run_pytest(
        project, [*args, "--llmperf-profile=tiny", *REPORTS, "--update-baselines"], env=env
    )
    runs.append(recorded)
    assert recorded.returncode == 0, recorded.log
    engine_argv = json.loads(argv_file.read_text())
    assert engine_argv[engine_argv.index("--api-key") + 1] == arg_key  # as given
    assert f"--hf-token={hf_token}" in engine_argv
    command = yaml_command(project, tiny_model_dir)
    assert "--api-key '***' '--hf-token=***'" in command, command

    no_baseline = run_pytest(
        project, [*args, "--llmperf-profile=tiny-a", "--llmperf-first-run=fail", *REPORTS], env=env
    )
    runs.append(no_baseline)
    assert no_baseline.returncode == 1, no_baseline.log
    assert "to record this machine's numbers: pytest" in no_baseline.output, no_baseline.log
    assert "--llmperf-profile tiny-a --update-baselines" in no_baseline.output

    dry = run_pytest(project, [*args, "--llmperf-dry-run"], env=env)
    runs.append(dry)
    assert "--api-key '***'" in dry.output, dry.log
    assert "requests go to http://***@" in dry.output, dry.log

    started_only = [a for a in args if not a.startswith(("--engine=", "--endpoint="))]
    failed = run_pytest(
        project,
        [*started_only, "--engine=vllm", "--llmperf-profile=tiny", "--basetemp=tmp", "-v"],
        env={**env, "FAKE_FAIL": "1"},
    )
    runs.append(failed)
    assert failed.returncode == 1, failed.log
    assert "exited with code 3 during start-up" in failed.output, failed.log
    assert "non-default args:" in failed.output  # the quoted log line, secrets masked

    for run in runs:
        leaked = [s for s in secrets if s in run.output]
        assert not leaked, run.log
    # The engine's own log holds what the engine printed (SECURITY.md): the plugin never
    # quotes it unmasked, and it is the only file that may hold a secret.
    holding = files_containing(project.root, *secrets)
    assert holding, "the stand-in engine logs its arguments: the scan must see that log"
    assert all(name.endswith("vllm-server.log") for name in holding), holding
    for name in ("results.json", "summary.md", "report.html", "history.jsonl", "junit.xml"):
        assert (project.root / "out" / name).stat().st_size > 0


def yaml_command(project: Project, model: Path) -> str:
    import yaml

    document = yaml.safe_load(project.baseline_file(str(model), engine="vllm").read_text())
    return str(document["profiles"]["tiny"]["command"])


BROKEN_METRICS = textwrap.dedent(
    """
    import pytest_llmperf.measure.metrics

    def broken(*args, **kwargs):
        raise RuntimeError("an unexpected bug while computing metrics")

    pytest_llmperf.measure.metrics.compute_metrics = broken
    """
)


def test_showlocals_on_an_unexpected_error_does_not_print_the_key(
    tmp_path: Path, endpoint: StandInProcess, tiny_model_dir: Path
) -> None:
    project = make_project(tmp_path)
    (project.root / "conftest.py").write_text(BROKEN_METRICS)
    key = _secret("sk")
    run = run_pytest(
        project,
        [
            "--engine=external",
            f"--endpoint={endpoint.base_url}",
            f"--model={tiny_model_dir}",
            "--hardware=cpu",
            "--llmperf-warmups=0",
            "--llmperf-profile=tiny",
            f"--llmperf-api-key-env={KEY_VARIABLE}",
            "--showlocals",
            "--tb=long",
        ],
        env={KEY_VARIABLE: key},
    )
    assert run.returncode == 1, run.log
    assert "an unexpected bug while computing metrics" in run.output, run.log
    assert "api_key    = '***'" in run.output, run.log  # the locals were printed, masked
    assert key not in run.output


@pytest.mark.parametrize("name", ["hf_AbCdEfGhIjKlMn", "ghp_0123456789abcdefAB", "sk_live_51Hx"])
def test_a_token_given_as_the_variable_name_is_refused_and_not_echoed(
    tmp_path: Path, name: str
) -> None:
    run = run_pytest(
        make_project(tmp_path), ["--engine=vllm", f"--llmperf-api-key-env={name}"], timeout=120
    )
    assert run.returncode == 4, run.log
    assert "expected the NAME of an environment variable" in run.output, run.log
    assert name not in run.output
