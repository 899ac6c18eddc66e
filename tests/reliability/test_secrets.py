"""Secrets and untrusted names: the API key travels only in the Authorization header and is
written nowhere; engine arguments never pass through a shell; names in paths stay inside.

The key check is a scan: after runs that pass, fail, record a baseline and write every report
the plugin offers, no file in the project or pytest's temporary folder, and no line of
output, contains the key, even though the proxy makes the "server" echo the key back in an
error message on purpose.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from pytest_llmperf.gate import store
from pytest_llmperf.gate.modelkey import model_slug
from tests.conftest import requires_vllm
from tests.reliability.helpers import (
    PERF_TEST,
    REPORTS,
    Project,
    external_args,
    files_containing,
    make_project,
    run_pytest,
)
from tests.support.fault_proxy import Fault, FaultPlan, FaultProxy

KEY_VARIABLE = "LLMPERF_TEST_ENDPOINT_KEY"


@pytest.mark.e2e
@requires_vllm
def test_api_key_goes_only_in_the_authorization_header_and_is_written_nowhere(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    key = f"sk-llmperf-{uuid.uuid4().hex}"
    project = make_project(tmp_path)
    args = [
        *external_args(proxy.url, tiny_model_dir),
        f"--llmperf-api-key-env={KEY_VARIABLE}",
        *REPORTS,
    ]
    env = {KEY_VARIABLE: key}
    # A server that echoes the credentials it got in an error, once per run.
    echo = Fault("status", status=401, message="invalid key {authorization}")
    proxy.set_plan(FaultPlan(requests={3: echo}))
    recorded = run_pytest(project, [*args, "--update-baselines", "--llmperf-max-failed=1"], env=env)
    assert recorded.returncode == 0, recorded.log
    sent = proxy.requests
    proxy.set_plan(FaultPlan(requests={0: echo, 5: echo}))
    failed = run_pytest(project, args, env=env)
    assert failed.returncode == 1, failed.log
    assert "2 of 8 requests failed" in failed.output, failed.log
    assert "HTTP 401: invalid key Bearer ***" in failed.output, failed.log
    sent += proxy.requests

    # What reached the server: the key in every request's Authorization header (the load,
    # the model list and the version probe alike), nowhere else.
    load = [r for r in sent if r["ordinal"] is not None]
    assert len(load) == 16
    assert "/version" in {r["path"] for r in sent}
    for request in sent:
        headers = dict((k.lower(), v) for k, v in request["headers"])
        assert headers["authorization"] == f"Bearer {key}", request["path"]
        others = [v for k, v in request["headers"] if k.lower() != "authorization"]
        assert key not in request["path"] + request["body"] + "".join(others)

    # What was written and printed: never the key.
    outputs = project.root / "out"
    assert (outputs / "results.json").exists()
    assert (outputs / "junit.xml").exists()
    entry = store.load_entry(project.baseline_file(str(tiny_model_dir)), "tiny")
    assert entry is not None
    assert entry.metrics["failed"] == 1
    results = json.loads((outputs / "results.json").read_text())
    errors = [e for r in results["results"] for e in r["errors"]]
    assert errors == ["HTTP 401: invalid key Bearer ***"] * 2, errors
    assert files_containing(project.root, key) == []
    assert key not in recorded.output + failed.output


def test_unset_key_variable_is_a_clear_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE}
    run = run_pytest(
        project,
        [
            *external_args("http://127.0.0.1:9", "tiny"),
            f"--llmperf-api-key-env={KEY_VARIABLE}",
        ],
        env=env,
        timeout=120,
    )
    assert run.returncode != 0, run.log
    assert f"the environment variable {KEY_VARIABLE} is not set" in run.output, run.log


def test_a_key_given_as_the_option_value_is_refused_without_echoing_it(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    key = f"sk-{uuid.uuid4().hex}-secret"
    run = run_pytest(project, ["--engine=vllm", f"--llmperf-api-key-env={key}"], timeout=120)
    assert run.returncode == 4, run.log
    assert "expected the NAME of an environment variable" in run.output, run.log
    assert key not in run.output


# -- engine arguments are an argv list --------------------------------------------------------

FAKE_ENGINE = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys
    with open(os.environ["LLMPERF_ARGV_FILE"], "w") as out:
        json.dump(sys.argv, out)
    sys.exit(3)
    """
)


def test_engine_arguments_reach_the_process_as_an_argv_list_never_a_shell(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    engine = tmp_path / "bin" / "fake-vllm"
    engine.parent.mkdir()
    engine.write_text(FAKE_ENGINE.format(python=sys.executable))
    engine.chmod(0o755)
    marker = tmp_path / "pwned"
    hostile = [
        "--served-model-name",
        f"a b; touch {marker}-1",
        "--chat-template",
        f"$(touch {marker}-2)",
        "--tokenizer-mode",
        f"`touch {marker}-3` | cat > {marker}-4 && echo $HOME",
    ]
    project = make_project(tmp_path / "project")
    argv_file = tmp_path / "argv.json"
    run = run_pytest(
        project,
        [
            "--engine=vllm",
            f"--llmperf-engine-bin={engine}",
            f"--model={tiny_model_dir}",
            "--hardware=cpu",
            "--llmperf-profile=tiny",
            f"--engine-args={shlex.join(hostile)}",
        ],
        env={"LLMPERF_ARGV_FILE": str(argv_file)},
        timeout=120,
    )
    assert run.returncode == 1, run.log
    assert "vLLM exited with code 3 during start-up" in run.output, run.log
    argv = json.loads(argv_file.read_text())
    assert argv[0] == str(engine)
    assert argv[1:3] == ["serve", str(tiny_model_dir)]
    assert argv[3 : 3 + len(hostile)] == hostile  # each argument exactly as given, unexpanded
    assert argv[3 + len(hostile) :][:3] == ["--host", "127.0.0.1", "--port"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pwned")) == []


# -- names used in file paths --------------------------------------------------------------

HOSTILE_NAMES = [
    "../../../etc/passwd",
    "..",
    ".",
    "",
    "/",
    "/absolute/model",
    "Qwen/../../Qwen3-32B",
    "C:\\Windows\\model",
    "name\x00with-nul",
    "~root",
    " spaced  name ",
    "モデル",
    "a" * 300,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=range(len(HOSTILE_NAMES)))
def test_names_in_baseline_paths_stay_inside_the_baseline_folder(tmp_path: Path, name: str) -> None:
    root = tmp_path / "baselines"
    path = store.baseline_path(root, name, name, name)
    relative = path.relative_to(root)
    assert len(relative.parts) == 3
    for part in relative.parts:
        assert part not in ("", ".", "..")
        assert not set(part) & {"/", "\\", "\x00"}
        assert not part.startswith(".")
    assert path.resolve().is_relative_to(root.resolve())


@pytest.mark.e2e
@requires_vllm
def test_a_model_name_that_climbs_out_is_recorded_inside_the_baseline_folder(
    tmp_path: Path, proxy: FaultProxy, tiny_model_dir: Path
) -> None:
    project: Project = make_project(tmp_path / "project", PERF_TEST)
    args = [a for a in external_args(proxy.url, "x") if not a.startswith("--model")]
    run = run_pytest(
        project,
        [
            *args,
            "--model=../../../outside",
            f"--llmperf-tokenizer={tiny_model_dir}",
            "--update-baselines",
        ],
    )
    assert run.returncode == 0, run.log
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".yaml"]
    folder = model_slug("../../../outside")
    assert folder.startswith("outside-")
    assert sorted(str(p.relative_to(project.root)) for p in written) == [
        f"baselines/cpu/{folder}/external.yaml",
        "profiles.yaml",
    ]
