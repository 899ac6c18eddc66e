"""A/B experiments through pytest (--llmperf-ab) against stand-in servers with known timings:
each verdict, the strict switch, the A,B,B,A order and a fresh prefix-cache salt per run.

A and B are stand-ins whose token gap is set on their command line: equal gaps are "same", a
tripled gap a regression, a quartered one an improvement. They are named as vLLM behind an
endpoint, so every run gets vLLM's per-run cache salt, which the order test reads back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.stream_server import StandInProcess

PROFILES = """\
profiles:
  mini:
    dataset: random
    input_len: 32
    output_len: 12
    num_prompts: 8
    max_concurrency: 4
"""
# Wide enough that a loaded two-core machine's jitter on 4 ms gaps stays inside it (at 25 %
# the throughput interval of equal servers reached 1.24 while two vLLM servers loaded the
# machine), narrow enough that a tripled or quartered gap lies far beyond it.
SUITE = """\
import pytest

@pytest.mark.llmperf(tolerances={"total_token_throughput": 40, "mean_tpot_ms": 40})
def test_serving(llmperf):
    llmperf.check()
"""
VERSION = "0.32.0"


def _standin(gap_ms: float, *extra: str) -> StandInProcess:
    return StandInProcess("--gap-ms", str(gap_ms), "--version", VERSION, *extra)


@pytest.fixture(scope="module")
def reference() -> Iterator[StandInProcess]:
    with _standin(4, "--no-record") as server:
        yield server


@pytest.fixture(scope="module")
def twin() -> Iterator[StandInProcess]:
    with _standin(4, "--no-record") as server:
        yield server


@pytest.fixture(scope="module")
def slower() -> Iterator[StandInProcess]:
    with _standin(12, "--no-record") as server:
        yield server


@pytest.fixture(scope="module")
def faster() -> Iterator[StandInProcess]:
    with _standin(1, "--no-record") as server:
        yield server


def _suite(
    pytester: pytest.Pytester, model: Path, a: str, b: str, *extra: str, suite: str = SUITE
) -> list[str]:
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nllmperf_profiles = mini.yaml\n"
    )
    pytester.path.joinpath("mini.yaml").write_text(PROFILES, encoding="utf-8")
    pytester.makepyfile(test_suite=suite)
    pytester.path.joinpath("variants.yaml").write_text(
        "variants:\n"
        f"  - {{name: main, engine: vllm, endpoint: '{a}', reference: true}}\n"
        f"  - {{name: pr, engine: vllm, endpoint: '{b}'}}\n",
        encoding="utf-8",
    )
    return [
        "--llmperf-variants=variants.yaml",
        "--llmperf-ab",
        "--llmperf-profile=mini",
        f"--model={model}",
        "--hardware=cpu",
        "--llmperf-warmups=2",
        "--llmperf-json=out.json",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "-p",
        "no:cacheprovider",
        *extra,
    ]


def _experiment(pytester: pytest.Pytester) -> dict[str, Any]:
    document = json.loads(pytester.path.joinpath("out.json").read_text(encoding="utf-8"))
    (result,) = document["results"]
    assert result["ab"] is not None
    return dict(result)


def test_equal_servers_are_the_same(
    pytester: pytest.Pytester, reference: StandInProcess, twin: StandInProcess, tiny_model_dir: Path
) -> None:
    args = _suite(pytester, tiny_model_dir, reference.base_url, twin.base_url)
    reports = ["--llmperf-summary=summary.md", "--llmperf-html=report.html"]
    result = pytester.runpytest_subprocess(*args, *reports)
    result.assert_outcomes(passed=1)
    record = _experiment(pytester)
    assert record["outcome"] == "same"
    summary = pytester.path.joinpath("summary.md").read_text(encoding="utf-8")
    assert "### A/B mini: pr against main -\\> same" in summary  # ">" escaped for Markdown
    assert "| metric | A | B | B/A | interval | tolerance | verdict | pairs |" in summary
    page = pytester.path.joinpath("report.html").read_text(encoding="utf-8")
    assert "A/B experiments: ratio B/A per pair" in page
    assert "ab-0" in page  # the plot of the ratios
    assert record["variant"] == "pr"
    assert record["ab"]["reference"] == "main"
    assert 6 <= record["ab"]["pairs"] <= 20
    tpot = record["ab"]["metrics"]["mean_tpot_ms"]
    assert 1 / 1.4 < tpot["ratio_low"] <= tpot["median_ratio"] <= tpot["ratio_high"] < 1.4
    text = result.stdout.str()
    assert "A/B mini: pr against main -> same" in text
    assert not (pytester.path / "baselines").exists()  # nothing stored, nothing read


def test_a_tripled_gap_regressed_and_fails(
    pytester: pytest.Pytester,
    reference: StandInProcess,
    slower: StandInProcess,
    tiny_model_dir: Path,
) -> None:
    args = _suite(pytester, tiny_model_dir, reference.base_url, slower.base_url)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    record = _experiment(pytester)
    assert record["outcome"] == "regressed"
    assert record["ab"]["pairs"] == 6  # decided at the first look
    assert record["ab"]["metrics"]["mean_tpot_ms"]["ratio_low"] > 1.4
    assert record["ab"]["metrics"]["total_token_throughput"]["verdict"] == "regressed"
    assert record["ab"]["watched_ratios"] == {}  # both default metrics are gated
    result.stdout.fnmatch_lines(["*A/B mini: pr against main -> regressed*"])


def test_an_ungated_default_metric_keeps_its_pair_ratios(
    pytester: pytest.Pytester,
    reference: StandInProcess,
    slower: StandInProcess,
    tiny_model_dir: Path,
) -> None:
    # Gated on throughput alone (as docs/ab.md suggests where TPOT is noisy), the experiment
    # still records what B did to mean TPOT, pair by pair, without letting it decide.
    throughput_only = SUITE.replace(', "mean_tpot_ms": 40', "")
    args = _suite(
        pytester, tiny_model_dir, reference.base_url, slower.base_url, suite=throughput_only
    )
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    ab = _experiment(pytester)["ab"]
    assert set(ab["metrics"]) == {"total_token_throughput"}
    watched = ab["watched_ratios"]["mean_tpot_ms"]
    assert len(watched) == ab["pairs"]
    assert min(watched) > 1.4  # a tripled token gap


def test_a_quartered_gap_improved_and_passes(
    pytester: pytest.Pytester,
    reference: StandInProcess,
    faster: StandInProcess,
    tiny_model_dir: Path,
) -> None:
    args = _suite(pytester, tiny_model_dir, reference.base_url, faster.base_url)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    record = _experiment(pytester)
    assert record["outcome"] == "improved"
    assert record["ab"]["metrics"]["mean_tpot_ms"]["ratio_high"] < 1 / 1.4


def test_an_exhausted_budget_is_inconclusive_a_warning_or_under_strict_a_failure(
    pytester: pytest.Pytester,
    reference: StandInProcess,
    slower: StandInProcess,
    tiny_model_dir: Path,
) -> None:
    # Three pairs can never reach the confidence of a look (six at least): whatever the
    # servers do, the budget ends it undecided.
    args = _suite(
        pytester, tiny_model_dir, reference.base_url, slower.base_url, "--llmperf-ab-budget=3"
    )
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1, warnings=1)
    record = _experiment(pytester)
    assert record["outcome"] == "inconclusive"
    assert record["ab"]["pairs"] == 3
    result.stdout.fnmatch_lines(["*PytestWarning: llmperf: A/B mini: pr against main*"])
    assert "raise --llmperf-ab-budget" in result.stdout.str()

    strict = pytester.runpytest_subprocess(*args, "--llmperf-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*-> inconclusive*"])


def test_runs_alternate_and_each_has_its_own_cache_salt(
    pytester: pytest.Pytester, tiny_model_dir: Path
) -> None:
    with _standin(4) as a, _standin(4) as b:
        args = _suite(pytester, tiny_model_dir, a.base_url, b.base_url, "--llmperf-ab-budget=4")
        result = pytester.runpytest_subprocess(*args)
        result.assert_outcomes(passed=1, warnings=1)  # 4 pairs: inconclusive by design
        requests = [("A", r) for r in a.stats()["requests"]]
        requests += [("B", r) for r in b.stats()["requests"]]
    requests.sort(key=lambda item: float(item[1]["t_recv"]))
    # Consecutive requests with one salt are one batch: a warm-up or a measured run.
    batches: list[tuple[str, str, int]] = []
    for who, request in requests:
        salt = request["body"].get("cache_salt")
        assert salt, "every request of a vLLM run carries a cache salt"
        if batches and batches[-1][:2] == (who, salt):
            batches[-1] = (who, salt, batches[-1][2] + 1)
        else:
            batches.append((who, salt, 1))
    # Each run is a warm-up of 2 requests, then the 8 measured ones, under a new salt.
    assert [count for _, _, count in batches] == [2, 8] * 8
    assert "".join(who for who, _, _ in batches[1::2]) == "ABBAABBA"
    assert "".join(who for who, _, _ in batches[0::2]) == "ABBAABBA"
    salts = [salt for _, salt, _ in batches]
    assert len(set(salts)) == len(salts), "no run reuses another's cache salt"
    assert _experiment(pytester)["ab"]["order"] == "ABBAABBA"
