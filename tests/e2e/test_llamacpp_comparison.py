"""Two real engines in one session: `pytest --engine=vllm,llamacpp --hardware=cpu` serves the
embedded tiny model on vLLM's CPU build and on llama-server, and compares them per profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import requires_vllm
from tests.support.llama_server import requires_llama_server

pytestmark = [pytest.mark.e2e, requires_vllm, requires_llama_server]

SUITE = "def test_serving(llmperf):\n    llmperf.check()\n"
PROFILES = ("short", "medium")


def _table_rows(output: str) -> tuple[dict[str, int], dict[tuple[str, str], list[str]]]:
    """The comparison table's columns and its rows keyed by (profile, variant)."""
    table = output.split("comparison (total token throughput and mean TPOT against vllm)", 1)[1]
    header_line = next(line for line in table.splitlines() if line.startswith("profile"))
    header = re.split(r"\s{2,}", header_line.strip())
    rows = {
        (cells[0], cells[1]): cells
        for line in table.splitlines()
        if (cells := re.split(r"\s{2,}", line.strip()))[0] in PROFILES
    }
    return {name: index for index, name in enumerate(header)}, rows


def test_vllm_and_llamacpp_embedded_in_one_session(
    pytester: pytest.Pytester, tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytester gives the run a HOME of its own: point it at this cache, where the tiny model,
    # its GGUF and the llama-server build already are.
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tiny_model_dir.parent))
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    result = pytester.runpytest_subprocess(
        "--engine=vllm,llamacpp",
        "--hardware=cpu",
        f"--llmperf-profile={','.join(PROFILES)}",
        "--num-prompts=8",
        "--llmperf-warmups=2",
        "--update-baselines",
        f"--baseline-dir={tmp_path / 'baselines'}",
        "-p",
        "no:cacheprovider",
        "-v",
        timeout=600,
    )
    result.assert_outcomes(passed=4)
    output = result.stdout.str()
    column, rows = _table_rows(output)
    assert set(rows) == {(p, e) for p in PROFILES for e in ("vllm", "llamacpp")}
    for profile in PROFILES:
        assert rows[(profile, "vllm")][column["vs vllm"]] == "-"
        change = rows[(profile, "llamacpp")][column["vs vllm"]]
        assert re.fullmatch(r"[+-]\d+\.\d%", change), change
    recorded = sorted(p.name for p in (tmp_path / "baselines" / "cpu").rglob("*.yaml"))
    assert recorded == ["llamacpp.yaml", "vllm.yaml"]
