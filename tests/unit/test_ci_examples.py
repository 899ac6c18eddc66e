"""The CI examples in docs/ci/ that docs/ci.md tells users to copy.

Every pytest command line in them must parse with the options the plugin (and pytest)
registers, every variants file they write must be a valid one, and the GitHub workflows must
keep the security rules that zizmor and actionlint check (those two run over them in
`quickstart.py lint`; the last tests here show that they catch what they are there for).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import quickstart
from pytest_llmperf import engines
from pytest_llmperf.variants import parse_variants

ROOT = Path(__file__).resolve().parents[2]
GITHUB = sorted((ROOT / "docs/ci/github").glob("*.yml"))
GITLAB = sorted((ROOT / "docs/ci/gitlab").glob("*.yml"))
GUIDE = ROOT / "docs/ci.md"


_PYTEST = re.compile(r"""(?:^|[\s/"'])(?:python3?"?\s+-m\s+)?pytest(?=\s|$)""")
_SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
_HEREDOC = re.compile(r"<<\s*VARIANTS\n(.*?)\n\s*VARIANTS(?:\n|$)", re.S)
_SHELL_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def _load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(document, dict), f"{path}: not a mapping"
    return document


def _scripts(path: Path) -> Iterator[tuple[str, str]]:
    """(job name, script text) of every run: step (GitHub) or script line (GitLab)."""
    document = _load(path)
    if path.parent.name == "github":
        for job_name, job in document["jobs"].items():
            for step in job.get("steps", []):
                if "run" in step:
                    yield job_name, step["run"]
        return
    for job_name, job in document.items():
        if not isinstance(job, dict):
            continue
        for key in ("before_script", "script", "after_script"):
            for line in job.get(key, []):
                yield job_name, line


def _pytest_commands(text: str) -> Iterator[list[str]]:
    """The arguments after `pytest` of each pytest command line in a shell script."""
    for line in text.replace("\\\n", " ").splitlines():
        match = _PYTEST.search(line)
        if match:
            yield shlex.split(line[match.end() :])


def _guide_blocks() -> Iterator[str]:
    """The fenced blocks of docs/ci.md without a language: the command lines it shows."""
    block: list[str] | None = None
    language = ""
    for line in GUIDE.read_text(encoding="utf-8").splitlines():
        fence = line.strip()
        if not fence.startswith("```"):
            if block is not None:
                block.append(line)
        elif block is None:
            block, language = [], fence[3:].strip()
        else:
            if not language:
                yield "\n".join(block)
            block = None


def _all_commands() -> list[tuple[str, str, list[str]]]:
    found = []
    for path in [*GITHUB, *GITLAB]:
        for job, text in _scripts(path):
            for args in _pytest_commands(text):
                found.append((path.name, job, args))
    for block in _guide_blocks():
        for args in _pytest_commands(block):
            found.append((GUIDE.name, "text", args))
    return found


def _option_name(token: str) -> str:
    return token.split("=", 1)[0]


def test_the_examples_exist_and_parse_as_yaml() -> None:
    assert [p.name for p in GITHUB] == ["nightly-gpu.yml", "pr-ab-gate.yml"]
    assert [p.name for p in GITLAB] == ["perf.gitlab-ci.yml"]
    for path in [*GITHUB, *GITLAB]:
        _load(path)


def test_every_pytest_command_line_parses_with_the_registered_options(
    pytester: pytest.Pytester,
) -> None:
    commands = _all_commands()
    # A/B gate, nightly gate, recording: in both CI systems; two in the guide.
    assert len(commands) >= 8, commands
    for file_name, job, args in commands:
        try:
            pytester.parseconfig(*args)
        except pytest.UsageError as exc:
            raise AssertionError(f"{file_name} job {job}: pytest refused {args}: {exc}") from None


def test_the_ab_jobs_use_the_ab_interface() -> None:
    ab_jobs = {(f, j) for f, j, args in _all_commands() if "--llmperf-ab" in args}
    assert ab_jobs == {
        ("pr-ab-gate.yml", "ab-gate"),
        ("perf.gitlab-ci.yml", "perf-ab"),
        ("ci.md", "text"),
    }
    for _, _, args in _all_commands():
        if "--llmperf-ab" in args:
            # B is another variant, or the reference plus engine arguments.
            names = {_option_name(a) for a in args}
            assert names & {"--llmperf-variants", "--llmperf-ab-candidate-args"}, args
        if "--update-baselines" in args:
            # A recording run neither gates nor compares: it writes files for review.
            assert "--llmperf-ab" not in args
            assert "--llmperf-context=nightly" not in args


def _variants_files(path: Path) -> Iterator[tuple[str, str]]:
    document = _load(path)
    env = document.get("env") or document.get("variables") or {}
    for job, text in _scripts(path):
        for body in _HEREDOC.findall(text):
            # The shell expands the variables: the file's own values, else a path.
            expanded = _SHELL_VARIABLE.sub(
                lambda m: str(env.get(m.group(1), f"/ci/{m.group(1)}")), body
            )
            yield job, expanded


@pytest.mark.parametrize("path", [*GITHUB, *GITLAB], ids=lambda p: p.name)
def test_the_variants_files_the_ab_jobs_write_are_valid(path: Path) -> None:
    files = list(_variants_files(path))
    if path.name == "nightly-gpu.yml":
        assert files == []
        return
    assert len(files) == 1, files
    raw = yaml.safe_load(files[0][1])["variants"]
    # A and B differ by the engine build: one executable each, A the reference.
    assert [v.get("reference", False) for v in raw] == [True, False]
    binaries = [v["engine_bin"] for v in raw]
    assert len(set(binaries)) == 2, binaries
    variants = parse_variants(yaml.safe_dump({"variants": raw}), path, engines.engine_names())
    assert [v.reference for v in variants] == [True, False]


@pytest.mark.parametrize("path", GITHUB, ids=lambda p: p.name)
def test_github_workflows_keep_the_security_rules(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    document = _load(path)
    triggers = document[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request_target" not in triggers, "runs pull-request code with secrets"
    assert document["permissions"] == {"contents": "read"}
    for line in re.findall(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", text, re.M):
        target, comment = line
        assert _SHA_PIN.match(target), f"{path.name}: {target} is not pinned by commit SHA"
        assert re.search(r"#\s*v\d", comment), f"{path.name}: {target} lacks its version comment"
    for job in document["jobs"].values():
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
            # Untrusted text reaches a script only through the environment, never spliced in.
            assert "${{" not in step.get("run", ""), step
    writers = {n for n, j in document["jobs"].items() if "permissions" in j}
    assert writers <= {"propose-baselines"}
    # A self-hosted runner keeps what a job leaves behind: never one for pull-request code.
    self_hosted = [n for n, j in document["jobs"].items() if "self-hosted" in str(j["runs-on"])]
    if self_hosted:
        assert "pull_request" not in triggers, f"{path.name}: {self_hosted} run pull requests"


def test_only_the_proposal_jobs_can_write_and_they_open_a_review() -> None:
    (github_nightly,) = [p for p in GITHUB if p.name == "nightly-gpu.yml"]
    jobs = _load(github_nightly)["jobs"]
    assert jobs["propose-baselines"]["permissions"] == {
        "contents": "write",
        "pull-requests": "write",
    }
    assert "self-hosted" not in str(jobs["propose-baselines"]["runs-on"])
    proposal = "\n".join(s.get("run", "") for s in jobs["propose-baselines"]["steps"])
    assert "gh pr create" in proposal
    assert 'git push origin "$branch"' in proposal
    gitlab = _load(GITLAB[0])
    holders = [name for name, job in gitlab.items() if "BASELINES_PUSH_TOKEN" in str(job)]
    assert holders == ["perf-propose-baselines"]
    assert "merge_request.create" in str(gitlab["perf-propose-baselines"]["script"])
    assert gitlab["perf-propose-baselines"]["environment"]["name"] == "llmperf-baselines"


def test_gitlab_jobs_are_consistent() -> None:
    document = _load(GITLAB[0])
    stages = document["stages"]
    jobs = {n: j for n, j in document.items() if isinstance(j, dict) and n != "variables"}
    for name, job in jobs.items():
        merged = {**document.get(job.get("extends", ""), {}), **job}
        assert merged["stage"] in stages, name
        if not name.startswith("."):
            assert merged.get("script"), f"{name} has no script"
            assert merged.get("rules"), f"{name} runs in every pipeline"
        for need in job.get("needs", []):
            assert need in jobs, f"{name} needs unknown job {need}"
    matrix = document[".perf-gpu"]["parallel"]["matrix"]
    assert {entry["ENGINE"] for entry in matrix} == {"vllm", "sglang", "trtllm"}
    assert all(isinstance(entry["MACHINE"], list) for entry in matrix)
    assert "$MACHINE" in document[".perf-gpu"]["tags"][0]
    ab_rules = document["perf-ab"]["rules"]
    assert ab_rules == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]


# --- the linters that `quickstart.py lint` runs over the GitHub workflows ---------------------

BIN = Path(sys.executable).parent


def _lint(files: list[Path], home: Path) -> list[subprocess.CompletedProcess[str]]:
    # Only the environment's own tools (shellcheck beside actionlint), and caches in a
    # temporary home, never in the repository.
    env = {"PATH": os.pathsep.join([str(BIN), "/usr/bin", "/bin"]), "HOME": str(home)}
    return [
        subprocess.run(step, capture_output=True, text=True, env=env, timeout=120)
        for step in quickstart.workflow_lint_steps(BIN, [str(f) for f in files])
    ]


needs_linters = pytest.mark.skipif(
    not all(shutil.which(name, path=str(BIN)) for name in ("actionlint", "zizmor")),
    reason="actionlint and zizmor come with the dev extra: pip install -e '.[dev]'",
)


@needs_linters
def test_the_linters_pass_the_examples(tmp_path: Path) -> None:
    for done in _lint(GITHUB, tmp_path):
        assert done.returncode == 0, done.args[0] + "\n" + done.stdout + done.stderr


@needs_linters
def test_the_linters_catch_an_unpinned_action_and_untrusted_input(tmp_path: Path) -> None:
    source = (ROOT / "docs/ci/github/pr-ab-gate.yml").read_text(encoding="utf-8")
    broken = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v7", source, count=1)
    broken = broken.replace(
        'cat "$RUNNER_TEMP/ab.yaml"',
        'echo "${{ github.event.pull_request.title }}"',
    )
    assert broken != source
    workflow = tmp_path / "broken.yml"
    workflow.write_text(broken, encoding="utf-8")
    actionlint, zizmor = _lint([workflow], tmp_path)
    assert actionlint.returncode != 0
    assert "github.event.pull_request.title" in actionlint.stdout
    assert "potentially untrusted" in actionlint.stdout
    assert zizmor.returncode != 0
    assert "unpinned-uses" in zizmor.stdout + zizmor.stderr
    assert "template-injection" in zizmor.stdout + zizmor.stderr
