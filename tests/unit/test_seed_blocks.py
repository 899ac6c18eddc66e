"""Loading a seed baseline with the plugin and printing it gives back the document's block.

The baseline loader (`baseline.load_all`) and the vLLM-layout printer
(`report.format_result_block`) together must reproduce, figure for figure, the "Serving
Benchmark Result" blocks the seed documents printed. The documents were made with an older
vLLM: they have no "Failed requests" line and spell "Total Token throughput" with a capital T,
so labels are compared without case and that one line is left out.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from pytest_llmperf.gate.store import load_all
from pytest_llmperf.reports.vllm_block import format_result_block

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO.parent / "shared" / "seeds"

CASES = [
    # (seed document, baseline file, profile)
    ("000_c56bb875ccb1f1f6.txt", "a100/qwen3-32b/vllm.yaml", "sharegpt"),
    ("000_c56bb875ccb1f1f6.txt", "a100/qwen3-32b/vllm.yaml", "very-long"),
    ("000_c56bb875ccb1f1f6.txt", "a100/qwen3-32b/sglang.yaml", "sharegpt"),
    ("000_c56bb875ccb1f1f6.txt", "a100/qwen3-32b/trtllm.yaml", "sharegpt"),
    ("004_6305a32b79b65924.txt", "910b/qwen3-30b-a3b/mindie.yaml", "sharegpt-bs4"),
    ("004_6305a32b79b65924.txt", "910b/qwen3-30b-a3b/vllm.yaml", "medium"),
]


def lines_of(block: str) -> dict[str, str]:
    """label (lower case) -> printed value, for every figure line of a block."""
    figures = {}
    for line in block.splitlines():
        match = re.match(r"^([A-Za-z][^:]*\):|[A-Za-z][^:]*:)\s+(\S+)\s*$", line)
        if match:
            figures[match.group(1).lower()] = match.group(2)
    figures.pop("failed requests:", None)  # not printed by the documents' vLLM
    return figures


def document_blocks(name: str) -> list[dict[str, str]]:
    text = (SEEDS / name).read_text(encoding="utf-8")
    blocks = re.findall(
        r"=+ Serving Benchmark Result =+\n(.*?)\n=+[ \t]*(?:\n|$)", text, flags=re.S
    )
    return [lines_of(block) for block in blocks]


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the seed documents (../shared/seeds) are absent")
@pytest.mark.parametrize(("seed", "file", "profile"), CASES, ids=[f"{c[1]}:{c[2]}" for c in CASES])
def test_printed_baseline_equals_the_documents_block(seed: str, file: str, profile: str) -> None:
    entry = load_all(REPO / "baselines" / file)[profile]
    concurrency = (entry.workload or {}).get("max_concurrency")
    printed = lines_of(
        format_result_block(entry.metrics, max_concurrency=concurrency, request_rate=math.inf)
    )
    matches = [block for block in document_blocks(seed) if block == printed]
    assert matches, f"no block of {seed} has exactly these figures: {printed}"
    assert (
        printed["total token throughput (tok/s):"]
        == f"{entry.metrics['total_token_throughput']:.2f}"
    )
