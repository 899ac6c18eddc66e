"""The seeds' tables from stored baselines alone: no engine, no run.

Two ways to pick what to compare, both over one folder ``baselines/<hardware>/<model>/``:

- named configurations: ``--reference vllm --variant trtllm:optimized,trtllm`` (a
  configuration is ``ENGINE`` for that engine file's ``profiles:`` or ``ENGINE:VARIANT`` for
  its ``variants.VARIANT``; after a comma, configurations that fill the profiles the first one
  did not measure, each such figure footnoted);
- the folder's ``summary.yaml`` (a document's own summary): its cases, each figure taken from
  the engine file entry the summary points at, with the document's printed percentage and its
  errata beside the computed change; and its optimization steps (最適化項目の一覧).

The computed change is always ``(variant - reference) / reference``; where a document printed
something else, both are shown and the footnote says why.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import ConfigError
from pytest_llmperf.gate.store import read_document
from pytest_llmperf.reports.tables import Table, VariantRow, change_pct, format_pct, variant_table

SUMMARY_FILE = "summary.yaml"
KPIS = ("total_token_throughput", "mean_tpot_ms")


@dataclass(frozen=True)
class Source:
    """One configuration in a baseline folder: an engine file, and a variant of it or not."""

    engine: str
    variant: str | None = None

    @property
    def label(self) -> str:
        return self.engine if self.variant is None else f"{self.engine}:{self.variant}"

    @classmethod
    def parse(cls, text: str) -> Source:
        engine, _, variant = text.strip().partition(":")
        if not engine or (_ and not variant):
            raise ConfigError(f"expected ENGINE or ENGINE:VARIANT, got {text!r}")
        return cls(engine, variant or None)


@dataclass(frozen=True)
class Figures:
    """What a baseline entry says about one configuration on one profile."""

    total_token_throughput: float | None
    mean_tpot_ms: float | None
    error: str | None = None  # the configuration (or this profile of it) failed
    found: bool = True  # False: the configuration never measured this profile


class Folder:
    """The engine files of one baseline folder, each read once."""

    def __init__(self, path: Path) -> None:
        if not path.is_dir():
            raise ConfigError(f"--baselines {path}: not a folder of baseline files")
        self.path = path
        self._documents: dict[str, dict[str, Any]] = {}

    def document(self, engine: str) -> dict[str, Any]:
        if engine not in self._documents:
            file = self.path / f"{engine}.yaml"
            if not file.is_file():
                present = sorted(p.stem for p in self.path.glob("*.yaml") if p.name != SUMMARY_FILE)
                raise ConfigError(
                    f"{file}: no such baseline file; this folder has {', '.join(present) or 'none'}"
                )
            self._documents[engine] = read_document(file)
        return self._documents[engine]

    def section(self, source: Source) -> tuple[dict[str, Any], str | None]:
        """The ``profiles:`` mapping of the configuration, and its error if it failed."""
        document = self.document(source.engine)
        if source.variant is None:
            return dict(document.get("profiles") or {}), None
        variants = document.get("variants") or {}
        if source.variant not in variants:
            raise ConfigError(
                f"{self.path / (source.engine + '.yaml')}: no variant {source.variant!r}; "
                f"its variants are {', '.join(variants) or 'none'}"
            )
        variant = variants[source.variant] or {}
        error = variant.get("error") if variant.get("status") == "failed" else None
        if variant.get("status") == "failed":
            error = error or "failed (no error recorded)"
        return dict(variant.get("profiles") or {}), error

    def profiles(self, source: Source) -> list[str]:
        return list(self.section(source)[0])

    def figures(self, source: Source, profile: str) -> Figures:
        entries, error = self.section(source)
        if error is not None:
            return Figures(None, None, error=error)
        entry = entries.get(profile)
        if not isinstance(entry, dict):
            return Figures(None, None, found=False)
        if entry.get("status") == "failed":
            return Figures(None, None, error=entry.get("error") or "failed (no error recorded)")
        metrics = entry.get("metrics") or {}
        return Figures(_number(metrics, KPIS[0]), _number(metrics, KPIS[1]))


def _number(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Configuration:
    """A named configuration: the first source, then sources that fill its gaps."""

    label: str
    sources: tuple[Source, ...]

    @classmethod
    def parse(cls, text: str) -> Configuration:
        label, has_label, spec = text.partition("=")
        if not has_label:
            spec, label = label, ""
        sources = tuple(Source.parse(part) for part in spec.split(",") if part.strip())
        if not sources:
            raise ConfigError(f"expected [LABEL=]ENGINE[:VARIANT][,...], got {text!r}")
        return cls(label.strip() or sources[0].label, sources)


def _row(folder: Folder, config: Configuration, profile: str) -> VariantRow | None:
    first = folder.figures(config.sources[0], profile)
    if first.error is not None:
        return VariantRow(config.label, profile, None, None, error=first.error)
    if first.found:
        return VariantRow(config.label, profile, first.total_token_throughput, first.mean_tpot_ms)
    for source in config.sources[1:]:
        filled = folder.figures(source, profile)
        if filled.found and filled.error is None:
            return VariantRow(
                config.label,
                profile,
                filled.total_token_throughput,
                filled.mean_tpot_ms,
                note=f"{config.sources[0].label} has no {profile} entry; figure of {source.label}",
            )
    return None


def configuration_table(
    folder: Folder,
    reference: Configuration,
    others: Sequence[Configuration],
    profiles: Sequence[str] | None = None,
) -> Table:
    """Per profile: the reference and every other configuration, with the change against it."""
    configs = [reference, *others]
    if profiles is None:
        seen: dict[str, None] = {}
        for config in configs:
            for source in config.sources:
                seen.update(dict.fromkeys(folder.profiles(source)))
        profiles = list(seen)
    rows: list[VariantRow] = []
    for profile in profiles:
        for config in configs:
            row = _row(folder, config, profile)
            if row is None:
                row = VariantRow(config.label, profile, None, None)  # "not measured"
            rows.append(row)
    return variant_table(rows, reference.label)


# -- a document's own summary (summary.yaml) ---------------------------------------------------


def _ref(raw: Any, where: str) -> tuple[Source, str | None]:
    if not isinstance(raw, dict) or "file" not in raw:
        raise ConfigError(f"{SUMMARY_FILE}: {where}: expected a mapping with file and variant")
    return Source(str(raw["file"]).removesuffix(".yaml"), raw.get("variant")), raw.get("profile")


def read_summary(folder: Folder) -> dict[str, Any]:
    path = folder.path / SUMMARY_FILE
    if not path.is_file():
        raise ConfigError(
            f"{folder.path}: no {SUMMARY_FILE}; name the configurations with --reference and "
            f"--variant instead"
        )
    return read_document(path)


def document_table(folder: Folder) -> Table:
    """The summary's cases: reference vs optimized per profile, computed and as printed."""
    summary = read_summary(folder)
    base_source, _ = _ref(summary.get("baseline"), "baseline")
    opt_source, _ = _ref(summary.get("optimized"), "optimized")
    rows: list[VariantRow] = []
    for case, raw in (summary.get("cases") or {}).items():
        for role, declared in (("baseline", base_source), ("optimized", opt_source)):
            source, profile = _ref(raw.get(role), f"cases.{case}.{role}")
            figures = folder.figures(source, profile or case)
            if not figures.found:
                raise ConfigError(
                    f"{SUMMARY_FILE}: cases.{case}.{role} points at {source.label} "
                    f"{profile or case}, which {source.engine}.yaml does not hold"
                )
            notes = []
            if source != declared:
                notes.append(f"figure of {source.label}, as the document's table uses it")
            printed = raw.get("printed_change_pct") if role == "optimized" else None
            for erratum in raw.get("errata") or []:
                field = str(erratum.get("field") or "")
                if field.split(".")[0] == ("baseline" if role == "baseline" else "optimized") or (
                    field == "change_pct" and role == "optimized"
                ):
                    notes.append(
                        f"erratum ({field}): printed {erratum.get('printed')}, correct "
                        f"{erratum.get('correct')}; " + " ".join(str(erratum.get("note")).split())
                    )
            rows.append(
                VariantRow(
                    declared.label,
                    str(case),
                    figures.total_token_throughput,
                    figures.mean_tpot_ms,
                    error=figures.error,
                    printed_change_pct=None if printed is None else float(printed),
                    note="; ".join(notes) or None,
                )
            )
    return variant_table(rows, base_source.label)


def steps_table(folder: Folder, profile: str = "sharegpt") -> Table:
    """The optimization steps (最適化項目の一覧): every configuration each step tried, its
    throughput against the document's baseline, and the gain the document printed."""
    summary = read_summary(folder)
    base_source, _ = _ref(summary.get("baseline"), "baseline")
    base = folder.figures(base_source, profile)
    header = ("step", "configuration", "command", f"{profile} tok/s", "vs baseline", "printed")
    body: list[tuple[str, ...]] = []
    for step in summary.get("steps") or []:
        adopted = step.get("adopted")
        adopted_source = _ref(adopted, "adopted")[0] if adopted else None
        for index, raw in enumerate(step.get("tried") or []):
            source, _ = _ref(raw, f"steps.{step.get('name')}.tried")
            figures = folder.figures(source, profile)
            command = _command(folder, source, profile)
            label = source.label + (" (adopted)" if source == adopted_source else "")
            if figures.error is not None:
                numbers = ("failed", figures.error)
            elif not figures.found or figures.total_token_throughput is None:
                numbers = ("not measured", "-")
            else:
                change = (
                    format_pct(change_pct(figures.total_token_throughput, base_tput))
                    if (base_tput := base.total_token_throughput) and source != base_source
                    else "-"
                )
                numbers = (f"{figures.total_token_throughput:.2f}", change)
            first = index == 0
            body.append(
                (
                    str(step.get("label") or step.get("name")) if first else "",
                    label,
                    command,
                    *numbers,
                    str(step.get("printed_gain")) if first else "",
                )
            )
    return Table(header, tuple(body))


def _command(folder: Folder, source: Source, profile: str) -> str:
    document = folder.document(source.engine)
    if source.variant is not None:
        variant = (document.get("variants") or {}).get(source.variant) or {}
        entry = (variant.get("profiles") or {}).get(profile) or {}
        return str(entry.get("command") or variant.get("command") or "")
    entry = (document.get("profiles") or {}).get(profile) or {}
    return str(entry.get("command") or "")


# -- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_llmperf.reports variants",
        description="Print the seeds' comparison tables from stored baselines alone.",
    )
    parser.add_argument(
        "--baselines", required=True, type=Path, help="folder baselines/<hardware>/<model>"
    )
    parser.add_argument(
        "--reference",
        help="the configuration the others are measured against: ENGINE or ENGINE:VARIANT",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="a configuration to compare: [LABEL=]ENGINE[:VARIANT][,FILL...] (repeatable)",
    )
    parser.add_argument("--profiles", help="profiles to show, comma-separated (default: all)")
    parser.add_argument(
        "--markdown", action="store_true", help="print Markdown tables instead of text"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def render(table: Table) -> str:
        return table.markdown() if args.markdown else table.text()

    try:
        folder = Folder(args.baselines)
        if args.reference or args.variant:
            if not args.reference:
                raise ConfigError("--variant needs --reference (the configuration to compare with)")
            profiles = (
                [p.strip() for p in args.profiles.split(",") if p.strip()]
                if args.profiles
                else None
            )
            table = configuration_table(
                folder,
                Configuration.parse(args.reference),
                [Configuration.parse(v) for v in args.variant],
                profiles,
            )
            print(render(table))
        else:
            print("summary (結論): total token throughput and mean TPOT against the baseline")
            print(render(document_table(folder)))
            print()
            print("optimization steps (最適化項目の一覧):")
            print(render(steps_table(folder)))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
