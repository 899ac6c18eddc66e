"""Files for tests: what a new file's permissions are here, waiting for a file another
process writes, and a reviewer's edit of a baseline file."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml


def default_file_mode() -> int:
    """The mode ``open()`` gives a new file here: 0o666 less the umask (0o644 under 022)."""
    umask = os.umask(0)
    os.umask(umask)  # reading the umask means setting it: put it straight back
    return 0o666 & ~umask


def wait_for_file(
    path: Path,
    timeout: float,
    *,
    writer: subprocess.Popen[bytes] | None = None,
    interval: float = 0.02,
) -> bool:
    """Wait up to ``timeout`` seconds for ``path`` to exist; whether it does. Stand-in
    engines and child pytest runs announce themselves by writing a file, so this is how a
    test knows they got that far. When ``writer`` (the process that is to write it) exits
    first, the wait is over and the test fails with what that process printed, which says
    why far better than a timeout would."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        # The file is looked for once more: the writer may have written it and exited
        # between the loop's look and this poll.
        if writer is not None and writer.poll() is not None and not path.exists():
            output = writer.communicate()[0].decode(errors="replace")
            pytest.fail(
                f"the process that was to write {path.name} exited with {writer.returncode}"
                f" first; its output:\n{output}"
            )
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def widen_tolerances(
    path: Path,
    percent: float = 900.0,
    metrics: tuple[str, ...] = ("total_token_throughput", "mean_tpot_ms"),
) -> None:
    """Gate every entry of a baseline file (its profiles and each variant's) on ``metrics``
    with a tolerance no noise can exceed, as a reviewer would: a later compare must then
    pass, so a test can check the verdict itself instead of an exit code."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    sections = [document, *(document.get("variants") or {}).values()]
    for section in sections:
        for entry in (section.get("profiles") or {}).values():
            entry["tolerances"] = dict.fromkeys(metrics, percent)
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
