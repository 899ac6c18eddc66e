"""Shared prefixes on real vLLM: the engine's own counters see the prefix cache work, and the
gate fails a run with the cache turned off against a baseline recorded with it on.

Two sessions of the plugin, each starting the embedded model on vLLM's CPU build:

1. caching on (vLLM's default): the shared-prefix workload is recorded as the baseline, with a
   tolerance on ``engine_prefix_cache_hit_rate`` (read from ``vllm:prefix_cache_hits`` and
   ``vllm:prefix_cache_queries``); the run's own salt is one for all its requests, so requests
   sharing a prefix hit each other's blocks;
2. ``--no-enable-prefix-caching``: the same workload is judged against that baseline, and the
   hit rate's fall to about 0 fails it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import requires_vllm

pytestmark = [pytest.mark.e2e, requires_vllm]

# Eight prefixes of 1024 tokens (64 of vLLM's 16-token blocks), four requests each.
PROFILES = """\
profiles:
  shared:
    dataset: shared-prefix
    num_prefixes: 8
    prefix_len: 1024
    suffix_len: 64
    output_len: 4
    num_prompts: 32
"""

INNER = """
def test_shared(llmperf):
    llmperf.check(tolerances={"engine_prefix_cache_hit_rate": 20.0})
"""


def _session(pytester: pytest.Pytester, tmp_path: Path, name: str, *extra: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / f"{name}.json"
    result = pytester.runpytest_subprocess(
        "--engine=vllm",
        "--hardware=cpu",
        "--llmperf-profile=shared",
        "--llmperf-confirm=0",
        f"--baseline-dir={tmp_path / 'baselines'}",
        f"--llmperf-json={out}",
        "-p",
        "no:cacheprovider",
        *extra,
        timeout=600,
    )
    print(name, "\n".join(result.outlines[-15:]))
    document = json.loads(out.read_text())
    (record,) = document["results"]
    record["pytest_outcomes"] = result.parseoutcomes()
    return record


def test_hit_rate_seen_and_gated(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeini("[pytest]\nllmperf_profiles = profiles.yaml\n")
    pytester.path.joinpath("profiles.yaml").write_text(PROFILES)
    pytester.makepyfile(test_shared=INNER)

    on = _session(pytester, tmp_path, "caching-on", "--update-baselines")
    on_metrics = on["metrics"]
    print("caching on:", {k: v for k, v in on_metrics.items() if k.startswith("engine_")})
    assert on["outcome"] == "recorded"
    # 32 prompts of 1088 tokens; each prefix's later requests can find its 64 blocks.
    assert on_metrics["engine_prefix_cache_queries"] >= 32 * 1088 * 0.9
    assert on_metrics["engine_prefix_cache_hit_rate"] > 30.0
    assert on_metrics["engine_peak_running"] >= 1
    baseline = next((tmp_path / "baselines").rglob("*.yaml")).read_text()
    assert "engine_prefix_cache_hit_rate" in baseline

    off = _session(pytester, tmp_path, "caching-off", "--engine-args=--no-enable-prefix-caching")
    off_metrics = off["metrics"]
    print("caching off:", {k: v for k, v in off_metrics.items() if k.startswith("engine_")})
    assert off_metrics["engine_prefix_cache_hit_rate"] < 1.0
    assert off["outcome"] == "regressed", off["notes"]
    rows = {row["metric"]: row for row in off["comparisons"]}
    assert rows["engine_prefix_cache_hit_rate"]["status"] == "regressed"
    assert off["pytest_outcomes"].get("failed") == 1
