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

from pytest_llmperf.engines import fingerprint
from pytest_llmperf.gate import store


@dataclass(frozen=True)
class Placement:
    named: Path  # the file of the hardware key the run uses
    own: Path  # the file of this machine's own key (== named when the keys agree)
    write_own: bool = False  # the key was detected, not named: this machine writes its own

    @property
    def distinct(self) -> bool:
        return self.own != self.named


@dataclass(frozen=True)
class Found:
    """The entry a run is compared with, and where it was found (``None``: no entry)."""

    entry: store.BaselineEntry | None
    path: Path


def place(
    root: Path, hardware: str, machine_key: str, model: str, engine: str, *, detected: bool
) -> Placement:
    return Placement(
        named=store.baseline_path(root, hardware, model, engine),
        own=store.baseline_path(root, machine_key, model, engine),
        write_own=detected,
    )


def find(
    placement: Placement, profile: str, variant: str | None, machine: fingerprint.Fingerprint | None
) -> Found:
    """This machine's own entry when it has one of this machine, else the named file's, else
    whatever entry there is (another machine's: the run reports that)."""
    named = store.load_entry(placement.named, profile, variant)
    if not placement.distinct:
        return Found(named, placement.named)
    own = store.load_entry(placement.own, profile, variant)
    if own is not None and (named is None or _of(own, machine)):
        return Found(own, placement.own)
    return Found(named, placement.named)


def _of(entry: store.BaselineEntry, machine: fingerprint.Fingerprint | None) -> bool:
    """The entry was measured on a machine like this one (or does not say)."""
    return (
        entry.machine is None
        or machine is None
        or not fingerprint.differences(entry.machine, machine)
    )


def others_in(path: Path, machine: fingerprint.Fingerprint) -> list[dict[str, Any]]:
    """Fingerprints in ``path`` of machines that do not compare with ``machine``."""
    return [m for m in store.recorded_machines(path) if fingerprint.differences(m, machine)]


def destination(placement: Placement, machine: fingerprint.Fingerprint | None) -> Path | None:
    """Where this machine's numbers go; ``None`` when every candidate holds another
    machine's entries (two machines share a key: the user must name another one)."""
    if machine is None:
        return placement.named

    def usable(path: Path) -> bool:
        return not others_in(path, machine)

    if not placement.distinct:
        return placement.named if usable(placement.named) else None
    if placement.own.exists() and usable(placement.own):
        return placement.own  # this machine's own file: reads and writes stay together
    order = [placement.own, placement.named]
    if not placement.write_own and usable(placement.named):
        order.reverse()
    return next((path for path in order if usable(path)), None)
