"""A report that cannot be written does not cost the others, and a dry run leaves nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stream_server import StandInProcess

PROFILES = "profiles:\n  mini:\n    dataset: random\n    input_len: 16\n    output_len: 8\n"
PROFILES += "    num_prompts: 4\n"
SUITE = "def test_serving(llmperf):\n    llmperf.check()\n"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandInProcess]:
    with StandInProcess("--gap-ms", "1", "--no-record") as server:
        yield server


def test_a_failing_report_is_reported_and_the_later_ones_are_still_written(
    pytester: pytest.Pytester, standin: StandInProcess, tiny_model_dir: Path
) -> None:
    pytest.importorskip("plotly")
    pytester.makeini("[pytest]\nllmperf_profiles = profiles.yaml\n")
    pytester.path.joinpath("profiles.yaml").write_text(PROFILES)
    pytester.makepyfile(test_suite=SUITE)
    unwritable = pytester.path / "history-is-a-folder"
    unwritable.mkdir()
    result = pytester.runpytest(
        "--engine=external",
        f"--endpoint={standin.base_url}",
        f"--model={tiny_model_dir}",
        "--hardware=cpu",
        "--llmperf-warmups=0",
        "--update-baselines",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "--llmperf-json=out/results.json",
        f"--llmperf-history={unwritable}",
        "--llmperf-html=out/report.html",
        "-p",
        "no:cacheprovider",
    )
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    result.stdout.fnmatch_lines(["*ERROR: the history was not written to *history-is-a-folder*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # a report asked for is missing
    assert (pytester.path / "out" / "results.json").stat().st_size > 0
    assert (pytester.path / "out" / "report.html").stat().st_size > 0  # after the history


def test_a_dry_run_leaves_no_temporary_folder(pytester: pytest.Pytester, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    pytester.makepyfile(test_suite=SUITE)
    pytester._monkeypatch.setenv("TMPDIR", str(scratch))
    result = pytester.runpytest_subprocess(
        "--engine=vllm",
        f"--model={tmp_path}",
        "--llmperf-dry-run",
        "-p",
        "no:cacheprovider",
        f"--basetemp={tmp_path / 'basetemp'}",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*command: *serve*"])
    assert sorted(p.name for p in scratch.iterdir()) == []
