"""A user's performance suite inside pytester, pointed at a stand-in server as the endpoint.

The pytester tests of the gate (tests/plugin, tests/noise) each write the same three files
(an ini naming a profiles file, the profiles, a one-line suite) and read back the same
baseline file and results JSON; they differ in the profiles and the endpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

SUITE = "def test_serving(llmperf):\n    llmperf.check()\n"
# The profile every gate test measures: small enough for a stand-in to answer in milliseconds.
MINI_PROFILES = """\
profiles:
  mini:
    dataset: random
    input_len: 32
    output_len: 8
    num_prompts: 8
"""


def write_suite(
    pytester: pytest.Pytester,
    *,
    endpoint: str,
    model_dir: Path,
    profiles_yaml: str,
    ini_lines: tuple[str, ...] = (),
    profile: str = "mini",
) -> list[str]:
    """Write the suite's files; return the options of a run against ``endpoint`` that writes
    baselines under the pytester folder and the results to ``results.json`` there."""
    ini = [
        "[pytest]",
        "llmperf_profiles = profiles.yaml",
        "asyncio_default_fixture_loop_scope = function",
        *ini_lines,
    ]
    pytester.makeini("\n".join(ini) + "\n")
    pytester.path.joinpath("profiles.yaml").write_text(profiles_yaml)
    pytester.makepyfile(test_suite=SUITE)
    return [
        "--engine=external",
        f"--endpoint={endpoint}",
        f"--model={model_dir}",
        "--hardware=cpu",
        "--llmperf-warmups=0",
        f"--llmperf-profile={profile}",
        f"--baseline-dir={pytester.path / 'baselines'}",
        f"--llmperf-json={pytester.path / 'results.json'}",
        "-p",
        "no:cacheprovider",
    ]


def baseline_file(pytester: pytest.Pytester, model_dir: Path, key: str = "cpu") -> Path:
    """Where the suite's baselines for the external engine live under hardware ``key``."""
    from pytest_llmperf.gate.store import baseline_path

    return baseline_path(pytester.path / "baselines", key, str(model_dir), "external")


def edit_entry(path: Path, profile: str, **sections: dict[str, float]) -> None:
    """Change values of one entry's sections (``metrics=``, ``tolerances=``) as a reviewer
    would edit the file; other values of those sections stay."""
    document = yaml.safe_load(path.read_text())
    for section, values in sections.items():
        document["profiles"][profile][section].update(values)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def set_tolerances(path: Path, profile: str, tolerances: dict[str, float]) -> None:
    """Replace one entry's tolerances (a shared machine needs wide ones)."""
    document = yaml.safe_load(path.read_text())
    document["profiles"][profile]["tolerances"] = dict(tolerances)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def record(
    pytester: pytest.Pytester,
    options: list[str],
    path: Path,
    tolerances: dict[str, float],
    *extra: str,
) -> Path:
    """Record the profile with ``--update-baselines`` and give its entry ``tolerances``."""
    pytester.runpytest(*options, "--update-baselines", *extra).assert_outcomes(passed=1)
    set_tolerances(path, "mini", tolerances)
    return path


def first_result(pytester: pytest.Pytester) -> dict[str, Any]:
    """The first result of the last run's results JSON."""
    document: dict[str, Any] = json.loads(pytester.path.joinpath("results.json").read_text())
    result: dict[str, Any] = document["results"][0]
    return result
