"""Two engines in one session: a started vLLM and an external endpoint (a second real vLLM).

One server at a time is started by the plugin; the external one is the shared session server
of this test run. The terminal summary compares them per profile, as the seeds' engine
selection tables do.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import requires_vllm
from tests.support.comparison import comparison_table, run_engines

pytestmark = [pytest.mark.e2e, requires_vllm]

PROFILES = ("short", "medium")


def test_vllm_and_external_in_one_session(
    pytester: pytest.Pytester, vllm_server: object, tmp_path: Path
) -> None:
    result = run_engines(
        pytester,
        "--engine=vllm,external",
        f"--endpoint={vllm_server.base_url}",  # type: ignore[attr-defined]
        "--num-prompts=16",
        profiles=PROFILES,
        baselines=tmp_path / "baselines",
    )
    result.assert_outcomes(passed=4)
    output = result.stdout.str()
    for test_id in ("vllm-short", "vllm-medium", "external-short", "external-medium"):
        assert f"test_serving[{test_id}] PASSED" in output
    # Engines run one after the other: every vllm test before any external one.
    order = re.findall(r"test_serving\[(vllm|external)-\w+\] PASSED", output)
    assert order == ["vllm", "vllm", "external", "external"]
    column, rows = comparison_table(output, "vllm", PROFILES)
    assert list(column)[:5] == ["profile", "variant", "total tok/s", "vs vllm", "mean TPOT (ms)"]
    assert set(rows) == {
        ("short", "vllm"),
        ("short", "external"),
        ("medium", "vllm"),
        ("medium", "external"),
    }
    for profile in ("short", "medium"):
        assert rows[(profile, "vllm")][column["vs vllm"]] == "-"  # the reference itself
        change = rows[(profile, "external")][column["vs vllm"]]
        assert re.fullmatch(r"[+-]\d+\.\d%", change), change
        vllm_tps = float(rows[(profile, "vllm")][column["total tok/s"]].replace(",", ""))
        external_tps = float(rows[(profile, "external")][column["total tok/s"]].replace(",", ""))
        expected = (external_tps - vllm_tps) / vllm_tps * 100
        assert float(change.rstrip("%")) == pytest.approx(expected, abs=0.06)
    # Both engines' baselines were recorded under their own names.
    recorded = sorted(p.name for p in (tmp_path / "baselines" / "cpu").rglob("*.yaml"))
    assert recorded == ["external.yaml", "vllm.yaml"]
