"""A process that updates one baseline file over and over, to be interrupted by tests.

``python tests/reliability/baseline_writer.py PATH PROFILE FIRST [COUNT]`` records entry
``FIRST``, ``FIRST + 1``, ... (COUNT of them, or until killed) for ``PROFILE`` (a ``#`` in it is
replaced by the entry's number: one profile per update), printing each number once its
update is complete. Entry ``k`` is the same in every process, so a test can tell which
complete update a file holds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pytest_llmperf.gate import store

SCRIPT = Path(__file__).resolve()
HEADER = {"hardware": "cpu", "model": "tiny-qwen3", "engine": "vllm"}


def entry(k: int) -> dict[str, Any]:
    return {
        "status": "ok",
        "recorded": "2025-01-01",
        "runs": 1,
        "metrics": {f"metric_{i}": float(k * 1000 + i) for i in range(12)},
    }


def seed(path: Path, fillers: int) -> None:
    """A file of ``fillers`` other profiles plus profile ``p`` at entry 0, in one write."""
    profiles = {f"filler-{i:03d}": entry(i) for i in range(fillers)}
    profiles["p"] = entry(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(store.dump_document({"schema": 1, **HEADER, "profiles": profiles}))


def main(argv: list[str]) -> None:
    path, pattern, first = Path(argv[0]), argv[1], int(argv[2])
    last = first + int(argv[3]) if len(argv) > 3 else None
    k = first
    while last is None or k < last:
        store.record_entry(path, pattern.replace("#", str(k)), entry(k), header=HEADER)
        print(k, flush=True)
        k += 1


if __name__ == "__main__":
    main(sys.argv[1:])
