"""Rendering of run results: vLLM's console block and result JSON.

The builders are pure (they return strings and dicts); only the ``write_*`` functions touch the
file system. The layouts follow vLLM 0.32.0 so that people and scripts used to
`vllm bench serve` read the plugin's output unchanged.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.atomic import write_atomically
from pytest_llmperf.models import RequestRecord

_WIDTH = 50
_MAX_LISTED_ERRORS = 10  # vLLM lists at most ten failures before the block

# (key, label, section header) for every distribution, in vLLM's fixed print order.
_SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2el", "E2EL", "End-to-end Latency"),
    ("client_queue_time", "Client Queue Time", "Client-side Queueing"),
    (
        "e2el_including_client_queue",
        "E2EL incl. Client Queue",
        "Queue-inclusive End-to-end Latency",
    ),
)


def _percentile_word(p: float) -> str:
    # Same rule as metrics.percentile_key, repeated so that rendering never imports numpy.
    return str(int(p)) if int(p) == p else str(p)


def _line(label: str, value: object) -> str:
    # vLLM's "{:<40} {:<10}": the value is padded to 10 columns, so lines end in spaces.
    return f"{label:<40} {value!s:<10}"


def _fline(label: str, value: float) -> str:
    return f"{label:<40} {value:<10.2f}"


def format_result_block(
    metrics: Mapping[str, Any],
    *,
    max_concurrency: int | None = None,
    request_rate: float = math.inf,
    percentiles: Sequence[float] = (99,),
    selected: Sequence[str] = ("ttft", "tpot", "itl", "e2el"),
    errors: Sequence[str] = (),
) -> str:
    """vLLM's "Serving Benchmark Result" block, byte for byte, ending with a newline.

    ``metrics`` is what :func:`pytest_llmperf.measure.metrics.compute_metrics` returned.
    Optional lines
    appear when vLLM prints them: the concurrency limit when one was set, the rate when it is
    finite, goodput when it was computed, RTFx when positive, the two queue sections only with
    a concurrency limit (the queue-inclusive one also needs a finite rate). The token lines
    that vLLM drops without a tokenizer are always printed: the plugin always counts tokens.
    ``errors`` (failure reasons) are listed before the block, at most ten, as vLLM does.
    """
    lines: list[str] = []
    if errors:
        lines.append("Failed requests during benchmark run detected (capping to 10):")
        lines.extend(f"Error {i}: {e}" for i, e in enumerate(errors[:_MAX_LISTED_ERRORS]))

    lines.append(" Serving Benchmark Result ".center(_WIDTH, "="))

    def count(label: str, key: str) -> None:
        # A figure a baseline never recorded (older vLLM printed no "Failed requests") is left
        # out rather than invented, so a stored baseline prints as it was measured.
        if key in metrics:
            lines.append(_line(label, metrics[key]))

    def figure(label: str, key: str) -> None:
        if key in metrics:
            lines.append(_fline(label, metrics[key]))

    count("Successful requests:", "completed")
    count("Failed requests:", "failed")
    if max_concurrency is not None:
        lines.append(_line("Maximum request concurrency:", max_concurrency))
    if request_rate != math.inf:
        lines.append(_fline("Request rate configured (RPS):", request_rate))
    figure("Benchmark duration (s):", "duration")
    count("Total input tokens:", "total_input_tokens")
    count("Total generated tokens:", "total_output_tokens")
    figure("Request throughput (req/s):", "request_throughput")
    if metrics.get("request_goodput") is not None:
        figure("Request goodput (req/s):", "request_goodput")
    figure("Output token throughput (tok/s):", "output_throughput")
    figure("Peak output token throughput (tok/s):", "max_output_tokens_per_s")
    # An integer count printed with .2f ("6.00"), as vLLM does.
    figure("Peak concurrent requests:", "max_concurrent_requests")
    if metrics.get("rtfx", 0.0) > 0.0:
        figure("RTFx (Inverse Real-Time Factor):", "rtfx")
    figure("Total token throughput (tok/s):", "total_token_throughput")

    # vLLM only measures client queueing under a concurrency limit, and the queue-inclusive
    # latency only when arrivals are also paced.
    available = {
        "client_queue_time": max_concurrency is not None,
        "e2el_including_client_queue": max_concurrency is not None and request_rate != math.inf,
    }
    for key, label, header in _SECTIONS:
        if key not in selected or not available.get(key, True):
            continue
        if f"mean_{key}_ms" not in metrics:
            continue  # not recorded (vLLM saves E2EL only when asked to)
        lines.append(header.center(_WIDTH, "-"))
        figure(f"Mean {label} (ms):", f"mean_{key}_ms")
        figure(f"Median {label} (ms):", f"median_{key}_ms")
        for p in percentiles:
            word = _percentile_word(p)
            figure(f"P{word} {label} (ms):", f"p{word}_{key}_ms")
    lines.append("=" * _WIDTH)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- result JSON

_RUN_CONFIG_KEYS = frozenset(
    {
        "date",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "metadata",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "ramp_up_strategy",
        "ramp_up_start_rps",
        "ramp_up_end_rps",
    }
)

# The run totals vLLM writes before the per-request arrays, then the ones it writes after.
_TOTALS_HEAD = (
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
)
_TOTALS_TAIL = ("max_output_tokens_per_s", "max_concurrent_requests", "rtfx")


def result_date(now: datetime | None = None) -> str:
    """The ``date`` value vLLM writes (local time, ``YYYYMMDD-HHMMSS``)."""
    return (now or datetime.now()).strftime("%Y%m%d-%H%M%S")


def _per_request(records: Sequence[RequestRecord], detailed: bool) -> dict[str, list[Any]]:
    """vLLM's per-request arrays, in submission order, failures included.

    ``latencies`` and ``queue_times`` are written even without ``detailed`` (vLLM keeps them
    when --save-detailed is off). ``generated_texts`` is never written: records keep no text.
    """
    arrays: dict[str, list[Any]] = {}
    if detailed:
        arrays["input_lens"] = [r.prompt_len for r in records]
        arrays["output_lens"] = [r.output_tokens if r.success else 0 for r in records]
        arrays["ttfts"] = [r.ttft for r in records]
        arrays["itls"] = [r.itl.tolist() for r in records]
    arrays["latencies"] = [r.latency for r in records]
    if detailed:
        arrays["start_times"] = [r.start_time for r in records]
    arrays["queue_times"] = [r.queue_time for r in records]
    if detailed:
        arrays["errors"] = [r.error for r in records]
    return arrays


def results_json(
    metrics: Mapping[str, Any],
    run_config: Mapping[str, Any],
    *,
    records: Sequence[RequestRecord] | None = None,
    detailed: bool = False,
) -> dict[str, Any]:
    """The document `vllm bench serve --save-result` writes, keys in vLLM's order.

    ``run_config`` may hold ``date`` (default: now), ``backend``, ``label``, ``model_id``,
    ``tokenizer_id``, ``num_prompts``, ``metadata`` (a mapping written as top-level keys, as
    ``--metadata K=V`` is), ``request_rate`` (default inf, written as the string ``"inf"``),
    ``burstiness`` (default 1.0), ``max_concurrency`` and the three ``ramp_up_*`` keys; any
    other key is rejected to catch misspellings. ``records``, when given, adds the per-request
    arrays (``detailed`` = vLLM's --save-detailed). Metric keys not known to vLLM's layout
    are kept, after vLLM's own.
    """
    unknown = sorted(set(run_config) - _RUN_CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown run_config keys: {', '.join(unknown)}")
    backend = run_config.get("backend")
    doc: dict[str, Any] = {
        "date": run_config.get("date") or result_date(),
        "endpoint_type": backend,  # vLLM keeps this duplicate of backend for old readers
        "backend": backend,
        "label": run_config.get("label"),
        "model_id": run_config.get("model_id"),
        "tokenizer_id": run_config.get("tokenizer_id"),
        "num_prompts": run_config.get("num_prompts"),
    }
    for key, value in (run_config.get("metadata") or {}).items():
        doc[str(key)] = value
    rate = float(run_config.get("request_rate", math.inf))
    doc["request_rate"] = "inf" if rate == math.inf else rate
    doc["burstiness"] = float(run_config.get("burstiness", 1.0))
    doc["max_concurrency"] = run_config.get("max_concurrency")
    if run_config.get("ramp_up_strategy") is not None:
        doc["ramp_up_strategy"] = run_config["ramp_up_strategy"]
        doc["ramp_up_start_rps"] = run_config.get("ramp_up_start_rps")
        doc["ramp_up_end_rps"] = run_config.get("ramp_up_end_rps")

    for key in _TOTALS_HEAD:
        doc[key] = metrics.get(key)
    if records is not None:
        doc.update(_per_request(records, detailed))
    for key in _TOTALS_TAIL:
        # rtfx is an audio-only figure; vLLM writes 0.0 for text runs.
        doc[key] = metrics.get(key, 0.0 if key == "rtfx" else None)
    for key, value in metrics.items():
        if key not in doc:
            doc[key] = value
    return doc


def result_filename(run_config: Mapping[str, Any]) -> str:
    """vLLM's default result file name for this run configuration."""
    label = run_config.get("label") or run_config.get("backend")
    model = str(run_config.get("model_id") or "").split("/")[-1]
    limit = run_config.get("max_concurrency")
    concurrency = f"-concurrency{limit}" if limit is not None else ""
    date = run_config.get("date") or result_date()
    if run_config.get("ramp_up_strategy") is not None:
        traffic = (
            f"ramp-up-{run_config['ramp_up_strategy']}-{run_config.get('ramp_up_start_rps')}qps-"
            f"{run_config.get('ramp_up_end_rps')}qps"
        )
    else:
        # vLLM formats the float argument: "inf", "2.0".
        traffic = f"{float(run_config.get('request_rate', math.inf))}qps"
    return f"{label}-{traffic}{concurrency}-{model}-{date}.json"


def write_results_json(path: str | os.PathLike[str], data: Mapping[str, Any]) -> Path:
    """Write ``data`` as JSON atomically: readers see the old file or the new one, never half."""
    target = Path(path)
    write_atomically(target, json.dumps(data))
    return target
