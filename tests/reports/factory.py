"""Results built from real parts (records -> metrics -> baseline verdict) for report tests."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

from pytest_llmperf.gate import store
from pytest_llmperf.gate.ledger import Ledger, ProfileResult
from pytest_llmperf.gate.verdict import judge
from pytest_llmperf.measure import metrics, series
from pytest_llmperf.models import RequestRecord
from tests.support.baseline_entries import recorded_entry


def records(n: int, *, seed: int, ttft: float, gap: float, tokens: int) -> list[RequestRecord]:
    """n streamed requests, started over one second, with jittered timings."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        first = ttft * rng.uniform(0.8, 1.5)
        gaps = array("d", (gap * rng.uniform(0.7, 1.6) for _ in range(tokens - 1)))
        out.append(
            RequestRecord(
                success=True,
                start_time=100.0 + i / n,
                ttft=first,
                itl=gaps,
                latency=first + sum(gaps),
                output_tokens=tokens,
                prompt_len=128,
                chunks=tokens,
            )
        )
    return out


def result(
    label: str,
    profile: str,
    *,
    engine: str = "vllm",
    speed: float = 1.0,
    base: dict[str, float] | None = None,
    seed: int = 0,
) -> ProfileResult:
    """A result measured from synthetic records; judged against ``base`` metrics if given."""
    recs = records(32, seed=seed, ttft=0.05 / speed, gap=0.01 / speed, tokens=40)
    duration = max(r.start_time + r.latency for r in recs) - min(r.start_time for r in recs)
    computed = metrics.compute_metrics(recs, duration)
    workload = {"dataset": "random", "num_prompts": 32, "request_rate": "inf"}
    if base is None:
        from pytest_llmperf.models import Outcome, Verdict

        verdict = Verdict(Outcome.RECORDED, notes=("recorded",))
    else:
        entry = recorded_entry(profile, base, store.DEFAULT_TOLERANCES)
        verdict = judge(
            entry, computed, workload, engine_version=None, baseline_file=Path("b.yaml")
        )
    return ProfileResult(
        nodeid=f"test_serving.py::test_serving[{label}-{profile}]",
        engine=engine,
        profile=profile,
        hardware="cpu",
        model="tiny-qwen3",
        metrics=computed,
        workload=workload,
        verdict=verdict,
        engine_version="0.32.0",
        command=f"vllm serve tiny-qwen3 ({label})",
        baseline_file="baselines/cpu/tiny-qwen3/vllm.yaml",
        variant=label,
        series=series.summarize(recs),
    )


def ledger() -> Ledger:
    """Two configurations on two profiles, one judged regressed, and one that failed to start."""
    ref_short = result("vllm", "short", seed=1)
    ref_medium = result("vllm", "medium", seed=2, speed=0.8)
    slow = {k: v * 1.3 for k, v in ref_short.metrics.items() if isinstance(v, float)}
    fast = result("vllm-tuned", "short", seed=3, speed=1.2, base=slow)
    regressed = result("vllm-tuned", "medium", seed=4, speed=0.5, base=dict(ref_medium.metrics))
    book = Ledger()
    for item in (ref_short, ref_medium, fast, regressed):
        book.add(item)
    book.failed_starts["trtllm-fp8"] = (
        "RuntimeError: Unsupported SM version for FP8 block scaling GEMM"
    )
    return book
