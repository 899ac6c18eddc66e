"""Which loads a sweep measures: an explicit list, or a search for the boundary (issue 18).

A sweep varies one axis of a profile, the request rate (Poisson or gamma arrivals) or the
maximum concurrency, and measures one normal run per step. This module only chooses the next
load; whether a step is past the boundary (an SLO broken, or the server saturated) is judged
by the caller (``gate.capacity``), so the search is pure and tested without a server.

The automatic search grows the load geometrically from ``start`` until a step is past the
boundary (or the first step already is: then it shrinks geometrically until one is within),
then bisects the bracket between the highest step within and the lowest step past it, until
the bracket is narrower than ``resolution`` (relative) or the step budget is spent. A
concurrency is a whole number, so there the bisection stops at adjacent integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pytest_llmperf.errors import ConfigError

__all__ = ["AXES", "SweepSearch", "SweepSpec"]

Axis = Literal["request_rate", "max_concurrency"]
AXES: tuple[Axis, ...] = ("request_rate", "max_concurrency")


@dataclass(frozen=True)
class SweepSpec:
    """How a sweep picks its loads. ``loads`` set: exactly those, in increasing order."""

    axis: Axis
    loads: tuple[float, ...] = ()
    start: float = 1.0
    factor: float = 2.0
    max_steps: int = 8
    resolution: float = 0.05  # stop bisecting when (above - within) / within is at most this
    max_load: float = 4096.0  # the geometric growth never goes past this
    # ... and shrinking never below this: each step lasts num_prompts / rate seconds, so an
    # unbounded shrink on an overloaded server can take many minutes.
    min_load: float = 0.0

    def __post_init__(self) -> None:
        if self.axis not in AXES:
            raise ConfigError(f"sweep axis must be one of {', '.join(AXES)}, got {self.axis!r}")
        if any(not (load > 0 and math.isfinite(load)) for load in self.loads):
            raise ConfigError(f"sweep loads must be positive finite numbers, got {self.loads}")
        if self.integral and any(load != int(load) for load in self.loads):
            raise ConfigError(f"max_concurrency loads must be whole numbers, got {self.loads}")
        if not (self.start > 0 and math.isfinite(self.start)):
            raise ConfigError(f"sweep start must be a positive number, got {self.start}")
        if self.integral and self.start != int(self.start):
            raise ConfigError(f"a max_concurrency sweep starts at a whole number, got {self.start}")
        if not self.factor > 1:
            raise ConfigError(f"sweep factor must be > 1, got {self.factor}")
        if self.max_steps < 1:
            raise ConfigError(f"sweep max_steps must be >= 1, got {self.max_steps}")
        if not self.resolution > 0:
            raise ConfigError(f"sweep resolution must be > 0, got {self.resolution}")
        if not self.max_load >= self.start:
            raise ConfigError(f"sweep max_load {self.max_load} is below its start {self.start}")
        if not 0 <= self.min_load <= self.start:
            raise ConfigError(f"sweep min_load {self.min_load} must be in [0, start {self.start}]")

    @property
    def integral(self) -> bool:
        return self.axis == "max_concurrency"

    @property
    def explicit(self) -> bool:
        return bool(self.loads)


@dataclass
class SweepSearch:
    """Asks for loads one at a time: ``next_load()``, measure it, ``record(load, past)``.

    ``past`` is True when the step is past the boundary (an SLO broken or saturated).
    ``next_load()`` returns None when the sweep is done.
    """

    spec: SweepSpec
    steps: list[tuple[float, bool]] = field(default_factory=list)

    def record(self, load: float, past: bool) -> None:
        self.steps.append((load, past))

    @property
    def within(self) -> float | None:
        """The highest measured load within the boundary below every load past it."""
        lowest_past = self.lowest_past
        loads = [load for load, past in self.steps if not past]
        if lowest_past is not None:
            loads = [load for load in loads if load < lowest_past]
        return max(loads, default=None)

    @property
    def lowest_past(self) -> float | None:
        return min((load for load, past in self.steps if past), default=None)

    def next_load(self) -> float | None:
        if len(self.steps) >= self.spec.max_steps:
            return None
        if self.spec.explicit:
            remaining = sorted(self.spec.loads)[len(self.steps) :]
            return remaining[0] if remaining else None
        if not self.steps:
            return self._whole(self.spec.start)
        within, past = self.within, self.lowest_past
        if past is None:  # still growing
            assert within is not None
            if within >= self.spec.max_load:
                return None
            return self._whole(min(within * self.spec.factor, self.spec.max_load), up=True)
        if within is None:  # even the lowest load was past: shrink
            if past <= self.spec.min_load:
                return None  # past already at the lowest load allowed
            lower = max(self._whole(past / self.spec.factor), self.spec.min_load)
            if self.spec.integral and lower >= past:
                return None  # concurrency 1 is past already: nothing below to find
            return lower
        return self._bisect(within, past)

    def _bisect(self, within: float, past: float) -> float | None:
        if self.spec.integral:
            if past - within <= 1:
                return None
            return float(math.floor((within + past) / 2))
        if (past - within) / within <= self.spec.resolution:
            return None
        return (within + past) / 2

    def _whole(self, load: float, *, up: bool = False) -> float:
        if not self.spec.integral:
            return load
        return float(max(1, math.ceil(load) if up else math.floor(load)))
