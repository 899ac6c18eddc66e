"""A sweep profile through pytest: recorded with its curve, passed on rerun, and failed with
the broken step named when the server's capacity drops (issue 18).

The endpoint is the capacity stand-in (tests/support/capacity_server.py): 4 slots, then 2,
so the true capacity halves while nothing else about a single request changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.capacity_server import CapacityModel, CapacityServer

pytestmark = pytest.mark.slow

PROFILES = """\
profiles:
  cap-sweep:
    dataset: random
    input_len: 16
    output_len: 8
    num_prompts: 30
    sweep:
      axis: request_rate
      start: 8
      factor: 2
      max_steps: 5
      resolution: 0.1
    slo:
      p99_ttft_ms: 200
"""
SUITE = "def test_serving(llmperf):\n    llmperf.check()\n"
# A request holds a slot 50 + 7 * 10 = 120 ms: 4 slots serve 33 req/s at most, 2 slots 17.
FOUR_SLOTS = CapacityModel(slots=4, prefill_ms=50.0, token_ms=10.0)
TWO_SLOTS = CapacityModel(slots=2, prefill_ms=50.0, token_ms=10.0)


@pytest.fixture
def servers() -> Iterator[tuple[CapacityServer, CapacityServer]]:
    with CapacityServer(FOUR_SLOTS) as four, CapacityServer(TWO_SLOTS) as two:
        yield four, two


def args(pytester: pytest.Pytester, server: CapacityServer, model: Path) -> list[str]:
    return [
        "--engine=external",
        f"--endpoint={server.base_url}",
        f"--model={model}",
        "--hardware=cpu",
        "--llmperf-warmups=1",
        "--llmperf-profile=cap-sweep",
        f"--baseline-dir={pytester.path / 'baselines'}",
        "-p",
        "no:cacheprovider",
    ]


def test_sweep_records_its_curve_passes_again_and_fails_naming_the_step(
    pytester: pytest.Pytester,
    servers: tuple[CapacityServer, CapacityServer],
    tiny_model_dir: Path,
) -> None:
    from pytest_llmperf.gate.store import baseline_path

    four, two = servers
    pytester.makeini(
        "[pytest]\nllmperf_profiles = profiles.yaml\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester.path.joinpath("profiles.yaml").write_text(PROFILES)
    pytester.makepyfile(test_suite=SUITE)

    recorded = pytester.runpytest(*args(pytester, four, tiny_model_dir), "--update-baselines")
    recorded.assert_outcomes(passed=1)
    path = baseline_path(pytester.path / "baselines", "cpu", str(tiny_model_dir), "external")
    entry = yaml.safe_load(path.read_text())["profiles"]["cap-sweep"]
    assert entry["tolerances"] == {"capacity_at_slo": 15.0, "saturation_output_throughput": 10.0}
    assert entry["workload"]["sweep"]["slo"] == {"p99_ttft_ms": 200.0}
    curve = entry["sweep"]["curve"]
    assert 2 <= len(curve) <= 5
    assert [row["load"] for row in curve] == sorted(row["load"] for row in curve)
    assert any(row["broken"] == ["p99_ttft_ms <= 200"] for row in curve)
    capacity = entry["metrics"]["capacity_at_slo"]
    assert 16 <= capacity <= 34, curve  # 4 slots of 120 ms: at most 33 req/s
    assert entry["sweep"]["capacity"]["lower"] < capacity <= entry["sweep"]["capacity"]["upper"]

    again = pytester.runpytest(*args(pytester, four, tiny_model_dir))
    again.assert_outcomes(passed=1)

    # No confirming rerun: one sweep with half the slots is evidence enough here.
    halved = pytester.runpytest(*args(pytester, two, tiny_model_dir), "--llmperf-confirm=0")
    halved.assert_outcomes(failed=1)
    halved.stdout.fnmatch_lines(
        [
            "*SLO broke at req/s * (p99_ttft_ms <= 200); in the baseline broke at req/s * "
            "(p99_ttft_ms <= 200)*",
            "*capacity_at_slo * -*% * ±15% * REGRESSED*",
        ]
    )
