"""Acceptance 1: from the seeds' baseline files alone, the table reproduces the A100 summary.

The A100 document's 結論 table prints, for each of its five cases, the change of total token
throughput from the vLLM baseline to the optimized TensorRT-LLM configuration. Four of the five
printed changes are (optimized - baseline) / baseline. The fifth (very long prompts, printed
-13.8 %) divides by the optimized figure instead: against the baseline it is -12.1 %. The table
shows the correctly computed change next to the printed one, and footnotes the erratum; the
test checks the four against the printed values, and the fifth explicitly against both the
correct formula and the document's own (wrong) one, so neither can drift unnoticed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
import yaml

from pytest_llmperf.reports.baseline_table import (
    Configuration,
    Folder,
    configuration_table,
    document_table,
    steps_table,
)
from pytest_llmperf.reports.tables import Table

REPO = Path(__file__).resolve().parents[2]
A100 = REPO / "baselines" / "a100" / "qwen3-32b"
B910 = REPO / "baselines" / "910b" / "qwen3-30b-a3b"
SEED_A100 = REPO.parent / "shared" / "seeds" / "000_c56bb875ccb1f1f6.txt"
CASES = ("sharegpt", "short", "medium", "long", "very-long")
# The 結論 table as printed in the seed document (also in summary.yaml, checked against the
# document by tests/unit/test_seed_baselines.py).
PRINTED = {"sharegpt": 18.7, "short": 33.1, "medium": 7.7, "long": 10.9, "very-long": -13.8}


def _cells(table: Table) -> dict[tuple[str, str], dict[str, str]]:
    """(profile, variant without footnote mark) -> column -> cell."""
    out = {}
    for row in table.rows:
        cells = dict(zip(table.header, row, strict=True))
        variant = re.sub(r" \[\d+\]$", "", cells["variant"])
        out[(cells["profile"], variant)] = cells
    return out


def _pct(cell: str) -> float:
    return float(cell.rstrip("%"))


def _round(value: Decimal) -> float:
    return float(value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def test_printed_values_are_the_documents() -> None:
    summary = yaml.safe_load((A100 / "summary.yaml").read_text(encoding="utf-8"))
    assert {c: summary["cases"][c]["printed_change_pct"] for c in CASES} == PRINTED
    if SEED_A100.is_file():  # the seeds sit beside the repository, not in it
        text = SEED_A100.read_text(encoding="utf-8")
        printed = [float(m) for m in re.findall(r"合計 TPS: [\d.]+ \(([+-][\d.]+)%\)", text)]
        assert printed == [PRINTED[c] for c in CASES]


def test_a100_summary_table_reproduces_the_document() -> None:
    table = document_table(Folder(A100))
    cells = _cells(table)
    assert [p for p, v in cells if v == "trtllm:optimized"] == list(CASES)
    for case in CASES:
        row = cells[(case, "trtllm:optimized")]
        assert _pct(row["printed"]) == PRINTED[case]
        if case != "very-long":
            assert _pct(row["vs vllm"]) == PRINTED[case], case
    # The erratum, checked both ways from the figures in the engine files.
    base = Decimal(cells[("very-long", "vllm")]["total tok/s"])
    optimized = Decimal(cells[("very-long", "trtllm:optimized")]["total tok/s"])
    assert (base, optimized) == (Decimal("1798.45"), Decimal("1580.36"))
    computed = _pct(cells[("very-long", "trtllm:optimized")]["vs vllm"])
    assert computed == _round((optimized - base) / base * 100) == -12.1
    assert _round((optimized - base) / optimized * 100) == PRINTED["very-long"]
    erratum = [note for note in table.notes if "erratum (change_pct)" in note]
    assert len(erratum) == 1
    assert "printed -13.8, correct -12.1" in erratum[0]
    very_long = next(r for r in table.rows if r[0] == "very-long" and "trtllm" in r[1])
    assert very_long[1].endswith(erratum[0].split(" ", 1)[0])  # the row carries its mark


def test_sharegpt_figure_comes_from_the_plain_trtllm_run_and_says_so() -> None:
    table = document_table(Folder(A100))
    sharegpt = [row for row in table.rows if row[0] == "sharegpt" and "trtllm" in row[1]]
    assert sharegpt[0][2] == "2054.21"
    mark = re.search(r"\[(\d+)\]", sharegpt[0][1])
    assert mark is not None
    assert any(n.startswith(f"[{mark.group(1)}] figure of trtllm") for n in table.notes), (
        table.notes
    )


def test_named_configurations_give_the_same_changes() -> None:
    """The generic form: reference vllm, the optimized variant filled by plain trtllm."""
    table = configuration_table(
        Folder(A100),
        Configuration.parse("vllm"),
        [Configuration.parse("trtllm:optimized,trtllm")],
    )
    cells = _cells(table)
    expected = {**PRINTED, "very-long": -12.1}
    assert {c: _pct(cells[(c, "trtllm:optimized")]["vs vllm"]) for c in CASES} == expected


def test_tpot_change_against_the_reference() -> None:
    cells = _cells(document_table(Folder(A100)))
    # 89.01 ms against 149.67 ms
    assert cells[("sharegpt", "trtllm:optimized")]["TPOT vs vllm"] == "-40.5%"


def test_failed_configurations_show_their_error_line() -> None:
    """As the seeds show TensorRT-LLM FP8 and AWQ: failed, with the engine's error."""
    table = steps_table(Folder(A100))
    rows = {row[1]: row for row in table.rows}
    assert rows["trtllm:fp8"][3:5] == (
        "failed",
        "RuntimeError: Unsupported SM version for FP8 block scaling GEMM",
    )
    assert rows["trtllm:awq"][3:5] == ("failed", "KeyError: 'weight'")
    assert rows["trtllm (adopted)"][3:5] == ("2054.21", "+18.7%")
    steps = [row[0] for row in table.rows if row[0]]
    assert steps == ["エンジンの選択", "量子化", "最大バッチトークン数"]
    printed = [row[5] for row in table.rows if row[0]]
    assert printed == ["+18.7%", "-", "-"]


def test_910b_summary_matches_its_printed_changes() -> None:
    summary = yaml.safe_load((B910 / "summary.yaml").read_text(encoding="utf-8"))
    cells = _cells(document_table(Folder(B910)))
    for case, raw in summary["cases"].items():
        row = cells[(case, "mindie:optimized")]
        assert _pct(row["vs vllm"]) == raw["printed_change_pct"], case


def test_cli_prints_the_tables(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.reports", "variants", "--baselines", str(A100)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "very-long  trtllm:optimized [2]  1580.36      -12.1%" in out
    assert "-13.8%" in out
    assert "RuntimeError: Unsupported SM version for FP8 block scaling GEMM" in out

    markdown = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_llmperf.reports",
            "variants",
            "--baselines",
            str(A100),
            "--reference",
            "vllm",
            "--variant",
            "trtllm:optimized,trtllm",
            "--profiles",
            "short,very-long",
            "--markdown",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert markdown.returncode == 0, markdown.stderr
    lines = markdown.stdout.splitlines()
    assert lines[0].startswith("| profile | variant | total tok/s | vs vllm |")
    assert "| short | trtllm:optimized | 3535.54 | +33.1% |" in markdown.stdout
    assert len([line for line in lines if line.startswith("| ")]) == 5  # header + 4 rows


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reference", "vllm", "--variant", "tgi"], "tgi.yaml: no such baseline file"),
        (["--reference", "trtllm:int4"], "no variant 'int4'; its variants are fp8, awq"),
        (["--variant", "trtllm"], "--variant needs --reference"),
    ],
)
def test_cli_errors_say_what_is_wrong(args: list[str], message: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_llmperf.reports",
            "variants",
            "--baselines",
            str(A100),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert message in done.stderr
