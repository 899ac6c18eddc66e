"""compute_metrics against hand-computed cases and an independent straightforward reference."""

from __future__ import annotations

import math
import random
import statistics
from array import array
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_llmperf.measure.metrics import (
    compute_metrics,
    missing_samples,
    percentile_key,
    sample_counts,
    validate_goodput_slos,
)
from pytest_llmperf.models import RequestRecord


def rec(
    start: float,
    ttft: float = 0.0,
    itl: Sequence[float] = (),
    latency: float | None = None,
    n_out: int | None = None,
    prompt_len: int = 0,
    success: bool = True,
    queue_time: float = 0.0,
) -> RequestRecord:
    """A record whose latency defaults to the time of its last chunk."""
    gaps = array("d", itl)
    return RequestRecord(
        success=success,
        start_time=start,
        ttft=ttft,
        itl=gaps,
        latency=ttft + sum(gaps) if latency is None else latency,
        output_tokens=(len(gaps) + 1 if n_out is None else n_out) if success else 0,
        prompt_len=prompt_len,
        chunks=len(gaps) + 1 if success else 0,
        error="" if success else "boom",
        queue_time=queue_time,
    )


ALL_DISTRIBUTIONS = ("ttft", "tpot", "itl", "e2el")


def stat_keys(name: str, percentiles: Sequence[float] = (99,)) -> list[str]:
    return [f"mean_{name}_ms", f"median_{name}_ms", f"std_{name}_ms"] + [
        f"p{percentile_key(p)}_{name}_ms" for p in percentiles
    ]


# --------------------------------------------------------------------------- hand-computed


def two_ok_one_failed() -> list[RequestRecord]:
    return [
        rec(0.0, ttft=0.1, itl=[0.05, 0.05], latency=0.2, n_out=3, prompt_len=10),
        rec(0.2, prompt_len=5, success=False),
        rec(0.5, ttft=0.2, itl=[0.1], latency=0.3, n_out=2, prompt_len=20),
    ]


def test_totals_and_throughputs() -> None:
    m = compute_metrics(two_ok_one_failed(), 2.0)
    assert m["duration"] == 2.0
    assert m["completed"] == 2
    assert m["failed"] == 1
    assert m["total_input_tokens"] == 30  # the failed request's 5 prompt tokens are left out
    assert m["total_output_tokens"] == 5
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["request_goodput"] is None
    assert m["output_throughput"] == pytest.approx(2.5)
    assert m["total_token_throughput"] == pytest.approx(17.5)
    assert isinstance(m["completed"], int)
    assert isinstance(m["total_input_tokens"], int)
    assert isinstance(m["max_concurrent_requests"], int)


def test_distributions_by_hand() -> None:
    m = compute_metrics(two_ok_one_failed(), 2.0)
    expected = {
        # ttft [0.1, 0.2]
        "mean_ttft_ms": 150.0,
        "median_ttft_ms": 150.0,
        "std_ttft_ms": 50.0,  # population std
        "p99_ttft_ms": 199.0,  # 100 + 0.99 * 100
        # tpot: (0.2 - 0.1) / 2 = 0.05 and (0.3 - 0.2) / 1 = 0.1
        "mean_tpot_ms": 75.0,
        "median_tpot_ms": 75.0,
        "std_tpot_ms": 25.0,
        "p99_tpot_ms": 99.5,
        # itl pooled over requests: [0.05, 0.05, 0.1]
        "mean_itl_ms": 200.0 / 3,
        "median_itl_ms": 50.0,
        "std_itl_ms": math.sqrt(2 / 3600) * 1000,
        "p99_itl_ms": 99.0,  # h = 2 * 0.99 = 1.98 -> 50 + 0.98 * 50
        # e2el [0.2, 0.3]
        "mean_e2el_ms": 250.0,
        "median_e2el_ms": 250.0,
        "std_e2el_ms": 50.0,
        "p99_e2el_ms": 299.0,
    }
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-9), key


def test_key_order_is_vllms() -> None:
    m = compute_metrics(two_ok_one_failed(), 2.0, percentiles=(50, 99))
    head = [
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
    ]
    tail = [k for name in ALL_DISTRIBUTIONS for k in stat_keys(name, (50, 99))]
    assert list(m) == head + tail


def test_selected_metrics_follow_vllms_fixed_order() -> None:
    m = compute_metrics(two_ok_one_failed(), 2.0, selected=("e2el", "ttft"))
    stats = [k for k in m if k.endswith("_ms")]
    assert stats == stat_keys("ttft") + stat_keys("e2el")


def test_percentile_example_from_numpy_linear_definition() -> None:
    # x = [1, 2, 3, 4], P = 99 -> h = 2.97 -> 3 + 0.97 * (4 - 3) = 3.97
    records = [rec(0.0, ttft=t / 1000) for t in (4, 2, 1, 3)]
    m = compute_metrics(records, 1.0, percentiles=(99, 50, 25))
    assert m["p99_ttft_ms"] == pytest.approx(3.97, rel=1e-9)
    assert m["p50_ttft_ms"] == pytest.approx(2.5, rel=1e-9)
    assert m["p25_ttft_ms"] == pytest.approx(1.75, rel=1e-9)
    assert m["median_ttft_ms"] == pytest.approx(2.5, rel=1e-9)


def test_percentile_key_formatting() -> None:
    assert percentile_key(99) == "99"
    assert percentile_key(99.0) == "99"
    assert percentile_key(99.9) == "99.9"
    assert percentile_key(0.5) == "0.5"
    m = compute_metrics(two_ok_one_failed(), 1.0, percentiles=(50.0, 99.9, 90), selected=("itl",))
    assert [k for k in m if k.startswith("p")] == ["p50_itl_ms", "p99.9_itl_ms", "p90_itl_ms"]


def test_no_percentiles_gives_mean_median_std_only() -> None:
    m = compute_metrics(two_ok_one_failed(), 1.0, percentiles=(), selected=("ttft",))
    assert [k for k in m if k.endswith("_ms")] == ["mean_ttft_ms", "median_ttft_ms", "std_ttft_ms"]


def assert_all_distributions_zero(m: dict[str, Any], percentiles: Sequence[float] = (99,)) -> None:
    for name in ALL_DISTRIBUTIONS:
        for key in stat_keys(name, percentiles):
            assert m[key] == 0.0, key
            assert not math.isnan(m[key])


def test_empty_run() -> None:
    m = compute_metrics([], 1.0, percentiles=(50, 99))
    assert m["completed"] == m["failed"] == 0
    assert m["total_input_tokens"] == m["total_output_tokens"] == 0
    assert m["request_throughput"] == m["output_throughput"] == m["total_token_throughput"] == 0
    assert m["max_output_tokens_per_s"] == 0.0
    assert m["max_concurrent_requests"] == 0
    assert_all_distributions_zero(m, (50, 99))
    assert compute_metrics([], 1.0, goodput_slos_ms={"ttft": 1})["request_goodput"] == 0.0
    assert sample_counts([]) == {"ttft": 0, "tpot": 0, "itl": 0, "e2el": 0}


def test_all_failed() -> None:
    # A stream that broke mid-way leaves partial timings in a failed record; none may count.
    records = [
        rec(0.0, ttft=0.1, itl=[0.2, 0.3], prompt_len=7, success=False),
        rec(0.5, prompt_len=9, success=False),
    ]
    m = compute_metrics(records, 2.0, goodput_slos_ms={"e2el": 10_000})
    assert m["completed"] == 0
    assert m["failed"] == 2
    assert m["total_input_tokens"] == 0
    assert m["total_output_tokens"] == 0
    assert m["request_goodput"] == 0.0
    assert m["max_output_tokens_per_s"] == 0.0
    assert m["max_concurrent_requests"] == 0
    assert_all_distributions_zero(m)
    assert sample_counts(records) == {"ttft": 0, "tpot": 0, "itl": 0, "e2el": 0}


def test_single_token_outputs_have_no_tpot() -> None:
    records = [
        rec(0.0, ttft=0.1, n_out=1, latency=0.1),
        rec(0.0, ttft=0.2, n_out=0, latency=0.2),  # a success with no usage count
        rec(0.0, ttft=0.1, itl=[0.04, 0.04], n_out=5),  # 0.08 / 4 = 0.02
    ]
    m = compute_metrics(records, 1.0)
    assert m["mean_tpot_ms"] == pytest.approx(20.0)
    assert m["std_tpot_ms"] == 0.0
    assert m["mean_ttft_ms"] == pytest.approx(400 / 3)  # all three still count for TTFT
    assert sample_counts(records) == {"ttft": 3, "tpot": 1, "itl": 2, "e2el": 3}

    only_single = compute_metrics(records[:2], 1.0)
    assert only_single["mean_tpot_ms"] == only_single["p99_tpot_ms"] == 0.0
    assert only_single["mean_itl_ms"] == 0.0
    assert sample_counts(records[:2])["tpot"] == 0


def test_answers_sent_in_one_chunk_have_tpot_zero_but_no_tpot_sample() -> None:
    # A stalled API server can hand over a whole answer at once: vLLM's formula gives
    # TPOT 0 (kept in the mean), but it measured no time per token.
    records = [
        rec(0.0, ttft=0.3, n_out=200),
        rec(0.0, ttft=0.1, itl=[0.04, 0.04], n_out=5),  # 0.08 / 4 = 0.02
    ]
    m = compute_metrics(records, 1.0)
    assert m["mean_tpot_ms"] == pytest.approx(10.0)
    assert sample_counts(records)["tpot"] == 1
    assert compute_metrics(records[:1], 1.0)["mean_tpot_ms"] == 0.0
    assert sample_counts(records[:1]) == {"ttft": 1, "tpot": 0, "itl": 0, "e2el": 1}


def test_only_a_gated_mean_without_samples_is_reported_missing() -> None:
    single_chunk = sample_counts([rec(0.0, ttft=0.3, n_out=200)])
    assert missing_samples(single_chunk, ["mean_ttft_ms"]) is None
    reason = missing_samples(single_chunk, ["mean_ttft_ms", "mean_tpot_ms"])
    assert reason == "mean_tpot_ms has no samples (no request produced the chunks tpot needs)"
    # A count the run did not report is no evidence of absence.
    assert missing_samples({}, ["mean_tpot_ms", "mean_itl_ms"]) is None


def test_goodput_counts_single_token_requests_as_tpot_zero() -> None:
    records = [
        rec(0.0, ttft=0.1, n_out=1, latency=0.5),  # tpot treated as 0
        rec(0.0, ttft=0.1, itl=[0.05], n_out=2),  # tpot 0.05
    ]
    m = compute_metrics(records, 2.0, goodput_slos_ms={"tpot": 0})
    assert m["request_goodput"] == pytest.approx(0.5)
    m = compute_metrics(records, 2.0, goodput_slos_ms={"tpot": 60})
    assert m["request_goodput"] == pytest.approx(1.0)


def test_goodput_boundary_is_inclusive_and_all_slos_must_hold() -> None:
    records = [
        rec(0.0, ttft=0.1, latency=0.5),  # exactly on the TTFT SLO: good
        rec(0.0, ttft=0.1000001, latency=0.5),  # a hair over: not good
        rec(0.0, ttft=0.05, latency=1.0),  # good TTFT, but exactly on the E2EL SLO: good
        rec(0.0, ttft=0.05, latency=1.001),  # good TTFT, E2EL over: not good
    ]
    m = compute_metrics(records, 4.0, goodput_slos_ms={"ttft": 100, "e2el": 1000})
    assert m["request_goodput"] == pytest.approx(2 / 4)
    m = compute_metrics(records, 4.0, goodput_slos_ms={"ttft": 100})
    assert m["request_goodput"] == pytest.approx(3 / 4)
    # An empty SLO mapping means "no goodput", as an absent --goodput does.
    assert compute_metrics(records, 4.0, goodput_slos_ms={})["request_goodput"] is None


def test_peak_counts_chunks_not_tokens() -> None:
    # 3 chunks carrying 100 tokens (say speculative decoding): the peak sees 3, the average 100.
    records = [rec(0.0, ttft=0.1, itl=[0.1, 0.1], n_out=100)]
    m = compute_metrics(records, 1.0)
    assert m["max_output_tokens_per_s"] == 3.0
    assert m["output_throughput"] == 100.0
    assert isinstance(m["max_output_tokens_per_s"], float)


def test_peak_buckets_anchor_at_first_successful_start() -> None:
    records = [
        rec(9.5, success=False),  # earlier, but failed: must not move the anchor
        rec(10.0, ttft=0.1, itl=[0.1, 0.75]),  # chunks at 10.1, 10.2, 10.95
    ]
    # Anchored at 10.0 all three chunks share bucket 0; anchored at 9.5 they would split 2 + 1.
    assert compute_metrics(records, 2.0)["max_output_tokens_per_s"] == 3.0


def test_peak_buckets_split_at_whole_seconds() -> None:
    # chunks at 0.5, 0.9, 1.2, 1.4, 1.6, 2.5 -> buckets 0,0,1,1,1,2 -> peak 3
    records = [
        rec(0.0, ttft=0.5, itl=[0.4, 0.3]),
        rec(0.25, ttft=1.15, itl=[0.2, 1.0]),
    ]
    m = compute_metrics(records, 3.0)
    assert m["max_output_tokens_per_s"] == 3.0
    # first: buckets 0..1; second: 0..2 -> [2, 2, 1]
    assert m["max_concurrent_requests"] == 2


def test_concurrency_buckets_are_inclusive() -> None:
    # The first request ends at 1.5 s and the second starts at 1.9 s: never active together,
    # yet both touch bucket 1, so the peak is 2 (why vLLM's figure can exceed the limit).
    records = [
        rec(0.0, ttft=0.5, latency=1.5),
        rec(1.9, ttft=0.05, latency=0.05),
        rec(2.5, ttft=0.05, latency=0.1),
    ]
    assert compute_metrics(records, 3.0)["max_concurrent_requests"] == 2
    # A request that ends exactly on a whole second also occupies that second's bucket.
    records = [rec(0.0, ttft=1.0, latency=1.0), rec(1.0, ttft=0.1, latency=0.1)]
    assert compute_metrics(records, 2.0)["max_concurrent_requests"] == 2


def test_queue_time_metrics_when_selected() -> None:
    records = [
        rec(0.0, ttft=0.1, latency=0.2, queue_time=0.3),
        rec(0.0, ttft=0.1, latency=0.4, queue_time=0.1),
        rec(0.0, success=False, queue_time=9.0),
    ]
    m = compute_metrics(records, 1.0, selected=("client_queue_time", "e2el_including_client_queue"))
    assert m["mean_client_queue_time_ms"] == pytest.approx(200.0)
    assert m["mean_e2el_including_client_queue_ms"] == pytest.approx(500.0)
    assert "mean_ttft_ms" not in m


def test_sample_counts_pool_itl() -> None:
    assert sample_counts(two_ok_one_failed()) == {"ttft": 2, "tpot": 2, "itl": 3, "e2el": 2}


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("slos", "named"),
    [
        ({"itl": 10}, "itl"),
        ({"ttft": 10, "TPOT": 5}, "TPOT"),
        ({"e2el": -1}, "e2el"),
        ({"tpot": float("nan")}, "tpot"),
        ({"ttft": "fast"}, "ttft"),
    ],
)
def test_goodput_slo_validation_names_the_bad_key(slos: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=repr(named)):
        compute_metrics([], 1.0, goodput_slos_ms=slos)


def test_goodput_slo_validation_accepts_zero_and_returns_floats() -> None:
    assert validate_goodput_slos({"ttft": 0, "tpot": "12.5", "e2el": 1e9}) == {
        "ttft": 0.0,
        "tpot": 12.5,
        "e2el": 1e9,
    }


def test_other_argument_validation() -> None:
    with pytest.raises(ValueError, match="'queue'"):
        compute_metrics([], 1.0, selected=("ttft", "queue"))
    with pytest.raises(ValueError, match="101"):
        compute_metrics([], 1.0, percentiles=(50, 101))
    with pytest.raises(ValueError, match="duration"):
        compute_metrics([], 0.0)


# ------------------------------------------------------- independent reference computation


def ref_percentile(values: list[float], p: float) -> float:
    xs = sorted(values)
    h = (len(xs) - 1) * p / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def reference(
    records: list[RequestRecord],
    duration: float,
    percentiles: Sequence[float],
    slos: dict[str, float],
) -> dict[str, Any]:
    """The §3 definitions written out as plainly as possible, one request at a time."""
    ok = [r for r in records if r.success]
    out: dict[str, Any] = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": sum(r.prompt_len for r in ok),
        "total_output_tokens": sum(r.output_tokens for r in ok),
    }
    out["request_throughput"] = len(ok) / duration
    good = 0
    for r in ok:
        tpot = (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        values = {"ttft": r.ttft, "tpot": tpot, "e2el": r.latency}
        if all(values[k] <= v / 1000 for k, v in slos.items()):
            good += 1
    out["request_goodput"] = good / duration
    out["output_throughput"] = out["total_output_tokens"] / duration
    out["total_token_throughput"] = (
        out["total_input_tokens"] + out["total_output_tokens"]
    ) / duration

    peak_tokens, peak_conc = 0.0, 0
    if ok:
        t0 = min(r.start_time for r in ok)
        n_buckets = math.ceil(max(r.start_time + r.latency for r in ok) - t0) + 1
        tokens = [0] * n_buckets
        conc = [0] * n_buckets
        for r in ok:
            t = r.start_time + r.ttft
            times = [t]
            for gap in r.itl:
                t += gap
                times.append(t)
            for t in times:
                b = int(t - t0)
                if 0 <= b < n_buckets:
                    tokens[b] += 1
            for s in range(int(r.start_time - t0), int(r.start_time + r.latency - t0) + 1):
                conc[s] += 1
        peak_tokens, peak_conc = float(max(tokens)), max(conc)
    out["max_output_tokens_per_s"] = peak_tokens
    out["max_concurrent_requests"] = peak_conc

    dists = {
        "ttft": [r.ttft for r in ok],
        "tpot": [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1],
        "itl": [gap for r in ok for gap in r.itl],
        "e2el": [r.latency for r in ok],
    }
    for name, xs in dists.items():
        xs = xs or [0.0]
        out[f"mean_{name}_ms"] = statistics.fmean(xs) * 1000
        out[f"median_{name}_ms"] = statistics.median(xs) * 1000
        out[f"std_{name}_ms"] = statistics.pstdev(xs) * 1000
        for p in percentiles:
            out[f"p{percentile_key(p)}_{name}_ms"] = ref_percentile(xs, p) * 1000
    return out


def random_records(seed: int, n: int) -> list[RequestRecord]:
    rnd = random.Random(seed)
    records = []
    for _ in range(n):
        start = rnd.uniform(0, 5)
        if rnd.random() < 0.15:
            records.append(
                rec(start, ttft=rnd.uniform(0, 0.5), prompt_len=rnd.randint(1, 99), success=False)
            )
            continue
        gaps = [rnd.expovariate(1 / 0.03) for _ in range(rnd.choice([0, 0, 1, 3, 10, 40]))]
        # Usually one token per chunk; sometimes several (spec decoding) or no usage count.
        n_out = rnd.choice([len(gaps) + 1, len(gaps) + 1, 2 * len(gaps) + 1, 1])
        records.append(
            rec(
                start,
                ttft=rnd.uniform(0.001, 0.8),
                itl=gaps,
                n_out=n_out,
                prompt_len=rnd.randint(1, 4000),
            )
        )
    return records


@pytest.mark.parametrize("seed", range(12))
def test_matches_reference_on_random_records(seed: int) -> None:
    rnd = random.Random(1000 + seed)
    records = random_records(seed, rnd.choice([1, 2, 7, 50, 300]))
    duration = rnd.uniform(1, 10)
    percentiles = [50, 90, 99, 99.9, 0, 100]
    slos = {
        "ttft": rnd.uniform(50, 500),
        "tpot": rnd.uniform(5, 60),
        "e2el": rnd.uniform(100, 3000),
    }
    ours = compute_metrics(records, duration, percentiles=percentiles, goodput_slos_ms=slos)
    theirs = reference(records, duration, percentiles, slos)
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    counts = sample_counts(records)
    assert counts["itl"] == sum(len(r.itl) for r in records if r.success)
