"""Deterministic parity with vLLM's own benchmark client.

vLLM's `bench serve` client runs against the real CPU server and saves its per-request arrays
(--save-detailed). Feeding exactly those requests to our metrics must reproduce every
aggregate it saved, and our result block must equal the one it printed, byte for byte. The
same requests on both sides take timing noise out of the comparison, so the tolerance can be
1e-6 rather than a statistical one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.measure.metrics import compute_metrics
from pytest_llmperf.models import RequestRecord
from pytest_llmperf.reports.vllm_block import format_result_block, results_json

pytestmark = pytest.mark.e2e

# The `vllm` console script is broken for the CPU wheel, so the client's own entry function
# is called from a small driver. One process runs every configuration: importing vLLM is the
# slow part. Each configuration's stdout is framed so that its block can be cut out.
DRIVER = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
for name, argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    print(f"@@@ begin {name}", flush=True)
    main(parser.parse_args(argv))
    print(f"@@@ end {name}", flush=True)
"""

PERCENTILES = (50, 90, 99)
# Tight enough that, on this machine, some requests usually miss them (goodput < throughput).
GOODPUT = {"ttft": 60.0, "tpot": 2.5, "e2el": 100.0}
BASE_METRICS = ("ttft", "tpot", "itl", "e2el")
EVERY_METRIC = (*BASE_METRICS, "client_queue_time", "e2el_including_client_queue")


@dataclass(frozen=True)
class Config:
    name: str
    max_concurrency: int | None = None
    request_rate: float = float("inf")

    @property
    def selected(self) -> tuple[str, ...]:
        """What vLLM computes for this run when every metric is asked for."""
        extra: tuple[str, ...] = ()
        if self.max_concurrency is not None:
            extra += ("client_queue_time",)
            if self.request_rate != float("inf"):
                extra += ("e2el_including_client_queue",)
        return BASE_METRICS + extra


CONFIGS = (
    Config("burst"),
    Config("limited", max_concurrency=4),
    Config("paced", max_concurrency=4, request_rate=20.0),
)


def client_argv(config: Config, base_url: str, tokenizer: Path, result_dir: Path) -> list[str]:
    argv = [
        "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions",
        "--model", "tiny-qwen3",
        "--tokenizer", str(tokenizer),
        "--base-url", base_url,
        "--dataset-name", "random",
        "--random-input-len", "64",
        "--random-output-len", "16",
        "--num-prompts", "20",
        "--seed", "42",
        "--disable-tqdm",
        "--save-result",
        "--save-detailed",
        "--result-dir", str(result_dir),
        "--result-filename", f"{config.name}.json",
        "--percentile-metrics", ",".join(EVERY_METRIC),
        "--metric-percentiles", ",".join(str(p) for p in PERCENTILES),
        "--goodput", *(f"{k}:{v}" for k, v in GOODPUT.items()),
        "--request-rate", str(config.request_rate),
    ]  # fmt: skip
    if config.max_concurrency is not None:
        argv += ["--max-concurrency", str(config.max_concurrency)]
    return argv


@pytest.fixture(scope="module")
def vllm_client_runs(
    vllm_server: Any, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[dict[str, Any], str]]:
    """Run vLLM's client once per configuration: its saved JSON and its printed block."""
    result_dir = tmp_path_factory.mktemp("vllm-bench")
    plan = [
        (c.name, client_argv(c, vllm_server.base_url, tiny_model_dir, result_dir)) for c in CONFIGS
    ]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    runs = {}
    for config in CONFIGS:
        section = proc.stdout.split(f"@@@ begin {config.name}\n", 1)[1]
        section = section.split(f"@@@ end {config.name}\n", 1)[0]
        title = "============ Serving Benchmark Result ============\n"
        block = title + section.split(title, 1)[1].split("=" * 50 + "\n", 1)[0] + "=" * 50 + "\n"
        doc = json.loads((result_dir / f"{config.name}.json").read_text())
        runs[config.name] = (doc, block)
    return runs


def records_from(doc: dict[str, Any]) -> list[RequestRecord]:
    """The requests vLLM measured, rebuilt from its per-request arrays."""
    return [
        RequestRecord(
            success=error == "",
            start_time=start,
            ttft=ttft,
            itl=array("d", itl),
            latency=latency,
            output_tokens=n_out,
            prompt_len=n_in,
            chunks=len(itl) + 1 if error == "" else 0,
            error=error,
            queue_time=queue,
        )
        for n_in, n_out, ttft, itl, latency, start, queue, error in zip(
            doc["input_lens"],
            doc["output_lens"],
            doc["ttfts"],
            doc["itls"],
            doc["latencies"],
            doc["start_times"],
            doc["queue_times"],
            doc["errors"],
            strict=True,
        )
    ]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_metrics_equal_vllms_own(
    config: Config, vllm_client_runs: dict[str, tuple[dict[str, Any], str]]
) -> None:
    doc, _ = vllm_client_runs[config.name]
    records = records_from(doc)
    ours = compute_metrics(
        records,
        doc["duration"],
        percentiles=PERCENTILES,
        selected=config.selected,
        goodput_slos_ms=GOODPUT,
    )
    assert doc["completed"] == 20, doc["errors"]
    per_request = {
        "input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
        "queue_times", "generated_texts", "errors", "rtfx",
    }  # fmt: skip
    run_config = {
        "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
        "request_rate", "burstiness", "max_concurrency",
    }  # fmt: skip
    aggregates = [k for k in doc if k not in per_request | run_config]
    assert set(aggregates) == set(ours)
    for key in aggregates:
        assert ours[key] == pytest.approx(doc[key], rel=1e-6, abs=1e-12), key
    assert type(ours["max_concurrent_requests"]) is type(doc["max_concurrent_requests"])
    # Something must actually have been measured, or the comparison proves little.
    assert ours["mean_itl_ms"] > 0
    assert ours["max_output_tokens_per_s"] > 0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_result_block_equals_vllms_printout(
    config: Config, vllm_client_runs: dict[str, tuple[dict[str, Any], str]]
) -> None:
    doc, printed = vllm_client_runs[config.name]
    ours = compute_metrics(
        records_from(doc),
        doc["duration"],
        percentiles=PERCENTILES,
        selected=config.selected,
        goodput_slos_ms=GOODPUT,
    )
    block = format_result_block(
        ours,
        max_concurrency=config.max_concurrency,
        request_rate=config.request_rate,
        percentiles=PERCENTILES,
        # Ask for everything, as the client was asked: the block must drop what vLLM drops.
        selected=EVERY_METRIC,
    )
    assert block == printed


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_result_json_layout_equals_vllms(
    config: Config, vllm_client_runs: dict[str, tuple[dict[str, Any], str]]
) -> None:
    doc, _ = vllm_client_runs[config.name]
    records = records_from(doc)
    ours = compute_metrics(
        records,
        doc["duration"],
        percentiles=PERCENTILES,
        selected=config.selected,
        goodput_slos_ms=GOODPUT,
    )
    run = {
        key: doc[key]
        for key in ("date", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
                    "request_rate", "burstiness", "max_concurrency")
    }  # fmt: skip
    mine = results_json(ours, run, records=records, detailed=True)
    # Records keep no generated text, so that one array is the only key we do not write.
    assert list(mine) == [k for k in doc if k != "generated_texts"]
    for key in ("date", "request_rate", "max_concurrency", "input_lens", "itls", "errors"):
        assert mine[key] == doc[key], key
