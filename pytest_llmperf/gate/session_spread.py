"""How much a profile's result moves from one session to the next on this machine, read from
the history file (``--llmperf-history``): a floor under the stored baseline's error for the
sequential rule (``gate/sequential.py``).

Why. A baseline recorded with ``--llmperf-repeat N`` knows the spread of runs taken back to
back, seconds apart. A shared machine also drifts in phases minutes or hours long (other
tenants, thermal state, page cache), and a stored baseline was measured in one such phase:
today's runs differ from it by the phase shift however many runs either side takes. The
sequential rule built its interval from the back-to-back spread only, so a phase shift read
as a regression (docs/noise.md: 4 false alarms in 10 unchanged gates on ``long``). The
history holds one median per session of the same configuration on the same machine: their
spread is what a session's result really varies by.

The estimate is robust (1.4826 times the median absolute deviation of the logs): one real
regression or improvement among the sessions moves it little, and leaving out the sessions
that regressed would hide exactly the phases this is for. It is used only with at least
``MIN_SESSIONS`` sessions, the last ``SESSIONS_USED`` of them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SESSIONS_USED = 10  # recent enough to describe the machine as it is now
MIN_SESSIONS = 5  # a MAD of fewer is too uncertain to widen or narrow anything by
MAD_TO_SD = 1.4826  # the MAD of a normal sample times this estimates its standard deviation


@dataclass(frozen=True)
class Series:
    """One configuration on one profile on one kind of machine: the history lines that
    describe the same thing the baseline does."""

    machine: str | None  # the fingerprint's key; None where the machine was not fingerprinted
    engine: str
    variant: str  # the configuration's name as the history writes it (variant or engine)
    model: str
    profile: str
    num_prompts: int | None

    def matches(self, item: Mapping[str, Any]) -> bool:
        return (
            item.get("machine") == self.machine
            and item.get("engine") == self.engine
            and item.get("variant") == self.variant
            and item.get("model") == self.model
            and item.get("profile") == self.profile
            and item.get("num_prompts") == self.num_prompts
        )


@dataclass(frozen=True)
class SessionSpread:
    sd: float  # standard deviation of the log of one session's median
    sessions: int  # how many sessions it came from
    center: float | None = None  # the median of those sessions' values

    def baseline_off(self, baseline: float) -> float | None:
        """How far ``baseline`` lies from the sessions' median, in percent, when that is more
        than twice their spread (a baseline recorded in an unusual phase); else None."""
        if self.center is None or self.center <= 0 or baseline <= 0:
            return None
        shift = math.log(baseline / self.center)
        return math.expm1(shift) * 100.0 if abs(shift) > 2.0 * self.sd else None


def robust_log_sd(values: Sequence[float]) -> float:
    """The MAD-based standard deviation of the logs of positive values."""
    logs = [math.log(value) for value in values]
    center = statistics.median(logs)
    return MAD_TO_SD * statistics.median(abs(value - center) for value in logs)


def session_spread(items: Iterable[Mapping[str, Any]], series: Series) -> dict[str, SessionSpread]:
    """Per metric, the spread between the last sessions of ``series`` in the history
    ``items`` (oldest first, as ``reports.history.read`` gives them); metrics with fewer than
    ``MIN_SESSIONS`` sessions are left out. One value per session: a session that measured
    the profile twice (a rerun, two variants named alike) counts once, with its last line."""
    by_session: dict[str, Mapping[str, Any]] = {}
    for item in items:
        if series.matches(item):
            by_session[str(item.get("timestamp"))] = item.get("metrics") or {}
    recent = list(by_session.values())[-SESSIONS_USED:]
    out: dict[str, SessionSpread] = {}
    for metric in dict.fromkeys(key for m in recent for key in m):
        values = [float(m[metric]) for m in recent if _positive(m.get(metric))]
        if len(values) >= MIN_SESSIONS:
            out[metric] = SessionSpread(
                robust_log_sd(values), len(values), statistics.median(values)
            )
    return out


def _positive(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
