"""A variants run through pytest against the stand-in streaming server (no engine needed):
one server at a time, each variant's baselines under variants.<name>, a failed start shown as
failed with its error line, progress lines past the output capture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_llmperf.gate.store import baseline_path
from tests.conftest import free_port
from tests.support.files import widen_tolerances
from tests.support.stream_server import StandInProcess


@pytest.fixture(scope="module")
def standin() -> Iterator[StandInProcess]:
    with StandInProcess("--gap-ms", "1", "--no-record") as server:
        yield server


@pytest.fixture
def suite(pytester: pytest.Pytester, standin: StandInProcess, tiny_model_dir: Path) -> list[str]:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_suite="def test_serving(llmperf):\n    llmperf.check()\n")
    pytester.path.joinpath("variants.yaml").write_text(
        "variants:\n"
        f"  - {{name: external, engine: external, endpoint: '{standin.base_url}'}}\n"
        f"  - {{name: fast, engine: external, endpoint: '{standin.base_url}', reference: true}}\n"
        f"  - {{name: gone, engine: external, endpoint: 'http://127.0.0.1:{free_port()}'}}\n",
        encoding="utf-8",
    )
    return [
        "--llmperf-variants=variants.yaml",
        f"--model={tiny_model_dir}",
        "--hardware=cpu",
        "--llmperf-profile=short",
        "--num-prompts=20",
        "--llmperf-warmups=0",
        "--llmperf-startup-timeout=1",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "-p",
        "no:cacheprovider",
    ]


def test_variants_record_then_compare(
    pytester: pytest.Pytester, suite: list[str], tiny_model_dir: Path
) -> None:
    # In a subprocess: an in-process run restores sys.modules afterwards, and a later run that
    # imports httpcore anew gets exception classes httpx no longer maps.
    first = pytester.runpytest_subprocess(*suite, "--update-baselines")
    first.assert_outcomes(passed=2, errors=1)
    path = baseline_path(pytester.path / "baselines", "cpu", str(tiny_model_dir), "external")
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    # Named like its engine: the file's profiles; any other name: variants.<name>.
    assert set(document["profiles"]) == {"short"}
    assert set(document["variants"]) == {"fast"}
    fast = document["variants"]["fast"]
    assert list(fast)[:5] == ["command", "model", "engine_version", "status", "error"]
    assert fast["status"] == "ok"
    assert fast["profiles"]["short"]["metrics"]["completed"] == 20

    widen_tolerances(path)
    second = pytester.runpytest_subprocess(*suite)
    text = second.stdout.str()
    # The unreachable variant errors at setup; both measured ones are compared and pass.
    second.assert_outcomes(passed=2, errors=1)
    assert "external/short: " in text
    assert [
        line.split("-> ")[1].split()[0] for line in text.splitlines() if "/short: " in line
    ] == [
        "pass",
        "pass",
    ]
    assert "llmperf short: 20/20 requests done" in text  # past the capture, in the log
    lines = text.splitlines()
    start = lines.index("comparison (total token throughput and mean TPOT against fast):")
    table = lines[start + 1 : start + 6]
    assert table[0].split()[:4] == ["profile", "variant", "total", "tok/s"]
    assert [line.split()[1] for line in table[2:]] == ["external", "fast", "gone"]
    assert table[3].split()[3] == "-"  # the reference itself has no change
    assert table[2].split()[3].endswith("%")
    gone = table[4]
    assert "failed" in gone
    assert "--endpoint http://127.0.0.1:" in gone
    assert "is not serving" in gone
    assert "gone: failed to start: --endpoint http://127.0.0.1:" in text
