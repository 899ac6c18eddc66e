"""Shared pieces of the noise scripts: one embedded vLLM server, its profiles, the load.

The scripts measure the product: they start the server the way the plugin starts it
(``runner.EngineSession``: vLLM's CPU build, the embedded tiny model, dev mode for the
prefix-cache reset) and measure with ``runner.measure`` (warm-ups, cache reset, load,
vLLM's metrics), so the figures are those a ``pytest --engine=vllm --hardware=cpu`` run sees.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.config import Settings
from pytest_llmperf.engines.session import EngineSession, Target
from pytest_llmperf.measure.profiles import WorkloadProfile, builtin_profiles
from pytest_llmperf.measure.run import Workloads, scaled_profile

# The metrics a baseline gates by default, then the ones a reviewer might gate instead.
GATED = ("total_token_throughput", "mean_tpot_ms")
WATCHED = (
    *GATED,
    "output_throughput",
    "mean_ttft_ms",
    "median_tpot_ms",
    "mean_itl_ms",
    "mean_e2el_ms",
    "duration",
)


@dataclass
class Embedded:
    target: Target
    workloads: Workloads
    settings: Settings

    def profile(self, name: str) -> WorkloadProfile:
        """A built-in profile at the scale CI runs it (its embedded_num_prompts)."""
        return scaled_profile(builtin_profiles()[name], self.settings, embedded=True)


@contextlib.contextmanager
def embedded_server(
    engine_args: Sequence[str] = (), warmups: int | None = None
) -> Iterator[Embedded]:
    """The embedded default (vLLM CPU, tiny model) as the plugin starts it; stopped on exit."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    settings = Settings(engines=("vllm",), hardware="cpu", engine_args=tuple(engine_args))
    if warmups is not None:
        settings = dataclasses.replace(settings, warmups=warmups)
    with tempfile.TemporaryDirectory(prefix="llmperf-noise-") as tmp:
        work = Path(tmp)
        session = EngineSession(settings, "vllm", work)
        target = session.start()
        try:
            yield Embedded(target, Workloads(settings, work / "data"), settings)
        finally:
            session.stop()


def load_average() -> float:
    return os.getloadavg()[0]


def cv_pct(values: Sequence[float]) -> float:
    """Coefficient of variation in percent (sample standard deviation over the mean)."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) * 100.0 if mean else 0.0


def worst_pct(values: Sequence[float]) -> float:
    """The largest distance of one value from the median, in percent of the median: what a
    single-run gate with a fixed tolerance has to absorb."""
    center = statistics.median(values)
    return max(abs(v - center) for v in values) / abs(center) * 100.0 if center else 0.0


def wait_for_quiet(below: float | None, timeout_s: float = 3600.0) -> float:
    """Wait until the 1-minute load average is under ``below`` (the machine is shared; a
    measurement of noise should say under what load it was taken). Returns the load seen."""
    load = load_average()
    if below is None:
        return load
    deadline = time.monotonic() + timeout_s
    while load >= below and time.monotonic() < deadline:
        time.sleep(15)
        load = load_average()
    return load


def parse_tolerances(
    text: str | None, allowed: Collection[str] | None = None
) -> dict[str, float] | None:
    """``METRIC=PERCENT,...`` as the scripts' ``--tolerances`` take it, or None when empty.

    ``allowed``, where given, names the metrics the script can gate: a script that reads only
    some metrics' ratios would otherwise gate an unseen one. Errors name the option and the
    item and say what was expected (a script's user sees them instead of a traceback).
    """
    if not text:
        return None
    tolerances: dict[str, float] = {}
    for item in text.split(","):
        metric, _, value = item.partition("=")
        metric = metric.strip()
        try:
            percent = float(value)
        except ValueError:
            percent = -1.0
        if not metric or not 0 < percent < float("inf"):
            raise SystemExit(
                f"--tolerances: {item.strip()!r} is not METRIC=PERCENT with a positive percent "
                f"(e.g. total_token_throughput=5)"
            )
        tolerances[metric] = percent
    unknown = sorted(set(tolerances) - set(allowed)) if allowed is not None else []
    if unknown:
        raise SystemExit(
            f"--tolerances: {', '.join(unknown)} is not one of {', '.join(allowed or ())}"
        )
    return tolerances
