"""Which baseline file a profile is read from and written to on this machine.

Two folders can hold a profile's baseline: the one of the hardware key the run names
(``--hardware=cpu`` → ``baselines/cpu/...``, a family several machines may share) and the one
of this machine's own key (``baselines/cpu-avx-2c/...``, from its fingerprint). A machine's
own file wins when it has the entry. Numbers go to the named folder unless it already holds
another machine's entries: then to the machine's own folder, so that recording on one machine
never overwrites what another recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf import baseline, fingerprint


@dataclass(frozen=True)
class Placement:
    named: Path  # the file of the hardware key the run uses
    own: Path  # the file of this machine's own key (== named when the keys agree)

    @property
    def distinct(self) -> bool:
        return self.own != self.named


@dataclass(frozen=True)
class Found:
    """The entry a run is compared with, and where it was found (``None``: no entry)."""

    entry: baseline.BaselineEntry | None
    path: Path


def place(root: Path, hardware: str, machine_key: str, model: str, engine: str) -> Placement:
    return Placement(
        named=baseline.baseline_path(root, hardware, model, engine),
        own=baseline.baseline_path(root, machine_key, model, engine),
    )


def find(placement: Placement, profile: str, variant: str | None) -> Found:
    """This machine's own entry when it has one, else the named file's (possibly None)."""
    if placement.distinct:
        own = baseline.load_entry(placement.own, profile, variant)
        if own is not None:
            return Found(own, placement.own)
    return Found(baseline.load_entry(placement.named, profile, variant), placement.named)


def others_in(path: Path, machine: fingerprint.Fingerprint) -> list[dict[str, Any]]:
    """Fingerprints in ``path`` of machines that do not compare with ``machine``."""
    return [m for m in baseline.recorded_machines(path) if fingerprint.differences(m, machine)]


def destination(placement: Placement, machine: fingerprint.Fingerprint | None) -> Path | None:
    """Where this machine's numbers go; ``None`` when the only candidate holds another
    machine's entries (the two share a key: the user must name another one)."""
    if machine is None:
        return placement.named
    if placement.distinct and (placement.own.exists() or others_in(placement.named, machine)):
        return None if others_in(placement.own, machine) else placement.own
    return None if others_in(placement.named, machine) else placement.named
