"""Two real engines in one session: `pytest --engine=vllm,llamacpp --hardware=cpu` serves the
embedded tiny model on vLLM's CPU build and on llama-server, and compares them per profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import requires_vllm
from tests.support.comparison import comparison_table, run_engines
from tests.support.llama_server import requires_llama_server

pytestmark = [pytest.mark.e2e, requires_vllm, requires_llama_server]

PROFILES = ("short", "medium")


def test_vllm_and_llamacpp_embedded_in_one_session(
    pytester: pytest.Pytester, tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytester gives the run a HOME of its own: point it at this cache, where the tiny model,
    # its GGUF and the llama-server build already are.
    monkeypatch.setenv("LLMPERF_CACHE_DIR", str(tiny_model_dir.parent))
    result = run_engines(
        pytester,
        "--engine=vllm,llamacpp",
        "--num-prompts=8",
        profiles=PROFILES,
        baselines=tmp_path / "baselines",
    )
    result.assert_outcomes(passed=4)
    column, rows = comparison_table(result.stdout.str(), "vllm", PROFILES)
    assert set(rows) == {(p, e) for p in PROFILES for e in ("vllm", "llamacpp")}
    for profile in PROFILES:
        assert rows[(profile, "vllm")][column["vs vllm"]] == "-"
        change = rows[(profile, "llamacpp")][column["vs vllm"]]
        assert re.fullmatch(r"[+-]\d+\.\d%", change), change
    recorded = sorted(p.name for p in (tmp_path / "baselines" / "cpu").rglob("*.yaml"))
    assert recorded == ["llamacpp.yaml", "vllm.yaml"]
