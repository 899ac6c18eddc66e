"""Live parity: our load generator and vLLM's own client take turns on one real server.

    python tests/bench/live_parity.py [--runs 3] [--num-prompts 64] [--input-len 2000]

One vLLM (CPU build) server with the embedded tiny model; the same workload (random dataset,
seed 42, chat endpoint, request rate inf) sent alternately by vLLM's `bench serve` client
(run in one long-lived subprocess, since importing vLLM is slow) and by pytest-llmperf's
client. Before every run the prefix cache is reset and a few warm-up requests are sent, so
neither client profits from the other's run. Prints each run and then, per metric, the
median of each client and their ratio (ours / vLLM's). This is a measurement, not a test:
the figures go into the issue note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pytest_llmperf.engines.tinymodel import ensure_tiny_model
from pytest_llmperf.measure import (
    datasets,
    loadgen,
    metrics,
)
from tests.conftest import TINY_MODEL_NAME, VLLM_TEST_ENV, start_vllm

KEYS = ("total_token_throughput", "mean_ttft_ms", "mean_tpot_ms")
WARMUPS = 8

# vLLM's client in a loop: reads one JSON argv list per line, runs it, prints the result path.
VLLM_CLIENT = """
import json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
for line in sys.stdin:
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    main(parser.parse_args(json.loads(line)))
    print("@@@done", flush=True)
"""


def reset_cache(base_url: str) -> None:
    response = httpx.post(f"{base_url}/reset_prefix_cache", timeout=30, trust_env=False)
    response.raise_for_status()


def vllm_argv(args: argparse.Namespace, base_url: str, model: Path, out: Path) -> list[str]:
    return [
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--model", TINY_MODEL_NAME, "--tokenizer", str(model), "--base-url", base_url,
        "--dataset-name", "random", "--random-input-len", str(args.input_len),
        "--random-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
        "--seed", "42", "--num-warmups", str(WARMUPS), "--save-result",
        "--result-dir", str(out.parent), "--result-filename", out.name,
        "--percentile-metrics", "ttft,tpot,itl,e2el",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=2000)
    parser.add_argument("--output-len", type=int, default=100)
    args = parser.parse_args()
    os.environ.update(VLLM_TEST_ENV)
    os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # for POST /reset_prefix_cache
    model = ensure_tiny_model()
    work = Path(tempfile.mkdtemp(prefix="live-parity-"))
    server = start_vllm(model, work / "server.log")
    client = subprocess.Popen(
        [sys.executable, "-c", VLLM_CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert client.stdin is not None
    assert client.stdout is not None
    tokenizer = datasets.load_tokenizer(str(model))
    requests = datasets.random_requests(
        tokenizer, num_prompts=args.num_prompts, input_len=args.input_len,
        output_len=args.output_len, seed=42,
    )  # fmt: skip
    config = loadgen.LoadConfig(
        base_url=server.base_url, model=TINY_MODEL_NAME, endpoint="/v1/chat/completions"
    )
    results: dict[str, list[dict[str, float]]] = {"ours": [], "vllm": []}
    try:
        for run in range(args.runs):
            for side in ("vllm", "ours") if run % 2 == 0 else ("ours", "vllm"):
                reset_cache(server.base_url)
                if side == "vllm":
                    out = work / f"vllm-{run}.json"
                    client.stdin.write(json.dumps(vllm_argv(args, server.base_url, model, out)))
                    client.stdin.write("\n")
                    client.stdin.flush()
                    while client.stdout.readline().strip() != "@@@done":
                        pass
                    saved = json.loads(out.read_text())
                    figures = {key: float(saved[key]) for key in KEYS}
                else:
                    # Same warm-up as vLLM's --num-warmups: copies of the first request.
                    loadgen.run_load(config, [requests[0]] * WARMUPS)
                    result = loadgen.run_load(config, requests)
                    computed = metrics.compute_metrics(result.records, result.duration)
                    figures = {key: float(computed[key]) for key in KEYS}
                results[side].append(figures)
                print(
                    f"run {run + 1} {side:>4}: "
                    + "  ".join(f"{key} {value:,.2f}" for key, value in figures.items()),
                    flush=True,
                )
    finally:
        client.stdin.close()
        client.wait(timeout=60)
        server.stop()
    shutil.rmtree(work, ignore_errors=True)  # after a clean end only: a failure keeps the log
    print()
    print(f"{'metric':<24}{'ours (median)':>16}{'vLLM (median)':>16}{'ours/vLLM':>12}")
    for key in KEYS:
        ours = statistics.median(r[key] for r in results["ours"])
        theirs = statistics.median(r[key] for r in results["vllm"])
        print(f"{key:<24}{ours:>16,.2f}{theirs:>16,.2f}{ours / theirs:>12.3f}")
    print(
        f"\n{args.runs} runs each, {args.num_prompts} prompts of {args.input_len} in / "
        f"{args.output_len} out, chat endpoint, request rate inf, prefix cache reset per run"
    )


if __name__ == "__main__":
    main()
