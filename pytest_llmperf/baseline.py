"""Baseline files: find, load and validate them, write them safely, compare a run against them.

A baseline file (`baselines/<hardware>/<model-slug>/<engine>.yaml`, see docs/baselines.md) is
reviewed like code, so writes keep its shape: keys in a fixed order, tolerances a reviewer
edited kept, other profiles untouched. Writes go to a temporary file that replaces the old one
in a single rename, under a file lock, so an interrupt or a second writer never leaves a torn
or partial file behind.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_llmperf import redact
from pytest_llmperf.atomic import temporary_pattern, write_atomically, write_target
from pytest_llmperf.errors import BaselineError
from pytest_llmperf.models import Direction, MetricComparison, Outcome, Verdict

SCHEMA_VERSION = 1

# The seeds' KPIs (total token throughput and mean TPOT) are gated unless a file says otherwise.
DEFAULT_TOLERANCES: dict[str, float] = {"total_token_throughput": 5.0, "mean_tpot_ms": 10.0}

_TOP_ORDER = ("schema", "hardware", "model", "engine", "source", "note", "profiles", "variants")
_ENTRY_ORDER = (
    "status",
    "error",
    "recorded",
    "engine_version",
    "command",
    "machine",
    "runs",
    "workload",
    "metrics",
    "spread",
    "tolerances",
)
_VARIANT_ORDER = ("command", "model", "engine_version", "status", "error", "note", "profiles")
_HIGHER_IS_BETTER = re.compile(r"(throughput|_per_s|goodput|^completed$)")


def direction_of(metric: str) -> Direction:
    """Throughputs improve upwards; latencies, durations and failure counts downwards."""
    if _HIGHER_IS_BETTER.search(metric):
        return Direction.HIGHER_IS_BETTER
    return Direction.LOWER_IS_BETTER


def slug(text: str) -> str:
    """A safe path component: ``Qwen/Qwen3-32B`` → ``qwen3-32b``; never ``..`` or a slash."""
    last = text.rstrip("/").rsplit("/", 1)[-1].lower()
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", last).strip("-.")
    return cleaned or "unnamed"


def baseline_path(root: Path, hardware: str, model: str, engine: str) -> Path:
    from pytest_llmperf.modelkey import model_folder

    return model_folder(root, slug(hardware), model, f"{slug(engine)}.yaml")


# -- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineEntry:
    """One profile of a baseline file."""

    profile: str
    status: str
    metrics: dict[str, float]
    tolerances: dict[str, float]
    workload: dict[str, Any] | None
    engine_version: str | None
    command: str | None
    error: str | None
    spread: dict[str, float]
    runs: int
    machine: dict[str, Any] | None = None  # fingerprint.as_dict() of the measuring machine


def _fail(path: Path, where: str, problem: str) -> BaselineError:
    return BaselineError(
        f"{path}: {where}: {problem}. Fix the file by hand or move it away and record a new "
        f"one with --update-baselines"
    )


def _number_map(path: Path, where: str, raw: Any) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(path, where, f"expected a mapping of metric → number, got {type(raw).__name__}")
    out: dict[str, float] = {}
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, f"{where}.{key}", f"expected a number, got {value!r}")
        out[str(key)] = value  # counts stay integers: they print as recorded
    return out


def read_document(path: Path) -> dict[str, Any]:
    """Parse a baseline file; malformed YAML is reported with its file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline file: {exc.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"
        problem = getattr(exc, "problem", None) or str(exc)
        raise BaselineError(
            f"{path}: {where}: not valid YAML ({problem}). Fix the file by hand or restore it "
            f"from version control"
        ) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise _fail(path, "top level", "expected a mapping with 'profiles:'")
    schema = document.get("schema", SCHEMA_VERSION)
    if schema != SCHEMA_VERSION:
        raise _fail(path, "schema", f"unsupported schema {schema!r} (this plugin reads 1)")
    for key in ("profiles", "variants"):
        if document.get(key) is not None and not isinstance(document[key], dict):
            raise _fail(path, key, "expected a mapping of name → entry")
    return document


def parse_entry(path: Path, profile: str, raw: Any) -> BaselineEntry:
    where = f"profiles.{profile}"
    if not isinstance(raw, dict):
        raise _fail(path, where, "expected a mapping")
    status = raw.get("status", "ok")
    if status not in ("ok", "failed"):
        raise _fail(path, f"{where}.status", f"expected 'ok' or 'failed', got {status!r}")
    workload = raw.get("workload")
    if workload is not None and not isinstance(workload, dict):
        raise _fail(path, f"{where}.workload", "expected a mapping")
    metrics = _number_map(path, f"{where}.metrics", raw.get("metrics"))
    if status == "ok" and not metrics:
        raise _fail(path, f"{where}.metrics", "an 'ok' entry needs recorded metrics")
    tolerances = _number_map(path, f"{where}.tolerances", raw.get("tolerances"))
    for key, value in tolerances.items():
        if value < 0:
            raise _fail(path, f"{where}.tolerances.{key}", "a tolerance cannot be negative")
    runs = raw.get("runs", 1)
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise _fail(path, f"{where}.runs", f"expected a positive integer, got {runs!r}")
    version = raw.get("engine_version")
    machine = raw.get("machine")
    if machine is not None and not isinstance(machine, dict):
        raise _fail(path, f"{where}.machine", "expected a mapping (the machine's fingerprint)")
    return BaselineEntry(
        profile=profile,
        status=status,
        metrics=metrics,
        tolerances=tolerances,
        workload=workload,
        engine_version=None if version is None else str(version),
        command=raw.get("command"),
        error=raw.get("error"),
        spread=_number_map(path, f"{where}.spread", raw.get("spread")),
        runs=runs,
        machine=machine,
    )


def load_entry(path: Path, profile: str, variant: str | None = None) -> BaselineEntry | None:
    """The entry of a profile: of the file's ``profiles:``, or of ``variants.<variant>``."""
    document = read_document(path)
    section = document
    if variant is not None:
        section = (document.get("variants") or {}).get(variant) or {}
        if not isinstance(section, dict):
            raise _fail(path, f"variants.{variant}", "expected a mapping")
    raw = (section.get("profiles") or {}).get(profile)
    return None if raw is None else parse_entry(path, profile, raw)


def recorded_machines(path: Path) -> list[dict[str, Any]]:
    """The fingerprints of every entry of a file (its profiles and its variants' profiles)."""
    document = read_document(path)
    sections = [document, *(v for v in (document.get("variants") or {}).values())]
    machines = []
    for section in sections:
        profiles = section.get("profiles") if isinstance(section, dict) else None
        for raw in (profiles or {}).values():
            if isinstance(raw, dict) and isinstance(raw.get("machine"), dict):
                machines.append(raw["machine"])
    return machines


def load_all(path: Path) -> dict[str, BaselineEntry]:
    """Every profile entry of a file, validated (used to print and check whole files)."""
    document = read_document(path)
    return {
        name: parse_entry(path, name, raw) for name, raw in (document.get("profiles") or {}).items()
    }


# -- writing ---------------------------------------------------------------------------------


def _rounded(value: Any) -> Any:
    """Six significant digits: stable diffs, far below any run-to-run noise."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    return value


def _ordered(mapping: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    known = [key for key in order if key in mapping]
    rest = [key for key in mapping if key not in order]
    return {key: mapping[key] for key in [*known, *rest]}


class _Dumper(yaml.SafeDumper):
    """No aliases: a reviewer reads every value where it applies."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _ordered_profiles(section: dict[str, Any]) -> None:
    if isinstance(section.get("profiles"), dict):
        section["profiles"] = {
            name: _ordered(entry, _ENTRY_ORDER) if isinstance(entry, dict) else entry
            for name, entry in section["profiles"].items()
        }


def dump_document(document: Mapping[str, Any]) -> str:
    top = _ordered(document, _TOP_ORDER)
    _ordered_profiles(top)
    if isinstance(top.get("variants"), dict):
        variants = {}
        for name, raw in top["variants"].items():
            if isinstance(raw, dict):
                raw = _ordered(raw, _VARIANT_ORDER)
                _ordered_profiles(raw)
            variants[name] = raw
        top["variants"] = variants
    text: str = yaml.dump(
        top,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )
    return text


def _remove_stale_temporaries(path: Path) -> None:
    """Delete what writes of ``path`` killed before their rename left (SIGKILL runs no
    cleanup), so it is not committed next to the baseline. Called under the file's lock: no
    write of ``path`` can be under way."""
    for stale in path.parent.glob(temporary_pattern(path)):
        with contextlib.suppress(OSError):
            stale.unlink()


def record_entry(
    path: Path,
    profile: str,
    entry: Mapping[str, Any],
    *,
    header: Mapping[str, Any],
    lock_timeout: float = 120.0,
    variant: str | None = None,
    variant_header: Mapping[str, Any] | None = None,
) -> None:
    """Add or replace one profile's entry; keep tolerances a reviewer set and other profiles.

    With ``variant``, the entry goes to ``variants.<variant>.profiles`` and the variant's own
    keys (command, model, engine_version, status) are set from ``variant_header``.
    Read-modify-write happens under a lock file next to the baseline, so several pytest
    processes (xdist workers) updating different profiles of one file all land.
    """
    from filelock import FileLock, Timeout

    path = write_target(path)  # a linked baseline is updated where it lives
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path.with_name(f".{path.name}.lock")))
    try:
        lock.acquire(timeout=lock_timeout)
    except Timeout:
        raise BaselineError(
            f"{path}: could not lock the baseline within {lock_timeout:.0f} s: another process "
            f"holds {lock.lock_file}"
        ) from None
    try:
        document = read_document(path)
        if not document:
            document = {"schema": SCHEMA_VERSION, **header}
        section: dict[str, Any] = document
        if variant is not None:
            variants = dict(document.get("variants") or {})
            section = {**(variants.get(variant) or {}), **(variant_header or {})}
            section.update(status="ok", error=None)
            variants[variant] = section
            document["variants"] = variants
        profiles = dict(section.get("profiles") or {})
        previous = profiles.get(profile)
        new_entry = dict(entry)
        if isinstance(previous, dict) and isinstance(previous.get("tolerances"), dict):
            new_entry["tolerances"] = previous["tolerances"]  # a reviewer's edits win
        new_entry.setdefault("tolerances", dict(DEFAULT_TOLERANCES))
        new_entry["metrics"] = _rounded(new_entry.get("metrics", {}))
        if "spread" in new_entry:
            new_entry["spread"] = _rounded(new_entry["spread"])
        profiles[profile] = new_entry
        section["profiles"] = dict(sorted(profiles.items()))
        if variant is not None:
            document["variants"][variant] = _ordered(section, _VARIANT_ORDER)
        _remove_stale_temporaries(path)
        write_atomically(path, redact.text(dump_document(document)))
    finally:
        lock.release()


# -- comparing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateSettings:
    """How strict a comparison is (PR gate vs nightly, see settings)."""

    tolerance_scale: float = 1.0  # multiplies every tolerance
    # A change within this many standard errors of the difference is noise, whatever the
    # tolerance. 2, not 3: a regression is measured again before it fails (confirm reruns),
    # so a first look may be quicker to suspect. With k = 2 tests/bench/noise_table.py
    # measured 1 false alarm in 20 unchanged very-long gates and 20 of 20 slowdowns of
    # +10 % or more caught (docs/noise.md, "How often the gate is wrong").
    spread_factor: float = 2.0
    default_tolerances: Mapping[str, float] | None = None
    # A latency (``*_ms``) that moved by less than this many milliseconds did not move: a
    # client cannot resolve a token's time that finely, and near zero (a server that sent
    # a whole answer in one chunk: TPOT 0.0004 ms) any relative change is meaningless.
    floor_ms: float = 0.1


def noise_limit(
    recorded_cv: float | None,
    recorded_runs: int,
    measured_cv: float | None,
    measured_runs: int,
    factor: float,
    direction: Direction = Direction.LOWER_IS_BETTER,
) -> float:
    """The change (percent, in the worse ``direction``) that noise alone explains:
    ``factor`` standard errors of the difference between the baseline's center
    (``recorded_runs`` runs) and this one's (``measured_runs`` runs).

    The spread of one run is the coefficient of variation of the recorded runs and of this
    measurement's runs, pooled by their degrees of freedom (a spread written by hand without
    ``runs`` counts as one degree). Each center's error shrinks with its number of runs:
    ``sqrt(1/n + 1/m)``. Serving noise is multiplicative (a starved run is 2x slower, not
    50 ms slower), so the limit is taken on the log scale and turned back into percent: for
    a small spread that is ``factor * cv * sqrt(1/n + 1/m)``; for a large one a throughput
    limit stays short of -100 % (however noisy the baseline, some drop in throughput is
    a regression) and a latency limit grows past +100 %. With no spread known on either side, noise
    explains nothing and the tolerance alone decides.
    """
    weighted = 0.0
    degrees = 0
    for cv, runs in ((recorded_cv, max(recorded_runs, 2)), (measured_cv, measured_runs)):
        if cv is not None and runs > 1:
            sigma = math.log1p((cv / 100.0) ** 2)  # variance of the log of one run
            weighted += (runs - 1) * sigma
            degrees += runs - 1
    if not degrees:
        return 0.0
    error = math.sqrt(weighted / degrees)
    error *= math.sqrt(1.0 / max(measured_runs, 1) + 1.0 / max(recorded_runs, 1))
    if direction is Direction.HIGHER_IS_BETTER:
        return -math.expm1(-factor * error) * 100.0
    return math.expm1(factor * error) * 100.0


def _threshold(
    metric: str,
    tolerance: float,
    entry: BaselineEntry,
    measured_spread: float | None,
    measured_runs: int,
    gate: GateSettings,
) -> tuple[float, str]:
    """The allowed change in percent, and what decided it.

    A fixed tolerance cries wolf on noisy metrics; where the runs show more noise than the
    tolerance covers (``noise_limit``), the limit widens to that and the report says so.
    """
    tolerance = tolerance * gate.tolerance_scale
    noise = noise_limit(
        entry.spread.get(metric),
        entry.runs,
        measured_spread,
        measured_runs,
        gate.spread_factor,
        direction_of(metric),
    )
    if noise > tolerance:
        return noise, "spread"
    return tolerance, "tolerance"


def compare(
    entry: BaselineEntry,
    measured: Mapping[str, Any],
    *,
    tolerance_overrides: Mapping[str, float] | None = None,
    measured_spread: Mapping[str, float] | None = None,
    measured_runs: int = 1,
    gate: GateSettings | None = None,
) -> tuple[MetricComparison, ...]:
    """Each recorded metric against its measurement; a gated one (it has a tolerance) is
    ``regressed`` or ``improved`` when it moved beyond its limit, else ``pass``.

    ``measured`` is the center (median) of ``measured_runs`` runs whose spread (CV, %) is
    ``measured_spread``; the limit is the larger of the tolerance and ``noise_limit``.
    """
    gate = gate or GateSettings()
    tolerances = dict(entry.tolerances or gate.default_tolerances or DEFAULT_TOLERANCES)
    tolerances.update(tolerance_overrides or {})
    rows: list[MetricComparison] = []
    # Gated metrics first, in the order their tolerances are listed; then the rest by name.
    gated_order = {metric: index for index, metric in enumerate(tolerances)}
    ordered = sorted(entry.metrics, key=lambda m: (gated_order.get(m, len(gated_order)), m))
    for metric in ordered:
        value = measured.get(metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        baseline_value = entry.metrics[metric]
        direction = direction_of(metric)
        tolerance = tolerances.get(metric)
        comparison = MetricComparison(
            metric=metric,
            baseline=baseline_value,
            measured=float(value),
            tolerance_pct=tolerance,
            direction=direction,
            status="info",
        )
        if tolerance is None:
            rows.append(comparison)
            continue
        limit, decided_by = _threshold(
            metric, tolerance, entry, (measured_spread or {}).get(metric), measured_runs, gate
        )
        worse_by = comparison.change_pct
        if direction is Direction.LOWER_IS_BETTER:
            worse_by = -worse_by
        # worse_by < 0 means the metric got worse by that many percent
        if metric.endswith("_ms") and abs(float(value) - baseline_value) < gate.floor_ms:
            status, decided_by = "pass", "floor"
        elif worse_by < -limit:
            status = "regressed"
        elif worse_by > limit:
            status = "improved"
        else:
            status = "pass"
        rows.append(
            MetricComparison(
                metric=metric,
                baseline=baseline_value,
                measured=float(value),
                tolerance_pct=tolerance,
                direction=direction,
                status=status,
                threshold_pct=limit,
                decided_by=decided_by,
            )
        )
    missing = [m for m in tolerances if m in entry.metrics and m not in measured]
    if missing:
        raise BaselineError(f"gated metric(s) {', '.join(missing)} were not measured in this run")
    return tuple(rows)


def workload_differences(
    recorded: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> list[str]:
    """Human-readable differences between the baseline's workload and this run's."""
    if recorded is None:
        return []
    keys = sorted(set(recorded) | set(current))
    return [
        f"{key}: baseline {recorded.get(key)!r}, now {current.get(key)!r}"
        for key in keys
        if _normal(recorded.get(key)) != _normal(current.get(key))
    ]


def _normal(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def judge(
    entry: BaselineEntry | None,
    measured: Mapping[str, Any],
    workload: Mapping[str, Any],
    *,
    engine_version: str | None,
    baseline_file: Path,
    tolerance_overrides: Mapping[str, float] | None = None,
    measured_spread: Mapping[str, float] | None = None,
    measured_runs: int = 1,
    gate: GateSettings | None = None,
) -> Verdict:
    """The verdict of one run; every state that is not a plain pass says why in ``notes``."""
    if entry is None:
        return Verdict(
            Outcome.NO_BASELINE,
            notes=(f"no baseline for this profile in {baseline_file}",),
        )
    if entry.status == "failed":
        return Verdict(
            Outcome.NO_BASELINE,
            notes=(
                f"the baseline in {baseline_file} records this configuration as failed "
                f"({entry.error or 'no error recorded'}); it runs now, so record real numbers",
            ),
        )
    differences = workload_differences(entry.workload, workload)
    if differences:
        return Verdict(
            Outcome.WORKLOAD_CHANGED,
            notes=(
                "the workload changed since the baseline was recorded: " + "; ".join(differences),
            ),
        )
    notes: list[str] = []
    if entry.engine_version and engine_version and entry.engine_version != engine_version:
        notes.append(
            f"engine version changed: baseline {entry.engine_version}, now {engine_version}"
        )
    rows = compare(
        entry,
        measured,
        tolerance_overrides=tolerance_overrides,
        measured_spread=measured_spread,
        measured_runs=measured_runs,
        gate=gate,
    )
    statuses = {row.status for row in rows}
    if "regressed" in statuses:
        outcome = Outcome.REGRESSED
    elif "improved" in statuses:
        outcome = Outcome.IMPROVED
        notes.append("improved beyond tolerance: refresh the baseline with --update-baselines")
    else:
        outcome = Outcome.PASS
    return Verdict(outcome, comparisons=rows, notes=tuple(notes))
