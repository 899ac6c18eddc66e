"""Sessions that run several engines and print the comparison table, for the e2e tests."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SUITE = "def test_serving(llmperf):\n    llmperf.check()\n"


def run_engines(
    pytester: pytest.Pytester, *options: str, profiles: tuple[str, ...], baselines: Path
) -> pytest.RunResult:
    """One pytest session over ``profiles`` with the engine ``options``, recording baselines."""
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester.runpytest_subprocess(
        *options,
        "--hardware=cpu",
        f"--llmperf-profile={','.join(profiles)}",
        "--llmperf-warmups=2",
        "--update-baselines",
        f"--baseline-dir={baselines}",
        "-p",
        "no:cacheprovider",
        "-v",
        timeout=600,
    )


def comparison_table(
    output: str, reference: str, profiles: tuple[str, ...]
) -> tuple[dict[str, int], dict[tuple[str, str], list[str]]]:
    """The comparison table's columns by name, and its rows keyed by (profile, variant)."""
    title = f"comparison (total token throughput and mean TPOT against {reference})"
    table = output.split(title, 1)[1]
    header_line = next(line for line in table.splitlines() if line.startswith("profile"))
    header = re.split(r"\s{2,}", header_line.strip())
    rows = {
        (cells[0], cells[1]): cells
        for line in table.splitlines()
        if (cells := re.split(r"\s{2,}", line.strip()))[0] in profiles
    }
    return {name: index for index, name in enumerate(header)}, rows
