"""write_atomically: all or nothing, and never a temporary file left behind by an interrupt.

The real-signal version (SIGINT and SIGKILL sent to a process in the middle of 4 MB writes)
is in tests/reliability/test_baseline_safety.py; these tests put the interrupt exactly where
a random signal only rarely lands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf import atomic
from pytest_llmperf.atomic import temporary_pattern, write_atomically
from tests.support.files import default_file_mode

REAL_OPEN = os.open


def test_replaces_the_file_whole_with_readable_permissions(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "baseline.yaml"
    write_atomically(target, "old\n")
    write_atomically(target, "nëw\n")
    write_atomically(tmp_path / "raw.bin", b"\x00\xff")
    assert target.read_text(encoding="utf-8") == "nëw\n"
    assert (tmp_path / "raw.bin").read_bytes() == b"\x00\xff"
    assert sorted(p.name for p in target.parent.iterdir()) == ["baseline.yaml"]
    assert target.stat().st_mode & 0o777 == default_file_mode()


def _open_then_interrupt(*args: Any, **kwargs: Any) -> int:
    """Ctrl-C between the file's creation and the return of its descriptor: with
    ``tempfile.mkstemp`` the file stayed behind, its name known to nobody."""
    os.close(REAL_OPEN(*args, **kwargs))
    raise KeyboardInterrupt


def _interrupted_replace(*args: Any) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("step", "interrupted"),
    [("open", _open_then_interrupt), ("replace", _interrupted_replace)],
    ids=["right-after-the-temporary-is-created", "before-the-rename"],
)
def test_an_interrupt_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, interrupted: Any
) -> None:
    target = tmp_path / "baseline.yaml"
    target.write_text("kept\n")
    monkeypatch.setattr(atomic.os, step, interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, "new\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baseline.yaml"]
    assert target.read_text() == "kept\n"


def test_a_name_taken_by_another_writer_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "baseline.yaml"
    theirs = tmp_path / ".baseline.yaml.aaaa.tmp"
    theirs.write_text("another writer's half\n")
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(names))
    write_atomically(target, "new\n")
    assert target.read_text() == "new\n"
    assert theirs.read_text() == "another writer's half\n"
    assert sorted(tmp_path.glob(temporary_pattern(target))) == [theirs]


def test_the_pattern_matches_only_this_files_temporaries(tmp_path: Path) -> None:
    target = tmp_path / "a[1].yaml"  # glob characters in the name are taken literally
    for name in (".a[1].yaml.0f.tmp", ".a1.yaml.0f.tmp", ".a[1].yaml.0f", "a[1].yaml"):
        (tmp_path / name).write_text("")
    assert [p.name for p in tmp_path.glob(temporary_pattern(target))] == [".a[1].yaml.0f.tmp"]
