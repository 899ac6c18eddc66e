"""Baseline files: find, load and validate them, and write them safely.

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
from pytest_llmperf.atomic import locked, temporary_pattern, write_atomically, write_target
from pytest_llmperf.errors import BaselineError

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
    "sweep",
)
_VARIANT_ORDER = ("command", "model", "engine_version", "status", "error", "note", "profiles")


def slug(text: str) -> str:
    """A safe path component: ``Qwen/Qwen3-32B`` → ``qwen3-32b``; never ``..`` or a slash."""
    last = text.rstrip("/").rsplit("/", 1)[-1].lower()
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", last).strip("-.")
    return cleaned or "unnamed"


def baseline_path(root: Path, hardware: str, model: str, engine: str) -> Path:
    from pytest_llmperf.gate.modelkey import model_folder

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
    sweep: dict[str, Any] | None = None  # a sweep profile's curve and capacity (gate.sweep)


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
    sweep = raw.get("sweep")
    if sweep is not None and not isinstance(sweep, dict):
        raise _fail(path, f"{where}.sweep", "expected a mapping (a sweep's curve and capacity)")
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
        sweep=sweep,
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
    if isinstance(value, list):
        return [_rounded(item) for item in value]
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
    path = write_target(path)  # a linked baseline is updated where it lives
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path, lock_timeout, "baseline", BaselineError):
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
        for rounded in ("spread", "sweep"):
            if rounded in new_entry:
                new_entry[rounded] = _rounded(new_entry[rounded])
        profiles[profile] = new_entry
        section["profiles"] = dict(sorted(profiles.items()))
        if variant is not None:
            document["variants"][variant] = _ordered(section, _VARIANT_ORDER)
        _remove_stale_temporaries(path)
        write_atomically(path, redact.text(dump_document(document)))
