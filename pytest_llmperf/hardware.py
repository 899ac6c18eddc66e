"""Which accelerator this machine has, as a baseline key (a100, h100, 910b, cpu, ...).

Detection only informs: the user's ``--hardware`` names the baseline; a mismatch with what is
detected is reported, because comparing an A100 run with an H100 baseline is a false alarm.
"""

from __future__ import annotations

import re
import shutil
import subprocess

KNOWN_HARDWARE = (
    "a100", "a10", "a800", "b200", "gb200", "h100", "h20", "h200", "h800", "l4", "l40",
    "l40s", "mi300x", "t4", "v100", "910b", "910c", "310p", "cpu",
)  # fmt: skip

# Order matters: longer names first, so "H200" is not read as "H20" nor "L40S" as "L40".
_NVIDIA_PATTERNS = [
    (re.compile(rf"\b{name}\b", re.IGNORECASE), name)
    for name in ("gb200", "b200", "h200", "h100", "h800", "h20", "a100", "a800", "a10",
                 "l40s", "l40", "l4", "v100", "t4")
]  # fmt: skip


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def classify_nvidia(names: str) -> str | None:
    for pattern, key in _NVIDIA_PATTERNS:
        if pattern.search(names):
            return key
    return None


def classify_ascend(text: str) -> str | None:
    match = re.search(r"\b(910[A-C]?\d?|310P?)\b", text, re.IGNORECASE)
    if not match:
        return None
    name = match.group(1).lower()
    return "910b" if name.startswith("910b") else name


def detect() -> str:
    """The accelerator key of this machine, ``cpu`` when none is found."""
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if names:
        return classify_nvidia(names) or re.sub(r"\W+", "-", names.splitlines()[0].lower())
    ascend = _run(["npu-smi", "info"])
    if ascend:
        return classify_ascend(ascend) or "ascend"
    return "cpu"
