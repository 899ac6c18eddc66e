"""What the session measured, kept for the summary, the JSON file and the hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.engines.fingerprint import differs
from pytest_llmperf.models import Verdict


@dataclass(frozen=True)
class ProfileResult:
    nodeid: str
    engine: str
    profile: str
    hardware: str
    model: str
    metrics: dict[str, Any]
    workload: dict[str, Any]
    verdict: Verdict
    engine_version: str | None
    command: str
    baseline_file: str
    runs: int = 1
    spread: dict[str, float] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    variant: str = ""  # the configuration's name (--llmperf-variants); "" = the engine's own
    series: dict[str, Any] = field(default_factory=dict)  # series.summarize(): for the plots
    machine: dict[str, Any] | None = None  # the measuring machine (fingerprint.as_dict())
    baseline_machine: dict[str, Any] | None = None  # the machine of the baseline compared with
    ab: dict[str, Any] | None = None  # an A/B experiment (gate/ab.py): pairs, ratios, intervals
    sweep: dict[str, Any] = field(default_factory=dict)  # a sweep's curve (gate.sweep); else {}
    baseline_sweep: dict[str, Any] | None = None  # the baseline's curve, for the reports

    @property
    def machines_differ(self) -> bool:
        """Reports show both machines when they differ (and only the key when not)."""
        return differs(self.baseline_machine, self.machine)

    @property
    def label(self) -> str:
        """The configuration as reports name it: the variant, else the engine."""
        return self.variant or self.engine


@dataclass
class Ledger:
    results: list[ProfileResult] = field(default_factory=list)
    failed_starts: dict[str, str] = field(default_factory=dict)  # variant -> error line
    output_errors: list[str] = field(default_factory=list)  # reports that could not be written

    def add(self, result: ProfileResult) -> None:
        self.results.append(result)
