"""The vLLM-style result block and result JSON."""

from __future__ import annotations

import json
import math
import os
from array import array
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.measure.metrics import compute_metrics, percentile_key
from pytest_llmperf.models import RequestRecord
from pytest_llmperf.reports.vllm_block import (
    format_result_block,
    result_filename,
    results_json,
    write_results_json,
)
from tests.support.files import default_file_mode


def known_metrics() -> dict[str, Any]:
    return {
        "duration": 0.4253,
        "completed": 6,
        "failed": 0,
        "total_input_tokens": 192,
        "total_output_tokens": 48,
        "request_throughput": 14.10768,
        "request_goodput": None,
        "output_throughput": 112.8615,
        "total_token_throughput": 564.3075,
        "max_output_tokens_per_s": 48.0,
        "max_concurrent_requests": 6,
        "mean_ttft_ms": 53.234,
        "median_ttft_ms": 52.891,
        "std_ttft_ms": 1.0,
        "p99_ttft_ms": 54.98,
        "mean_tpot_ms": 10.345,
        "median_tpot_ms": 10.3,
        "std_tpot_ms": 1.0,
        "p99_tpot_ms": 11.0,
        "mean_itl_ms": 10.2,
        "median_itl_ms": 9.876,
        "std_itl_ms": 1.0,
        "p99_itl_ms": 20.5,
        "mean_e2el_ms": 125.5,
        "median_e2el_ms": 124.0,
        "std_e2el_ms": 1.0,
        "p99_e2el_ms": 130.996,
    }


# Lines end in spaces: vLLM pads every value to ten columns.
EXPECTED_DEFAULT_BLOCK = (
    "\n".join(
        [
            "============ Serving Benchmark Result ============",
            "Successful requests:                     6         ",
            "Failed requests:                         0         ",
            "Benchmark duration (s):                  0.43      ",
            "Total input tokens:                      192       ",
            "Total generated tokens:                  48        ",
            "Request throughput (req/s):              14.11     ",
            "Output token throughput (tok/s):         112.86    ",
            "Peak output token throughput (tok/s):    48.00     ",
            "Peak concurrent requests:                6.00      ",
            "Total token throughput (tok/s):          564.31    ",
            "---------------Time to First Token----------------",
            "Mean TTFT (ms):                          53.23     ",
            "Median TTFT (ms):                        52.89     ",
            "P99 TTFT (ms):                           54.98     ",
            "-----Time per Output Token (excl. 1st token)------",
            "Mean TPOT (ms):                          10.35     ",
            "Median TPOT (ms):                        10.30     ",
            "P99 TPOT (ms):                           11.00     ",
            "---------------Inter-token Latency----------------",
            "Mean ITL (ms):                           10.20     ",
            "Median ITL (ms):                         9.88      ",
            "P99 ITL (ms):                            20.50     ",
            "----------------End-to-end Latency----------------",
            "Mean E2EL (ms):                          125.50    ",
            "Median E2EL (ms):                        124.00    ",
            "P99 E2EL (ms):                           131.00    ",
            "==================================================",
        ]
    )
    + "\n"
)


def test_default_block_is_byte_exact() -> None:
    assert format_result_block(known_metrics()) == EXPECTED_DEFAULT_BLOCK


def test_every_body_line_is_label40_space_value10() -> None:
    for line in format_result_block(known_metrics()).splitlines():
        assert len(line) == 51 if ":" in line else len(line) == 50


def test_optional_lines_appear_in_vllms_places() -> None:
    m = known_metrics()
    m["request_goodput"] = 7.05
    m["rtfx"] = 1.5
    block = format_result_block(m, max_concurrency=4, request_rate=20.0).splitlines()
    assert block[1:12] == [
        "Successful requests:                     6         ",
        "Failed requests:                         0         ",
        "Maximum request concurrency:             4         ",
        "Request rate configured (RPS):           20.00     ",
        "Benchmark duration (s):                  0.43      ",
        "Total input tokens:                      192       ",
        "Total generated tokens:                  48        ",
        "Request throughput (req/s):              14.11     ",
        "Request goodput (req/s):                 7.05      ",
        "Output token throughput (tok/s):         112.86    ",
        "Peak output token throughput (tok/s):    48.00     ",
    ]
    assert block[12:15] == [
        "Peak concurrent requests:                6.00      ",
        "RTFx (Inverse Real-Time Factor):         1.50      ",
        "Total token throughput (tok/s):          564.31    ",
    ]


def test_optional_lines_absent_by_default() -> None:
    block = format_result_block(known_metrics())
    for label in ("Maximum request concurrency", "Request rate configured", "goodput", "RTFx"):
        assert label not in block
    # A goodput of 0.0 was computed and must still be printed; only None hides it.
    m = known_metrics()
    m["request_goodput"] = 0.0
    assert "Request goodput (req/s):                 0.00      \n" in format_result_block(m)


def test_unselected_sections_disappear() -> None:
    block = format_result_block(known_metrics(), selected=("ttft", "itl"))
    assert "Time to First Token" in block
    assert "Inter-token Latency" in block
    assert "TPOT" not in block
    assert "E2EL" not in block
    # vLLM's section order is fixed, whatever the order of the selection.
    block = format_result_block(known_metrics(), selected=("e2el", "ttft"))
    assert block.index("Time to First Token") < block.index("End-to-end Latency")


def test_percentile_lines_per_requested_percentile() -> None:
    m = known_metrics()
    m.update({"p50_ttft_ms": 52.0, "p99.9_ttft_ms": 55.556})
    block = format_result_block(m, percentiles=(50, 99.9), selected=("ttft",))
    assert block.splitlines()[-6:] == [
        "---------------Time to First Token----------------",
        "Mean TTFT (ms):                          53.23     ",
        "Median TTFT (ms):                        52.89     ",
        "P50 TTFT (ms):                           52.00     ",
        "P99.9 TTFT (ms):                         55.56     ",
        "==================================================",
    ]


def queue_metrics() -> dict[str, Any]:
    m = known_metrics()
    for key in ("client_queue_time", "e2el_including_client_queue"):
        m.update(
            {
                f"mean_{key}_ms": 1.0,
                f"median_{key}_ms": 2.0,
                f"std_{key}_ms": 0.5,
                f"p99_{key}_ms": 3.0,
            }
        )
    return m


QUEUE = ("ttft", "tpot", "itl", "e2el", "client_queue_time", "e2el_including_client_queue")


def test_queue_sections_follow_vllms_conditions() -> None:
    m = queue_metrics()
    both = format_result_block(m, max_concurrency=2, request_rate=5.0, selected=QUEUE)
    assert "---------------Client-side Queueing---------------\n" in both
    assert "Mean Client Queue Time (ms):             1.00      \n" in both
    assert "--------Queue-inclusive End-to-end Latency--------\n" in both
    assert "P99 E2EL incl. Client Queue (ms):        3.00      \n" in both
    # Without a finite rate, only client queueing; without a limit, neither.
    closed_loop = format_result_block(m, max_concurrency=2, selected=QUEUE)
    assert "Client-side Queueing" in closed_loop
    assert "Queue-inclusive" not in closed_loop
    unlimited = format_result_block(m, request_rate=5.0, selected=QUEUE)
    assert "Queue" not in unlimited


def test_errors_are_listed_before_the_block_capped_at_ten() -> None:
    errors = [f"reason {i}" for i in range(12)]
    text = format_result_block(known_metrics(), errors=errors)
    lines = text.splitlines()
    assert lines[0] == "Failed requests during benchmark run detected (capping to 10):"
    assert lines[1:11] == [f"Error {i}: reason {i}" for i in range(10)]
    assert lines[11] == "============ Serving Benchmark Result ============"
    assert text.endswith(EXPECTED_DEFAULT_BLOCK)


def test_long_values_are_not_truncated() -> None:
    m = known_metrics()
    m["total_input_tokens"] = 123456789012345
    assert "Total input tokens:                      123456789012345\n" in format_result_block(m)


def test_block_renders_compute_metrics_output() -> None:
    records = [
        RequestRecord(
            success=True,
            start_time=0.0,
            ttft=0.1,
            itl=array("d", [0.02] * 3),
            latency=0.16,
            output_tokens=4,
            prompt_len=8,
            chunks=4,
        ),
    ]
    m = compute_metrics(records, 1.0, percentiles=(50, 99.9))
    block = format_result_block(m, percentiles=(50, 99.9))
    assert "P99.9 ITL (ms):                          20.00     \n" in block
    assert percentile_key(99.9) == "99.9"


# ---------------------------------------------------------------------------- result JSON

RUN = {
    "date": "20260101-120000",
    "backend": "openai-chat",
    "label": None,
    "model_id": "org/tiny-qwen3",
    "tokenizer_id": "org/tiny-qwen3",
    "num_prompts": 6,
}

VLLM_HEAD = [
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
]


def test_results_json_key_order_and_values() -> None:
    doc = results_json(known_metrics(), RUN)
    stats = [
        f"{s}_{k}_ms"
        for k in ("ttft", "tpot", "itl", "e2el")
        for s in ("mean", "median", "std", "p99")
    ]
    tail = ["max_output_tokens_per_s", "max_concurrent_requests", "rtfx"]
    assert list(doc) == VLLM_HEAD + tail + stats
    assert doc["endpoint_type"] == doc["backend"] == "openai-chat"
    assert doc["request_rate"] == "inf"
    assert doc["burstiness"] == 1.0
    assert doc["max_concurrency"] is None
    assert doc["request_goodput"] is None
    assert doc["rtfx"] == 0.0
    assert doc["p99_e2el_ms"] == 130.996


def test_results_json_finite_rate_metadata_and_ramp_up() -> None:
    run = {
        **RUN,
        "request_rate": 2,
        "burstiness": 0.5,
        "max_concurrency": 4,
        "metadata": {"hardware": "cpu", "profile": "short"},
    }
    doc = results_json(known_metrics(), run)
    keys = list(doc)
    assert keys[7:12] == ["hardware", "profile", "request_rate", "burstiness", "max_concurrency"]
    assert doc["request_rate"] == 2.0
    assert isinstance(doc["request_rate"], float)
    ramp = results_json(
        known_metrics(),
        {**RUN, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 5},
    )
    assert list(ramp)[10:13] == ["ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"]


def test_results_json_rejects_unknown_config_keys() -> None:
    with pytest.raises(ValueError, match="max_concurency"):
        results_json(known_metrics(), {**RUN, "max_concurency": 4})


def two_records() -> list[RequestRecord]:
    return [
        RequestRecord(
            success=True,
            start_time=10.0,
            ttft=0.1,
            itl=array("d", [0.01, 0.02]),
            latency=0.13,
            output_tokens=3,
            prompt_len=7,
            chunks=3,
            queue_time=0.5,
        ),
        RequestRecord(
            success=False,
            start_time=10.1,
            ttft=0.2,
            prompt_len=9,
            output_tokens=5,
            error="Bad Gateway",
        ),
    ]


def test_results_json_per_request_arrays() -> None:
    plain = results_json(known_metrics(), RUN, records=two_records())
    assert list(plain)[len(VLLM_HEAD) : len(VLLM_HEAD) + 3] == [
        "latencies",
        "queue_times",
        "max_output_tokens_per_s",
    ]
    assert plain["latencies"] == [0.13, 0.0]
    assert plain["queue_times"] == [0.5, 0.0]

    detailed = results_json(known_metrics(), RUN, records=two_records(), detailed=True)
    assert list(detailed)[len(VLLM_HEAD) : len(VLLM_HEAD) + 8] == [
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "latencies",
        "start_times",
        "queue_times",
        "errors",
    ]
    assert detailed["input_lens"] == [7, 9]
    assert detailed["output_lens"] == [3, 0]  # failures count 0 output tokens
    assert detailed["itls"] == [[0.01, 0.02], []]
    assert detailed["errors"] == ["", "Bad Gateway"]
    json.dumps(detailed)  # plain JSON types only


def test_result_filename_matches_vllms_pattern() -> None:
    assert result_filename(RUN) == "openai-chat-infqps-tiny-qwen3-20260101-120000.json"
    named = {**RUN, "label": "nightly", "request_rate": 2, "max_concurrency": 8}
    assert result_filename(named) == "nightly-2.0qps-concurrency8-tiny-qwen3-20260101-120000.json"


def test_write_results_json_is_atomic_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "run.json"
    target.parent.mkdir()
    target.write_text("old")
    doc = results_json(known_metrics(), RUN)
    assert write_results_json(target, doc) == target
    assert json.loads(target.read_text()) == doc
    assert os.listdir(target.parent) == ["run.json"]  # no temporary file left behind
    assert target.stat().st_mode & 0o777 == default_file_mode()  # not private


def test_write_results_json_keeps_old_file_when_serialising_fails(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text('{"old": true}')
    with pytest.raises(TypeError):
        write_results_json(target, {"bad": object()})
    assert target.read_text() == '{"old": true}'
    assert os.listdir(tmp_path) == ["run.json"]


def test_inf_written_as_string_not_infinity(tmp_path: Path) -> None:
    path = write_results_json(
        tmp_path / "r.json", results_json(known_metrics(), {**RUN, "request_rate": math.inf})
    )
    assert '"request_rate": "inf"' in path.read_text()
