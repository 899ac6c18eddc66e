"""Runs stay independent of vLLM's prefix cache without vLLM's dev mode.

A session started by the plugin (embedded model, default options) is probed from inside:

- the dev-only routes (``/collective_rpc``, ``/sleep``, ``/reset_prefix_cache``, ...) answer
  404: the plugin did not turn dev mode on;
- the measurement: the same prompts sent twice with the same cache salt are served from the
  cache the second time (the hit counter jumps by the prompts' length), so the counter can
  see a repeat; ``llmperf.check()`` with warm-ups and two repeats, which sends the same
  prompts four times, gets no more hits than four fresh passes do (only the little a pass
  shares within itself, as with vllm bench).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import requires_vllm

pytestmark = [pytest.mark.e2e, requires_vllm]

PROFILES = """\
profiles:
  cached:
    dataset: random
    input_len: 1024
    output_len: 4
    num_prompts: 8
"""

INNER = """
import json, os, re, statistics

import httpx
import pytest

from pytest_llmperf.measure import loadgen

DEV_ONLY = [("POST", "/collective_rpc"), ("POST", "/sleep"), ("POST", "/wake_up"),
            ("GET", "/is_sleeping"), ("POST", "/reset_prefix_cache"), ("GET", "/server_info")]


def hits(base):
    text = httpx.get(base + "/metrics", timeout=30, trust_env=False).text
    found = re.findall(r"^vllm:prefix_cache_hits_total(?:\\{[^}]*\\})? ([0-9.e+]+)$", text, re.M)
    assert found, "vLLM exports vllm:prefix_cache_hits_total"
    return sum(float(v) for v in found)


def report(key, value):
    path = os.environ["LLMPERF_PROBE_FILE"]
    data = json.load(open(path)) if os.path.exists(path) else {}
    data[key] = value
    json.dump(data, open(path, "w"))


def test_dev_only_routes_are_absent(llmperf_target):
    codes = {path: httpx.request(method, llmperf_target.base_url + path, timeout=30,
                                 trust_env=False).status_code for method, path in DEV_ONLY}
    report("dev_routes", codes)


def test_same_salt_is_served_from_cache(llmperf_target, llmperf_workloads, llmperf_profile):
    requests = llmperf_workloads.requests(llmperf_profile, llmperf_target.model, True)
    config = loadgen.LoadConfig(
        base_url=llmperf_target.base_url, model=llmperf_target.served_model,
        endpoint=loadgen.CHAT_ENDPOINT, max_concurrency=1, quirks=llmperf_target.spec.quirks,
        extra_body={"cache_salt": "one-salt-for-both"},
    )
    seen = []
    for _ in range(2):
        before = hits(llmperf_target.base_url)
        result = loadgen.run_load(config, requests)
        seen.append({"hits": hits(llmperf_target.base_url) - before,
                     "ttft_ms": statistics.fmean(r.ttft for r in result.records) * 1e3})
    report("same_salt", seen)


def test_check_gets_no_cache_hit(llmperf, llmperf_target):
    before = hits(llmperf_target.base_url)
    result = llmperf.check()
    report("check", {"hits": hits(llmperf_target.base_url) - before, "runs": result.runs,
                     "ttft_ms": result.metrics["mean_ttft_ms"]})
"""


def test_no_dev_mode_and_repeats_are_not_served_from_cache(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeini(
        "[pytest]\nllmperf_profiles = profiles.yaml\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester.path.joinpath("profiles.yaml").write_text(PROFILES)
    pytester.makepyfile(test_probe=INNER)
    probe = tmp_path / "probe.json"
    pytester._monkeypatch.setenv("LLMPERF_PROBE_FILE", str(probe))
    result = pytester.runpytest_subprocess(
        "--engine=vllm",
        "--hardware=cpu",
        "--llmperf-profile=cached",
        "--llmperf-warmups=8",
        "--llmperf-repeat=2",
        "--update-baselines",
        f"--baseline-dir={tmp_path / 'baselines'}",
        "-p",
        "no:cacheprovider",
        timeout=600,
    )
    result.assert_outcomes(passed=3)
    found = json.loads(probe.read_text())
    print(f"prefix cache, measured: {json.dumps(found)}")
    assert set(found["dev_routes"].values()) == {404}, found["dev_routes"]
    first, second = found["same_salt"]
    # A pass under a fresh salt shares a little within itself (the prompts' common first
    # block, as with vllm bench); a pass under a salt already used is served from the cache.
    assert second["hits"] >= 4 * max(first["hits"], 1), found["same_salt"]
    # check(): per repeat, 8 warm-ups and 8 measured requests of the same 8 prompts. Each
    # pass under its own salt shares no more than a fresh pass does: nothing comes from the
    # pass before it.
    assert found["check"]["runs"] == 2
    assert found["check"]["hits"] <= 4 * first["hits"], found
