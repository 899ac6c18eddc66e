"""Hardware keys of baseline folders: families (a100, h100, 910b, cpu, ...) and how an
accelerator's name maps to one.

A detected key is a machine key (``fingerprint.machine_key``: ``cpu-avx512-2c``,
``a100-80gb``); a key the user gives may be a family (``--hardware=cpu``), whose folder can
hold another machine's numbers: the fingerprint in each entry decides whether they compare.
"""

from __future__ import annotations

import re

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


# A key the user gives: a known family (``cpu``, ``a100``) or a machine key as detection makes
# them (``cpu-avx512-2c``, ``a100-80gb-x8``): lowercase words joined by dashes.
_KEY = re.compile(r"^[a-z0-9][a-z0-9.]*(-[a-z0-9.]+)*$")


def valid_key(key: str) -> bool:
    return key in KNOWN_HARDWARE or (bool(_KEY.match(key)) and family(key) in KNOWN_HARDWARE)


def family(key: str) -> str:
    """``cpu-avx512-2c`` → ``cpu``; ``a100-80gb`` → ``a100``; a family is its own family."""
    return key.split("-", 1)[0]
