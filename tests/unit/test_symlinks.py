"""Symbolic links: a linked baseline is updated where it lives; appends never follow one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_llmperf.atomic import append_text
from pytest_llmperf.errors import ConfigError
from pytest_llmperf.gate import store
from pytest_llmperf.reports import history

ENTRY = {"status": "ok", "metrics": {"total_token_throughput": 1.0, "mean_tpot_ms": 1.0}}
HEADER = {"hardware": "cpu", "model": "m", "engine": "vllm"}


def test_a_linked_baseline_is_written_through_the_link_and_locked_at_its_target(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared" / "vllm.yaml"
    store.record_entry(shared, "short", ENTRY, header=HEADER)
    link = tmp_path / "baselines" / "cpu" / "m" / "vllm.yaml"
    link.parent.mkdir(parents=True)
    link.symlink_to(Path("../../../shared/vllm.yaml"))

    store.record_entry(link, "medium", ENTRY, header=HEADER)

    assert link.is_symlink()  # still a link, not a copy that stops following the target
    assert set(yaml.safe_load(shared.read_text())["profiles"]) == {"short", "medium"}
    assert (shared.parent / ".vllm.yaml.lock").exists()
    assert not (link.parent / ".vllm.yaml.lock").exists()


def test_history_is_never_appended_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    planted = tmp_path / "history.jsonl"
    planted.symlink_to(victim)
    with pytest.raises(ConfigError, match=r"history.jsonl is a symbolic link \(to .*victim"):
        history.append(planted, [{"timestamp": "t", "profile": "p"}])
    assert victim.read_text() == "keep me\n"


def test_summary_appends_never_follow_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    planted = tmp_path / "summary.md"
    planted.symlink_to(victim)
    with pytest.raises(ConfigError, match="name the file itself"):
        append_text(planted, "## summary\n")
    assert victim.read_text() == "keep me\n"
    regular = tmp_path / "step.md"
    append_text(regular, "a\n")
    append_text(regular, "b\n")
    assert regular.read_text() == "a\nb\n"
