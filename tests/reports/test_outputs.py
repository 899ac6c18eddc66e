"""The session's files: JSON, Markdown (job summary or path), HTML; and the terminal lines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pytest_llmperf import __version__
from pytest_llmperf.config import Settings
from pytest_llmperf.measure import series
from pytest_llmperf.reports.summary import markdown_target, terminal_lines, write_outputs
from pytest_llmperf.reports.tables import Table, VariantRow, change_pct, variant_table
from pytest_llmperf.variants import Variant
from tests.reports.factory import ledger, records
from tests.support.files import default_file_mode

REPO = Path(__file__).resolve().parents[2]
VARIANTS = (
    Variant("vllm", "vllm", reference=True),
    Variant("vllm-tuned", "vllm"),
    Variant("trtllm-fp8", "trtllm"),
)


def settings(tmp_path: Path, **paths: Path) -> Settings:
    return Settings(engines=("vllm", "trtllm"), variants=VARIANTS, **paths)  # type: ignore[arg-type]


def test_terminal_lines_and_the_variant_table() -> None:
    lines = terminal_lines(ledger(), verbose=False, settings=settings(Path()))
    assert lines[0].startswith("vllm/short: total ")
    assert "-> recorded" in lines[0]
    assert lines[3].startswith("vllm-tuned/medium: ")
    assert "-> regressed (" in lines[3]
    assert "mean_tpot_ms +" in lines[3]
    assert lines[4] == (
        "trtllm-fp8: failed to start: RuntimeError: Unsupported SM version for FP8 block "
        "scaling GEMM"
    )
    start = lines.index("comparison (total token throughput and mean TPOT against vllm):")
    table = lines[start + 1].splitlines()
    assert table[0].split() == [
        "profile", "variant", "total", "tok/s", "vs", "vllm", "mean", "TPOT", "(ms)", "TPOT",
        "vs", "vllm",
    ]  # fmt: skip
    failed = [line for line in table if "trtllm-fp8" in line]
    assert len(failed) == 2
    assert all("failed" in line and "Unsupported SM version" in line for line in failed)


def test_verbose_adds_vllms_result_block() -> None:
    lines = terminal_lines(ledger(), verbose=True, settings=settings(Path()))
    text = "\n".join(lines)
    assert text.count("============ Serving Benchmark Result ============") == 4
    assert "vllm-tuned/medium\n============ Serving Benchmark Result" in text


def test_json_has_everything_per_test(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    written = write_outputs(
        ledger(), settings(tmp_path, json_path=out), hardware="cpu", environ={}, root=REPO
    )
    assert written == [out]
    document = json.loads(out.read_text(encoding="utf-8"))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert document["plugin_version"] == __version__
    assert document["git_commit"] == head.stdout.strip()
    assert document["hardware"] == "cpu"
    assert document["reference"] == "vllm"
    assert document["failed_starts"] == {
        "trtllm-fp8": "RuntimeError: Unsupported SM version for FP8 block scaling GEMM"
    }
    result = document["results"][3]
    assert result["variant"] == "vllm-tuned"
    assert result["engine_version"] == "0.32.0"
    assert result["command"] == "vllm serve tiny-qwen3 (vllm-tuned)"
    assert result["outcome"] == "regressed"
    assert {"mean_ttft_ms", "p99_itl_ms", "max_concurrent_requests"} <= set(result["metrics"])
    assert len(result["series"]["ttft_ms"]) == 32
    assert out.stat().st_mode & 0o777 == default_file_mode()  # not private


def test_markdown_to_the_github_job_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    environ = {"GITHUB_STEP_SUMMARY": str(summary)}
    write_outputs(ledger(), settings(tmp_path), hardware="cpu", environ=environ)
    write_outputs(ledger(), settings(tmp_path), hardware="cpu", environ=environ)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n")
    assert text.count("## pytest-llmperf: cpu, 4 profiles, 3 failed") == 2
    assert "| ❌ | vllm-tuned | medium |" in text
    assert "| short | trtllm-fp8 | failed | RuntimeError: Unsupported SM version" in text
    assert "<details><summary>2 not a plain pass</summary>" in text
    assert "| total_token_throughput |" in text
    assert "| std_ttft_ms |" not in text  # details keep the key metrics; the JSON has all


def test_markdown_option_wins_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("old", encoding="utf-8")
    chosen = settings(tmp_path, summary_path=path)
    assert markdown_target(chosen, {"GITHUB_STEP_SUMMARY": "/elsewhere"}) == (path, False)
    assert markdown_target(settings(tmp_path), {}) is None
    write_outputs(ledger(), chosen, hardware="cpu", environ={"GITHUB_STEP_SUMMARY": "/elsewhere"})
    assert path.read_text(encoding="utf-8").startswith("## pytest-llmperf: cpu")


def test_html_holds_every_plot_and_no_outside_reference(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    history = tmp_path / "h.jsonl"
    write_outputs(
        ledger(),
        settings(tmp_path, html_path=out, history_path=history),
        hardware="cpu",
        environ={},
    )
    page = out.read_text(encoding="utf-8")
    plots = [
        "latency-short", "latency-medium", "baseline-2", "baseline-3", "throughput-short",
        "throughput-medium", "trend",
    ]  # fmt: skip
    for name in plots:
        assert f'data-plot="{name}"' in page, name
    assert page.count("Plotly.newPlot(") == len(plots)
    assert "<script src=" not in page  # self-contained: plotly.js is inline
    assert "trtllm-fp8: failed to start: RuntimeError" in page
    assert "vllm/short: recorded (recorded)" in page


def test_html_without_plotly_is_a_usage_error_naming_the_extra(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import sys

class NoPlotly:
    def find_spec(self, name, path=None, target=None):
        if name == "plotly" or name.startswith("plotly."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoPlotly())
"""
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--engine=vllm", "--llmperf-html", "r.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (
        "--llmperf-html: the HTML report draws its plots with plotly, which is not installed; "
        "install the extra: pip install 'pytest-llmperf[report]'"
    ) in result.stderr.str()


# -- pure pieces -------------------------------------------------------------------------------


def test_change_rounds_half_up_like_the_seeds() -> None:
    assert change_pct(2054.21, 1730.98) == 18.7
    assert change_pct(1580.36, 1798.45) == -12.1
    assert change_pct(100.05, 100.0) == 0.1  # 0.05 % exactly: half up, not to even
    assert change_pct(100.0, 100.0) == 0.0


def test_variant_table_as_markdown_escapes_and_keeps_failures() -> None:
    table = variant_table(
        [
            VariantRow("a", "short", 100.0, 10.0),
            VariantRow("b|c", "short", 110.0, 9.0),
            VariantRow("d", "short", None, None, error="KeyError: 'weight'"),
            VariantRow("e", "short", None, None),
        ]
    )
    text = table.markdown()
    assert "| short | b\\|c | 110.00 | +10.0% | 9.00 | -10.0% |" in text
    assert "| short | d | failed | KeyError: 'weight' | - | - |" in text
    assert "| short | e | not measured | - | - | - |" in text


def test_text_grid_counts_wide_characters_twice() -> None:
    lines = Table(("step", "x"), (("量子化", "1"), ("abcdef", "2"))).text().splitlines()
    assert lines[2] == "量子化  1"
    assert lines[3] == "abcdef  2"


def test_series_keeps_distributions_small_and_throughput_exact() -> None:
    recs = records(1000, seed=7, ttft=0.05, gap=0.01, tokens=40)
    picture = series.summarize(recs)
    assert len(picture["itl_ms"]) == series.QUANTILES  # 39,000 gaps kept as quantiles
    assert picture["ttft_ms"] == sorted(picture["ttft_ms"])
    ttfts = sorted(r.ttft * 1000 for r in recs)
    assert picture["ttft_ms"][0] == round(ttfts[0], 3)
    assert picture["ttft_ms"][-1] == round(ttfts[-1], 3)
    line = picture["timeline"]
    width = line["bucket_s"]
    end = max(r.start_time + r.latency for r in recs) - min(r.start_time for r in recs)
    assert len(line["output_tok_s"]) <= series.TARGET_BUCKETS
    # Rates times bucket lengths give back every output token.
    lengths = [width] * (len(line["output_tok_s"]) - 1) + [
        end - width * (len(line["output_tok_s"]) - 1)
    ]
    total = sum(rate * length for rate, length in zip(line["output_tok_s"], lengths, strict=True))
    assert total == pytest.approx(sum(r.output_tokens for r in recs), rel=1e-3)
    assert series.summarize([]) == {}
